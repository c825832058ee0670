"""Data keys of the `slurm` role: default and rule of each (override them in group_data).

Also read from the cluster spec: ``cluster_name``, ``slurm_partitions``, ``slurm_accounting``
and each node's GPUs (``gpu_model``, ``gpu_count``, ``gpu_sharing``). Checked by the spec gate
before any host is touched; keys whose value lands in slurm.conf must agree on every host.
"""

from gpuinfra.slurm.accounting import ACCOUNTS, USERS
from gpuinfra.slurm.extra import CONF_EXTRA, REBOOT_PROGRAM, STATE_DIR
from gpuinfra.slurm.features import FEATURES, WEIGHT
from gpuinfra.slurm.gres import GRES_TYPE
from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.model import DEFAULT_STATE_DIR
from gpuinfra.spec.rules import database_name, integer, optional, sql_name

# The scheduler this role belongs to: a deploy running it alone defaults to it.
SCHEDULER = "slurm"

KNOBS = (
    # GRES type of the node's GPUs (``--gres=gpu:<type>:N``). None: the spec's gpu_model in
    # lower case (h100-sxm5-80gb), unambiguous across SKUs. Set per host or group to override.
    Knob("slurm_gpu_type", None, optional(GRES_TYPE), "the GRES type of the node's GPUs"),
    # The node's own Slurm features (``sbatch -C``), added to those the spec gives every node
    # (GPU family and model, GPU count, nvswitch/nvlink, infiniband/roce: gpuinfra.slurm.features).
    Knob("slurm_node_features", [], FEATURES, "the node's own Slurm features, beside the "
         "spec's"),
    # The node's Slurm Weight (the lowest fill first). None: 1 + its GPU memory in GB, so the
    # nodes with less GPU memory fill first.
    Knob("slurm_node_weight", None, WEIGHT, "the node's Slurm Weight (None: 1 + its GPU "
         "memory in GB)"),
    # Memory kept from jobs, in percent of MemTotal (RealMemory = MemTotal less this): a node
    # registering less memory than configured is drained, and the OS needs room.
    Knob("slurm_memory_reserve_percent", 2, integer(0, 49),
         "memory kept from jobs, percent of MemTotal"),
    # Default memory (MiB) and CPUs per allocated GPU (DefMemPerGPU, DefCpuPerGPU on each
    # partition with GPU nodes) for jobs that ask for GPUs without --mem / --cpus-per-gpu.
    # None: computed from the partition's nodes (RealMemory, already less the reserve, and
    # CPUs, each divided by the node's GPUs; the smallest over the partition); 0: left out.
    # A partition's own 'def_mem_per_gpu'/'def_cpu_per_gpu' wins over these.
    Knob("slurm_def_mem_per_gpu", None, optional(integer(0, 2**31 - 1)),
         "DefMemPerGPU in MiB (None: computed from the nodes)", site_wide=True),
    Knob("slurm_def_cpu_per_gpu", None, optional(integer(0, 65533)),
         "DefCpuPerGPU (None: computed from the nodes)", site_wide=True),
    # Extra slurm.conf settings, {"Key": "value"}; Slurm checks them (slurmd -G on the staged
    # file) before any daemon is restarted, so a typo is refused and the cluster keeps running.
    Knob("slurm_conf_extra", {}, CONF_EXTRA, "extra slurm.conf settings", site_wide=True),
    # `scontrol reboot` (and power saving): slurm.conf(5) 22.05.8, RebootProgram: "A node will
    # be marked DOWN if it doesn't reboot within ResumeTimeout", whose default is 60 s; a GPU
    # server's POST alone takes minutes. The program slurmd runs (as root) to reboot the node.
    Knob("slurm_resume_timeout", 900, integer(60, 7200),
         "ResumeTimeout in seconds: how long a rebooting node may take", site_wide=True),
    Knob("slurm_reboot_program", "/usr/sbin/reboot", REBOOT_PROGRAM,
         "RebootProgram: what slurmd runs to reboot a node", site_wide=True),
    # slurmctld's saved state (jobs, nodes, reservations): StateSaveLocation. With a backup
    # controller (the 'slurm_backup' group) a folder both controllers mount, which the site
    # provides (NFS...): the role checks at deploy that each controller sees the head's files
    # there (gpuinfra/spec/controllers.py refuses a backup with the local default).
    Knob("slurm_state_save_location", DEFAULT_STATE_DIR, STATE_DIR,
         "StateSaveLocation: slurmctld's saved state", site_wide=True),
    # slurm.conf(5) 22.05.8 SlurmctldTimeout: "The interval, in seconds, that the backup
    # controller waits for the primary controller to respond before assuming control. The
    # default value is 120 seconds. May not exceed 65533."
    Knob("slurm_ctld_timeout", 120, integer(3, 65533),
         "SlurmctldTimeout: seconds a backup controller waits before taking over",
         site_wide=True),
    # Seconds before slurmctld marks a silent node DOWN.
    Knob("slurm_slurmd_timeout", 300, integer(10, 86400), "SlurmdTimeout in seconds",
         site_wide=True),
    # Accounting database (slurm_accounting in the spec turns it on): database and user
    # (MariaDB, unix_socket authentication for the slurm user: no password to keep).
    Knob("slurm_db_name", "slurm_acct_db", database_name(), "the accounting database"),
    Knob("slurm_db_user", "slurm", sql_name(), "the accounting database's user (an OS user)"),
    # With accounting: the site's Slurm accounts (under root) and users with their default
    # account ({user: account}), added to slurmdbd where missing (never removed or changed).
    # Users and their UIDs are the site's: each must exist on every node (gpuinfra manages no
    # users).
    Knob("slurm_accounts", [], ACCOUNTS, "Slurm accounts made with accounting", site_wide=True),
    Knob("slurm_users", {}, USERS, "Slurm users and their default account, with accounting",
         site_wide=True),
)

DEFAULTS = defaults(KNOBS)
