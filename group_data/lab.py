"""Site-wide values of the local lab (inventory/lab.py)."""

cluster_name = "lab"
schedulers = ["slurm"]
