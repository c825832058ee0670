"""Site-wide values of the GB200 NVL72 example site (inventory/gb200.py)."""

cluster_name = "gb200"
schedulers = ["slurm"]
# Blackwell needs the 570 branch or newer (gpuinfra/knowledge/gpus.py); 580 is the long-term one.
driver_branch = "580"
# Each NVL72 rack is one NVLink domain: Slurm's topology/block (topology.conf BlockName lines,
# Slurm 23.11 and later; `sbatch --segment` sizes a job's pieces inside a block).
fabric_blocks = {"nvl72-rack1": [f"gb1{t:02d}" for t in range(1, 5)],
                 "nvl72-rack2": [f"gb2{t:02d}" for t in range(1, 5)]}
