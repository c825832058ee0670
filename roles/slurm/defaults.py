"""Data keys of the `slurm` role, with their defaults (override them in group_data).

Also read from the cluster spec: ``cluster_name``, ``slurm_partitions``, ``slurm_accounting``
and each node's GPUs (``gpu_model``, ``gpu_count``, ``gpu_sharing``).
"""

DEFAULTS = {
    # GRES type of the node's GPUs (``--gres=gpu:<type>:N``). None: the spec's gpu_model in
    # lower case (h100-sxm5-80gb), unambiguous across SKUs. Set per host or group to override.
    "slurm_gpu_type": None,
    # Memory kept from jobs, in percent of MemTotal (RealMemory = MemTotal less this): a node
    # registering less memory than configured is drained, and the OS needs room.
    "slurm_memory_reserve_percent": 2,
    # Extra slurm.conf settings, {"Key": "value"}; Slurm checks them (slurmd -G on the staged
    # file) before any daemon is restarted, so a typo is refused and the cluster keeps running.
    "slurm_conf_extra": {},
    # Seconds before slurmctld marks a silent node DOWN.
    "slurm_slurmd_timeout": 300,
    # Accounting database (slurm_accounting in the spec turns it on): database and user
    # (MariaDB, unix_socket authentication for the slurm user: no password to keep).
    "slurm_db_name": "slurm_acct_db",
    "slurm_db_user": "slurm",
}
