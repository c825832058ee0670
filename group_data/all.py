"""Project-wide defaults for every site. Override per site in group_data/<site>.py (the group
named after the inventory file wins over all.py), per group in group_data/<group>.py, or per
host in the inventory. `gpuinfra validate inventory/<site>.py` checks the merged result."""

# Schedulers to deploy: any of "slurm", "kubernetes".
schedulers = ["slurm"]

# NVIDIA driver branch; the roles install 535 on Debian 12, Ubuntu 22.04 and 24.04.
driver_branch = "535"

# MIG strategy as the Kubernetes device plugin understands it: "single" (one profile per node)
# or "mixed".
mig_strategy = "single"

# "never" (report "reboot needed" per host) or "if-needed" (reboot when a change needs it).
reboot_policy = "never"

# Offline and mirrored sites: a local apt mirror (URL, or {"debian": URL, "ubuntu": URL}),
# an HTTP proxy for apt ("http://proxy:3128"), and a mirror of NVIDIA's container-toolkit repo.
offline = False
apt_mirror = None
apt_proxy = None
nvidia_repo_mirror = None
