"""Slurm's backup controllers (the 'slurm_backup' group): each a later ``SlurmctldHost`` that
takes over when the head's slurmctld stops answering for ``SlurmctldTimeout`` seconds, from the
state the head saved. slurm.conf(5) of 22.05.8 (Debian 12), StateSaveLocation: "If you have a
secondary SlurmctldHost configured, this location should be readable and writable by both
systems"; so a backup without a shared state directory is refused here, before any host is
touched (the role then checks at deploy that every controller sees the head's files there).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuinfra.spec.checks import WHERE_ALL, Collector
from gpuinfra.spec.model import (
    BACKUP_GROUP,
    DEFAULT_STATE_DIR,
    HEAD_GROUP,
    HYPERVISOR_GROUP,
    WORKER_GROUP,
    NodeSpec,
)

_OTHER_ROLES = {HEAD_GROUP: "the head runs the primary slurmctld",
                WORKER_GROUP: "a worker's CPUs and memory are its jobs' (a controller there "
                              "competes with them, and a job that fills the node stalls it)",
                HYPERVISOR_GROUP: "a hypervisor's CPUs and memory are its VMs'"}


def check_backup_controllers(nodes: Sequence[NodeSpec], schedulers: Sequence[str],
                             errs: Collector) -> None:
    backups = [n for n in nodes if n.is_backup_controller]
    if not backups:
        return
    if "slurm" not in schedulers:
        for node in backups:
            errs.add(node.name, "group", BACKUP_GROUP, "a Slurm backup controller on a site "
                     f"without Slurm (schedulers = {list(schedulers)})",
                     f"hosts in '{BACKUP_GROUP}' only where the site runs Slurm",
                     f"remove {node.name} from {BACKUP_GROUP} = [...] in inventory/<site>.py, "
                     f"or add 'slurm' to schedulers {WHERE_ALL}")
        return
    for node in backups:
        for group, why in _OTHER_ROLES.items():
            if group in node.groups:
                errs.add(node.name, "group", f"{BACKUP_GROUP}, {group}", f"a backup controller "
                         f"is a host of its own: {why}", f"a host in '{BACKUP_GROUP}' and in "
                         "none of head, workers, hypervisors",
                         f"give the backup controller a host of its own, or remove "
                         f"{node.name} from {BACKUP_GROUP} = [...] in inventory/<site>.py")
    # Judged where the slurm role's knobs are (a spec built without them has no such value).
    state = backups[0].settings.get("slurm_state_save_location")
    if state == DEFAULT_STATE_DIR:
        names = ", ".join(n.name for n in backups)
        errs.add(backups[0].name, "slurm_state_save_location", state,
                 f"a backup controller ({names}) takes over from the state the head saved, and "
                 f"{DEFAULT_STATE_DIR} is each host's own disk: it would start with no jobs "
                 "(slurm.conf(5) StateSaveLocation: readable and writable by both systems)",
                 "a folder on a filesystem the head and every backup controller mount (NFS "
                 "or another shared filesystem the site provides)",
                 f"mount a shared filesystem on the head and on {names}, and set "
                 f"slurm_state_save_location = '/shared/slurm/state' (its folder) {WHERE_ALL}")
