"""gpuinfra deploy: `pyinfra inventory/<site>.py deploy.py`.

The table of contents of a deploy. config.py has validated the site's spec and every role's
data before pyinfra connected; here the run's Site (the typed spec, built once per run) and
this host's node are handed to each role of :data:`ROLES`, in its order. Where a role applies
(GPU nodes, Slurm nodes, hypervisors...) is the role's own declaration (``applies`` in its
``__init__.py``), the same one its entry file uses: `pyinfra inventory/<site>.py
roles/<role>/deploy.py`. A new role is its folder under roles/ and its line here.
"""

from importlib import import_module

from pyinfra import host

from gpuinfra_deploy.run.ahead import packages_ahead
from gpuinfra_deploy.run.site import this_node

# Every role, in the order each host runs them (gpuinfra_roles.<name>.ROLE).
ROLES = [import_module(f"gpuinfra_roles.{name}").ROLE for name in (
    "common",  # hostname, /etc/hosts, apt mirror and proxy, chrony, sysctls: every host
    "containerd",  # Kubernetes nodes (every host with containerd_everywhere)
    "vfio",  # hypervisors: IOMMU, vfio-pci for the VMs' devices, before any GPU driver
    # GPU nodes; the four share one driver release per node
    "nvidia_driver",
    "fabric_manager",  # NVSwitch profiles only (and fabric_manager_enabled)
    "container_toolkit",  # after containerd; unless container_toolkit_enabled
    "gpu_sharing",  # MIG layout (kept at boot), MPS daemon: before the schedulers
    "rdma",  # hosts with rdma_nics, after the driver (nvidia-peermem); ATS, ACS
    "health",  # node health check (Slurm workers, GPU nodes): before slurm.conf names it
    # The scheduler roles need the head: a failed head stops them everywhere; every host meets
    # at each of their steps (gpuinfra_deploy/pyinfra_patches/schedule.py)
    "munge",  # Slurm nodes: one key for the cluster, from the head
    "slurm",  # slurmctld on the head, slurmd on the workers
    "job_containers",  # Slurm nodes: the jobs' container runtime, after slurmd
    "kubernetes",  # Kubernetes nodes: control plane on the head, workers joined
    "monitoring",  # Prometheus + Alertmanager on the head, exporters, GPU metrics
    "logs",  # every node's journal on the head (journal-upload -> journal-remote, TLS)
)]

site, node = this_node()

# host.loop: pyinfra tells operations apart by the line numbers of their calls; the loop's
# position keeps one role's operations apart from another's made on the same lines.
for role in host.loop(ROLES):
    role.apply(site, node)
    if role.name == "common":
        # apt is set up: the distribution's packages of every role this host gets, in one
        # apt transaction (not one per role), each host at its own pace: the head installs
        # Slurm, MariaDB and Prometheus while the workers install theirs and their driver
        # (gpuinfra_deploy/run/ahead.py)
        packages_ahead(site, node, ROLES)
