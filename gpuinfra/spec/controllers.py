"""Slurm's backup controllers and login nodes, each a host of its own in Slurm alone (and,
with the same rule, Kubernetes' control planes beside the head, in Kubernetes alone).

Backup controllers (the 'slurm_backup' group): each a later ``SlurmctldHost`` that
takes over when the head's slurmctld stops answering for ``SlurmctldTimeout`` seconds, from the
state the head saved. slurm.conf(5) of 22.05.8 (Debian 12), StateSaveLocation: "If you have a
secondary SlurmctldHost configured, this location should be readable and writable by both
systems"; so a backup without a shared state directory is refused here, before any host is
touched (the role then checks at deploy that every controller sees the head's files there).

Login nodes (the 'login' group): Slurm's client commands and MUNGE with the head's slurm.conf,
no slurmd (Slurm 22.05 has no sackd to serve them configless).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuinfra.spec.checks import WHERE_ALL, Collector
from gpuinfra.spec.model import (
    BACKUP_GROUP,
    CONTROL_PLANE_GROUP,
    DEFAULT_STATE_DIR,
    HEAD_GROUP,
    HYPERVISOR_GROUP,
    LOGIN_GROUP,
    ONE_SCHEDULER_GROUPS,
    WORKER_GROUP,
    NodeSpec,
)

# Why a backup controller, a login node or a control plane beside the head is a host of its
# own, per group it is also in.
_OTHER_ROLES = {
    BACKUP_GROUP: {HEAD_GROUP: "the head runs the primary slurmctld",
                   WORKER_GROUP: "a worker's CPUs and memory are its jobs' (a controller there "
                                 "competes with them, and a job that fills the node stalls it)",
                   HYPERVISOR_GROUP: "a hypervisor's CPUs and memory are its VMs'",
                   LOGIN_GROUP: "users' sessions and builds on a login node would compete "
                                "with the controller"},
    LOGIN_GROUP: {HEAD_GROUP: "users' sessions on the head compete with slurmctld (and the "
                              "head has the client commands already)",
                  WORKER_GROUP: "a worker runs slurmd and a login node none (it has the "
                                "client commands already)",
                  HYPERVISOR_GROUP: "a hypervisor's CPUs and memory are its VMs'"},
    CONTROL_PLANE_GROUP: {
        HEAD_GROUP: "the head is the first control plane already",
        WORKER_GROUP: "a worker's CPUs and memory are its pods' (etcd stalls under a busy "
                      "node, and its members then lose their quorum)",
        HYPERVISOR_GROUP: "a hypervisor's CPUs and memory are its VMs'",
        BACKUP_GROUP: "a Slurm backup controller is a host of its own",
        LOGIN_GROUP: "users' sessions on a login node would compete with etcd"},
}
_WHAT = {BACKUP_GROUP: "a Slurm backup controller", LOGIN_GROUP: "a Slurm login node",
         CONTROL_PLANE_GROUP: "a Kubernetes control plane"}
_SCHEDULER_NAMES = {"slurm": "Slurm", "kubernetes": "Kubernetes"}


def check_hosts_of_their_own(nodes: Sequence[NodeSpec], schedulers: Sequence[str],
                             errs: Collector) -> None:
    """Backup controllers, login nodes and control planes beside the head: each on a site that
    runs its scheduler, each a host of its own; a backup with a shared state folder."""
    for group, others in _OTHER_ROLES.items():
        members = [n for n in nodes if group in n.groups]
        scheduler = ONE_SCHEDULER_GROUPS[group]
        name = _SCHEDULER_NAMES[scheduler]
        for node in members:
            if scheduler not in schedulers:
                errs.add(node.name, "group", group, f"{_WHAT[group]} on a site without {name} "
                         f"(schedulers = {list(schedulers)})",
                         f"hosts in '{group}' only where the site runs {name}",
                         f"remove {node.name} from {group} = [...] in inventory/<site>.py, "
                         f"or add '{scheduler}' to schedulers {WHERE_ALL}")
                continue
            for other, why in others.items():
                if other in node.groups:
                    errs.add(node.name, "group", f"{group}, {other}", f"{_WHAT[group]} is a "
                             f"host of its own: {why}", f"a host in '{group}' and in none of "
                             f"{', '.join(others)}", f"give it a host of its own, or remove "
                             f"{node.name} from {group} = [...] in inventory/<site>.py")
    backups = [n for n in nodes if n.is_backup_controller]
    if not backups or "slurm" not in schedulers:
        return
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
