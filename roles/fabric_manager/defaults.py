"""Data keys of the `fabric_manager` role, with their defaults (override them in group_data).

The role acts only on hosts whose ``gpu_topology`` profile requires Fabric Manager
(``nvswitch-all-to-all``); ``driver_branch`` comes from the cluster spec.
"""

DEFAULTS = {
    # Install and run Fabric Manager where the topology needs it. Sites whose NVIDIA
    # repository is unreachable for Debian (the lab) set False: the role then only warns.
    "fabric_manager_enabled": True,
    # Exact package version. None: the default for the distribution and branch; it must carry
    # the same upstream version as the driver (FM refuses to run against another driver).
    "fabric_manager_version": None,
    # Debian only: NVIDIA's CUDA repository (or a site mirror of it), which carries
    # nvidia-fabricmanager-<branch>; Debian's archive does not. None: NVIDIA's URL.
    "fabric_manager_repo_url": None,
    # Its signing key (None: <repo>/3bf863cc.pub, NVIDIA's CUDA repository key).
    "fabric_manager_repo_key_url": None,
}
