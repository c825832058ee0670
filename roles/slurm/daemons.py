"""The slurm role's daemons: whether one was running, what each needs at boot (order and
bounded restart, gpuinfra.units), slurmdbd with MariaDB on the head (accounting), and
slurmctld's state folder on the controllers (shared with a backup controller)."""

from __future__ import annotations

from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.facts.systemd import SystemdStatus
from pyinfra.operations import files, systemd

from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra.spec.model import DEFAULT_STATE_DIR
from gpuinfra_deploy.ops.boot import BootNeeds
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import role_file
from gpuinfra_roles.slurm.operations import (
    STATE_MARK,
    accounting_db,
    state_mark_text,
    state_shared,
)

SLURMDBD_CONF = "/etc/slurm/slurmdbd.conf"


def running_before(service: str) -> bool:
    unit = f"{service}.service"
    status = host.get_fact(SystemdStatus, user_mode=False, machine=None, user_name=None,
                           services=[unit])  # the question systemd.service asks
    return bool(status.get(unit))


# What the daemons need at boot (gpuinfra.units: order and bounded restart). Without it
# slurmctld races slurmdbd at boot and, with no saved state (a first boot, or a shutdown cut
# short), exits for good: "You are running with a database but ... we have no TRES from it".
_NETWORK = ("network-online.target", "nss-lookup.target")


def boot_needs(node: NodeSpec, accounting: bool) -> list[BootNeeds]:
    """What slurmctld (head, backup controllers) and slurmd (worker) need at boot."""
    needs = []
    if node.is_controller:
        dbd = ("slurmdbd.service",) if accounting and node.is_head else ()
        needs.append(BootNeeds("slurmctld.service", "munged for credentials, the controller's "
                               "name" + (", and slurmdbd answering" if accounting else ""),
                               ("munge.service", *_NETWORK, *dbd), ("munge.service", *dbd)))
    if node.is_worker:
        needs.append(BootNeeds("slurmd.service", "munged for credentials and the "
                               "controller's name", ("munge.service", *_NETWORK),
                               ("munge.service",)))
    return needs


# slurmdbd.conf(5) DbdPort: the role's slurmdbd.conf leaves the default (gpuinfra/spec/cross.py).
DBD_PORT = 6819


def dbd_boot_needs(distro: dict[str, Any]) -> BootNeeds:
    """slurmdbd after MariaDB and munged; and started only once it listens: slurmctld (After=
    slurmdbd) otherwise starts 50 ms after slurmdbd's process, finds its port closed, and with
    no saved state exits ("we have no TRES from it"), then waits RestartSec (10 s) to try
    again: measured on the lab's first deploy and at each boot."""
    mariadb = f"{distro['mariadb_service']}.service"
    return BootNeeds("slurmdbd.service", "MariaDB answering, and munged",
                     ("munge.service", mariadb, *_NETWORK), ("munge.service", mariadb),
                     ready_port=DBD_PORT)


def accounting(data: Any, distro: dict[str, Any], spec: ClusterSpec) -> None:
    """slurmdbd with MariaDB on the head (installed by :func:`_install`); the database user
    authenticates by unix socket."""
    systemd.service(name="Run MariaDB", service=distro["mariadb_service"], running=True,
                    enabled=True)
    db, user = data["slurm_db_name"], data["slurm_db_user"]
    accounting_db(name=f"Accounting database {db} and its user {user}", database=db,
                  user=user)
    text = role_file("slurm", SLURMDBD_CONF, cluster_name=spec.name,
                  controller=spec.head[0].short_name,
                  settings={"db_name": db, "db_user": user})
    dbd = files.put(name=f"{SLURMDBD_CONF} (slurm only, 0600)", dest=SLURMDBD_CONF,
                    src=StringIO(text), user="slurm", group="slurm", mode="600")
    run_service("slurmdbd", dbd)


def run_service(service: str, config: Any) -> None:
    """``service`` running and enabled, and restarted on a changed configuration only when it
    was running before this run: a service this run starts reads the new files anyway."""
    was_running = running_before(service)
    systemd.service(name=f"Run {service}", service=service, running=True, enabled=True)
    systemd.service(name=f"Restart {service} on the new configuration", service=service,
                    restarted=True, _if=lambda: was_running and config.did_change())


def state_folder(site: Site, data: Any) -> None:
    """slurmctld's StateSaveLocation on a controller. A folder of the site's own (not Debian's
    default, which the package makes) is made for the slurm user; with backup controllers the
    head keeps a mark there and each backup must see it (the folder is shared) before its
    slurmctld starts."""
    state = str(data["slurm_state_save_location"])
    spec = site.spec
    head = spec.head[0]
    if state != DEFAULT_STATE_DIR:
        files.directory(name=f"slurmctld's state folder {state} (StateSaveLocation)",
                        path=state, user="slurm", group="slurm", mode="700")
    if not spec.backup_controllers:
        return
    mark = state_mark_text(spec.name, head.short_name)
    if host.name == head.name:
        files.put(name=f"{state}/{STATE_MARK}: the controllers' shared state, marked",
                  dest=f"{state}/{STATE_MARK}", src=StringIO(mark), user="slurm",
                  group="slurm", mode="644")
    else:
        state_shared(name=f"{head.name}'s state is in {state} here too (a shared folder)",
                     state=state, head=head.name, text=mark, backup=host.name,
                     _if=lambda: site.reached(head.name) and not failed(site, [head]))


def failed(site: Site, nodes: list[NodeSpec]) -> list[str]:
    """At execution: those of ``nodes`` that failed in this run."""
    return [n.name for n in nodes if site.host(n.name) in site.host(n.name).state.failed_hosts]
