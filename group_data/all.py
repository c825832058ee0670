"""Project-wide values for every site. Nothing is set here: each key below is shown with its
default, which lives once, in the spec (gpuinfra/spec/model.py: CLUSTER_KEYS). Set a value per
site in group_data/<site>.py (the group named after the inventory file wins over all.py), per
group in group_data/<group>.py, or per host in the inventory. `gpuinfra validate
inventory/<site>.py` checks the merged result."""

# Schedulers to deploy: any of "slurm", "kubernetes".
# schedulers = ["slurm"]

# NVIDIA driver branch; the roles install 535 on Debian 12, Ubuntu 22.04 and 24.04.
# driver_branch = "535"

# MIG strategy as the Kubernetes device plugin understands it: "single" (one profile per node)
# or "mixed".
# mig_strategy = "single"

# "never" (report "reboot needed" per host) or "if-needed" (reboot when a change needs it).
# reboot_policy = "never"

# Offline and mirrored sites: a local apt mirror (URL, or {"debian": URL, "ubuntu": URL}),
# an HTTP proxy for apt ("http://proxy:3128"), and a mirror of NVIDIA's container-toolkit repo.
# offline = False
# apt_mirror = None
# apt_proxy = None
# nvidia_repo_mirror = None

# Kubernetes (schedulers = ["kubernetes"], or both with node_schedulers per worker): the pinned
# release (1.33.x-1.35.x), its networks, the CNI and the NVIDIA device plugin release. See
# docs/roles.md "Kubernetes" and roles/kubernetes/README.md.
# kubernetes_version = "1.35.8"
# kubernetes_pod_cidr = "10.244.0.0/16"
# kubernetes_service_cidr = "10.96.0.0/12"
# kubernetes_cni = "flannel"
# kubernetes_device_plugin_version = "v0.17.1"
# kubernetes_image_repository = "registry.k8s.io"
# A worker in Slurm and Kubernetes at once: None (refused) or "drain" (you drain it in one
# scheduler before the other uses its GPUs).
# scheduler_sharing = None
