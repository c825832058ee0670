"""Site-wide values of the example site (inventory/example.py): an offline site with mirrors."""

cluster_name = "example"
schedulers = ["slurm"]
offline = True
apt_mirror = {"debian": "http://mirror.example.internal/debian",
              "ubuntu": "http://mirror.example.internal/ubuntu"}
apt_proxy = "http://proxy.example.internal:3128"
nvidia_repo_mirror = "http://mirror.example.internal/libnvidia-container"
# Partitions in Slurm's formats (docs/spec.md); DefMemPerGPU/DefCpuPerGPU computed per partition
# from its nodes (roles/slurm/README.md). `gpu: True`: every node has GPUs (checked).
slurm_partitions = [
    {"name": "hgx", "nodes": ["hgx01", "hgx02"], "default": True, "gpu": True,
     "max_time": "2-00:00:00", "default_time": "4:00:00"},
    {"name": "pcie", "nodes": ["pcie01"], "gpu": True, "max_time": "1:00:00",
     "priority_tier": 10},
]
# The InfiniBand fabric (Slurm's topology.conf): the HGX nodes on one leaf, the PCIe node on
# another, both under the spine; `sbatch --switches=1` keeps a job on one leaf.
fabric_switches = {"ib-leaf1": ["hgx01", "hgx02"], "ib-leaf2": ["pcie01"],
                   "ib-spine": ["ib-leaf1", "ib-leaf2"]}
# Monitoring from the site's mirrors of NVIDIA's CUDA repository (DCGM) and Grafana's.
monitoring_dcgm_repo_url = "http://mirror.example.internal/cuda/debian12/x86_64"
monitoring_grafana_repo_url = "http://mirror.example.internal/grafana"

# slurmctld's state, on the NFS export head01 and head02 (Slurm's backup controller) both
# mount: the backup takes over from it (refused with the local default).
slurm_state_save_location = "/shared/slurm/state"
