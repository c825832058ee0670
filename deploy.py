"""gpuinfra deploy: `pyinfra inventory/<site>.py deploy.py`.

The table of contents of a deploy. The site's spec is validated first (config.py stops the run
before any connection; this check covers API use); then each role runs on the hosts whose
groups ask for it. Every role is also usable alone:
`pyinfra inventory/<site>.py roles/<role>/deploy.py`.
"""

from pyinfra import host, inventory

from gpuinfra_cli.gate import require_valid

spec = require_valid(inventory)
node = spec.node(host.name)

# Roles join here as they land, in dependency order:
#   common (hostnames, time sync, apt mirrors, sysctls)       -> every host
#   nvidia_driver, fabric_manager, container_toolkit          -> hosts with gpu_model
#   munge, slurm (slurmctld on head, slurmd on workers)       -> when "slurm" in schedulers

# Roles import pyinfra's host context: imported after the spec gate.
from roles.common import common  # noqa: E402
from roles.container_toolkit import container_toolkit  # noqa: E402
from roles.fabric_manager import fabric_manager  # noqa: E402
from roles.munge import munge  # noqa: E402
from roles.nvidia_driver import nvidia_driver  # noqa: E402
from roles.slurm import slurm  # noqa: E402

common()

if node.gpus is not None:
    nvidia_driver()
    fabric_manager()  # NVSwitch profiles only (and fabric_manager_enabled)
    container_toolkit()  # only with container_toolkit_enabled

if "slurm" in spec.schedulers:
    munge()  # one key for the cluster, from the head
    slurm()  # slurmctld on the head, slurmd on the workers
