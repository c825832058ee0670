"""Data keys of the `fabric_manager` role: default and rule of each (override in group_data).

The role acts only on hosts whose ``gpu_topology`` profile requires Fabric Manager
(``nvswitch-all-to-all``); the driver release (branch and version) comes from the spec and
the nvidia_driver role's keys. Checked by the spec gate before any host is touched.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean, debian_version, http_url, optional

KNOBS = (
    # Install and run Fabric Manager where the topology needs it. Sites whose NVIDIA
    # repository is unreachable for Debian (the lab) set False: the role then only warns.
    Knob("fabric_manager_enabled", True, boolean(), "Fabric Manager where NVSwitch needs it"),
    # Exact package version. None: the default for the distribution and branch; it must carry
    # the same upstream version as the driver (FM refuses to run against another driver).
    Knob("fabric_manager_version", None, optional(debian_version()),
         "the exact Fabric Manager package version"),
    # Debian only: NVIDIA's CUDA repository (or a site mirror of it), which carries
    # nvidia-fabricmanager-<branch>; Debian's archive does not. None: NVIDIA's URL.
    Knob("fabric_manager_repo_url", None, optional(http_url()),
         "NVIDIA's CUDA repository or its mirror"),
    # Its signing key (None: <repo>/3bf863cc.pub, NVIDIA's CUDA repository key).
    Knob("fabric_manager_repo_key_url", None, optional(http_url()),
         "the CUDA repository's signing key URL"),
)

DEFAULTS = defaults(KNOBS)
