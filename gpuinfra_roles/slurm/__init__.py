"""The `slurm` role: slurmctld on the head, slurmd on the workers, GPUs as typed GRES.

Table of contents (``slurm()``): packages per role and distribution; slurm.conf (identical on
every node: the spec's partitions and GPU counts, each worker's CPUs/sockets/cores/threads and
memory read from that worker), gres.conf per node (from its GPU facts: File= by device minor,
Cores= from the GPU's CPU affinity, Links= from the NVLink topology; MPS/shard lines when the
spec shares GPUs), cgroup.conf (devices constrained); the files go in only after Slurm accepted
them (operations.checked_config); daemons restart only where their files changed; optional
accounting (slurmdbd with MariaDB on the head). Needs the munge role first. Data keys:
defaults.py; per-distribution values: :data:`DISTRO`.
"""

from __future__ import annotations

from io import StringIO
from typing import Any

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.facts.systemd import SystemdStatus
from pyinfra.operations import apt, files, server, systemd

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.cpus import CpuLayout
from gpuinfra.parsers.topo import TopoMatrix
from gpuinfra.slurmconf import (
    GresPlan,
    NodeHardware,
    gpu_devices,
    gres_plan,
    node_gres_type,
    node_hardware,
    slurm_conf,
)
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra_deploy.facts.nvidia import NvidiaDeviceMinors, NvidiaGpus, NvidiaTopology
from gpuinfra_deploy.facts.system import CpuLayout as CpuLayoutFact
from gpuinfra_deploy.facts.system import MemTotalMb, host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.boot import BootNeeds, boot_order
from gpuinfra_deploy.ops.templates import RoleTemplates
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_roles.slurm.operations import (
    accounting_db,
    checked_config,
    controller_counts_gpus,
)

TEMPLATES = RoleTemplates(__file__)  # templates/<target>.j2 beside this file

CONF_DIR = "/etc/slurm"
SLURM_CONF = f"{CONF_DIR}/slurm.conf"
GRES_CONF = f"{CONF_DIR}/gres.conf"
CGROUP_CONF = f"{CONF_DIR}/cgroup.conf"
SLURMDBD_CONF = f"{CONF_DIR}/slurmdbd.conf"

# Per-distribution values: the task list below has no distro conditionals.
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {  # Slurm 22.05.8
        "controller": ["slurmctld", "slurm-client"],
        "compute": ["slurmd", "slurm-client"],
        "nvml_plugin": "slurm-wlm-nvml-plugin",  # contrib (enabled by nvidia_driver)
        "cgroup_plugin": "autodetect",
        "accounting": ["slurmdbd", "mariadb-server"],
        "mariadb_service": "mariadb",
    },
    "ubuntu-22.04": {  # Slurm 21.08.5: cgroup/v1 only (22.04 boots cgroup v2: see README)
        "controller": ["slurmctld", "slurm-client"],
        "compute": ["slurmd", "slurm-client"],
        "nvml_plugin": None,
        "cgroup_plugin": "cgroup/v1",
        "accounting": ["slurmdbd", "mariadb-server"],
        "mariadb_service": "mariadb",
    },
    "ubuntu-24.04": {  # Slurm 23.11.4 (universe); NVML plugin in multiverse
        "controller": ["slurmctld", "slurm-client"],
        "compute": ["slurmd", "slurm-client"],
        "nvml_plugin": "slurm-wlm-nvml-plugin",
        "cgroup_plugin": "autodetect",
        "accounting": ["slurmdbd", "mariadb-server"],
        "mariadb_service": "mariadb",
    },
}

def cpu_facts(site: Site, name: str) -> tuple[CpuLayout | None, int | None]:
    """(CPU layout, MemTotal MiB) of host ``name``, read from it once per run: slurm.conf
    needs every worker's, and each worker's gres.conf its own."""
    def read() -> tuple[dict[str, Any], int | None]:
        other = site.host(name)
        if other in other.state.failed_hosts or not other.connected:
            # Unreachable in this run (a dead worker must not stop the others): its node line
            # says CPUs=1 with a note, and the rerun once it is back writes its hardware.
            return {}, None
        return other.get_fact(CpuLayoutFact), other.get_fact(MemTotalMb)

    layout, memory = site.once(("cpu facts", name), read)
    return (CpuLayout.from_json(layout) if layout else None), memory


def worker_hardware(site: Site, name: str) -> NodeHardware | None:
    """A worker's slurm.conf hardware: its own CPUs and memory, less its own
    slurm_memory_reserve_percent (so slurm.conf is the same whichever host renders it)."""
    layout, memory = cpu_facts(site, name)
    if layout is None or not memory:
        return None
    return node_hardware(layout, memory,
                         site.node(name).settings["slurm_memory_reserve_percent"])


def gres_type_of(node: NodeSpec) -> str:
    """The GRES type of a node's GPUs: its slurm_gpu_type, else its model in lower case."""
    return node_gres_type(node, node.settings["slurm_gpu_type"]) if node.gpus else "none"


def _node_gres(site: Site, node: NodeSpec) -> GresPlan:
    """This node's gres.conf lines from its own GPU facts."""
    if node.gpus is None:
        return GresPlan(())
    gpus = host.get_fact(NvidiaGpus).get("gpus", [])
    devices, notes = gpu_devices(gpus, host.get_fact(NvidiaDeviceMinors))
    topo_json = host.get_fact(NvidiaTopology)
    topo = TopoMatrix(**{**topo_json, "gpu_numa_ids": {}}) if topo_json else None
    layout, _ = cpu_facts(site, node.name)
    plan = gres_plan(node, gres_type_of(node), devices, topo, layout)
    return GresPlan(plan.lines, tuple(notes) + plan.notes, plan.nvml_needed)


def _slurm_conf(site: Site, data: Any, settings: dict[str, Any]) -> tuple[str, list[str]]:
    """slurm.conf (the same text on every node) and its notes, computed once per run."""
    spec = site.spec
    conf = slurm_conf(
        spec,
        addresses={n.name: n.address for n in spec.nodes},
        hardware={n.name: worker_hardware(site, n.name) for n in spec.workers_of("slurm")},
        gres_type_of={n.name: gres_type_of(n) for n in spec.workers_of("slurm")},
        accounting=spec.slurm_accounting,
        extra=data["slurm_conf_extra"],
        health={k: v for k, v in data.items() if k.startswith("health_")},
    )
    return TEMPLATES.render(SLURM_CONF, conf=conf, settings=settings), conf.notes


def _configs(site: Site, node: NodeSpec, data: Any,
             distro: dict[str, Any]) -> tuple[dict[str, str], GresPlan, list[str]]:
    settings = {"slurmd_timeout": int(data["slurm_slurmd_timeout"]),
                "cgroup_plugin": distro["cgroup_plugin"]}
    # Every input of slurm.conf is site-wide (slurm_conf_extra and the timeout must agree on
    # every host; the cgroup plugin follows the distribution): one text per distribution.
    conf_text, notes = site.once(("slurm.conf", distro["cgroup_plugin"]),
                                 lambda: _slurm_conf(site, data, settings))
    plan = _node_gres(site, node)
    texts = {
        SLURM_CONF: conf_text,
        GRES_CONF: TEMPLATES.render(GRES_CONF, node=node.short_name, plan=plan),
        CGROUP_CONF: TEMPLATES.render(CGROUP_CONF, settings=settings),
    }
    return texts, plan, notes


@deploy("slurm")
def slurm(site: Site, node: NodeSpec) -> None:
    spec = site.spec
    data = node.settings
    distro = DISTRO[host_distro()]
    # At least one: the spec gate refuses a Slurm site without a Slurm worker.
    workers = spec.workers_of("slurm")

    texts, plan, notes = _configs(site, node, data, distro)
    for note in [*notes, *plan.notes]:
        logger.warning(f"{host.print_prefix}slurm: {note}")

    # slurmd is on the head too, for `slurmd -G`, Slurm's own check of a staged config.
    packages = list(distro["compute"])
    if node.is_head:
        packages = list(dict.fromkeys([*distro["controller"], *packages]))
    if plan.nvml_needed:
        if not distro["nvml_plugin"]:
            raise GpuinfraError(f"slurm: {host.name} shares its GPUs with MIG, which Slurm "
                                "schedules only through NVML; this distribution has no NVML "
                                "plugin package (use Debian 12 or Ubuntu 24.04)")
        packages.append(distro["nvml_plugin"])
    install = apt.packages(name="Install Slurm", packages=packages, no_recommends=True,
                           update=True, cache_time=APT_CACHE_S)
    files.directory(name=f"{CONF_DIR} exists", path=CONF_DIR, user="root", group="root",
                    mode="755")
    # The head checks as a worker; one whose GPUs are not shared (mps, shard) when there is
    # one: Slurm cannot merge a sharing node's GRES without its gres.conf (operations.py).
    unshared = [w for w in workers if w.sharing.mode not in ("mps", "time-slicing")]
    check_as = node.short_name if node.is_worker else (unshared or workers)[0].short_name
    config = checked_config(name="Slurm configuration, checked by Slurm before it goes in",
                            files=texts, check_as=check_as, elsewhere=not node.is_worker)

    accounting = spec.slurm_accounting and node.is_head
    boot_order([*boot_needs(node, spec.slurm_accounting),
                *([dbd_boot_needs(distro)] if accounting else [])])
    if accounting:
        _accounting(data, distro, spec)
    if node.is_head:
        _run("slurmctld", config)
        if accounting and any(w.gpus is not None for w in workers):
            controller_counts_gpus(name="slurmctld counts GPUs in accounting (gres/gpu TRES)")
    if node.is_worker:
        _run("slurmd", config)
    else:
        systemd.service(name="slurmd off on a host that is not a worker", service="slurmd",
                        running=False, enabled=False)
        # The package's postinst enables slurmd after this run's facts were read.
        server.shell(name="slurmd off right after its install (the package enables it)",
                     commands=["systemctl disable --now slurmd"], _if=install.did_change)


# What the daemons need at boot (gpuinfra.units: order and bounded restart). Without it
# slurmctld races slurmdbd at boot and, with no saved state (a first boot, or a shutdown cut
# short), exits for good: "You are running with a database but ... we have no TRES from it".
_NETWORK = ("network-online.target", "nss-lookup.target")


def boot_needs(node: NodeSpec, accounting: bool) -> list[BootNeeds]:
    """What slurmctld (head) and slurmd (worker) need at boot."""
    needs = []
    if node.is_head:
        dbd = ("slurmdbd.service",) if accounting else ()
        needs.append(BootNeeds("slurmctld.service", "munged for credentials, the controller's "
                               "name" + (", and slurmdbd answering" if accounting else ""),
                               ("munge.service", *_NETWORK, *dbd), ("munge.service", *dbd)))
    if node.is_worker:
        needs.append(BootNeeds("slurmd.service", "munged for credentials and the "
                               "controller's name", ("munge.service", *_NETWORK),
                               ("munge.service",)))
    return needs


def dbd_boot_needs(distro: dict[str, Any]) -> BootNeeds:
    mariadb = f"{distro['mariadb_service']}.service"
    return BootNeeds("slurmdbd.service", "MariaDB answering, and munged",
                     ("munge.service", mariadb, *_NETWORK), ("munge.service", mariadb))


def _accounting(data: Any, distro: dict[str, Any], spec: ClusterSpec) -> None:
    """slurmdbd with MariaDB on the head; the database user authenticates by unix socket."""
    apt.packages(name="Install MariaDB and slurmdbd", packages=list(distro["accounting"]),
                 no_recommends=True, update=True, cache_time=APT_CACHE_S)
    systemd.service(name="Run MariaDB", service=distro["mariadb_service"], running=True,
                    enabled=True)
    db, user = data["slurm_db_name"], data["slurm_db_user"]
    accounting_db(name=f"Accounting database {db} and its user {user}", database=db,
                  user=user)
    text = TEMPLATES.render(SLURMDBD_CONF, cluster_name=spec.name,
                  controller=spec.head[0].short_name,
                  settings={"db_name": db, "db_user": user})
    dbd = files.put(name=f"{SLURMDBD_CONF} (slurm only, 0600)", dest=SLURMDBD_CONF,
                    src=StringIO(text), user="slurm", group="slurm", mode="600")
    _run("slurmdbd", dbd)


def _run(service: str, config: Any) -> None:
    """``service`` running and enabled, and restarted on a changed configuration only when it
    was running before this run: a service this run starts reads the new files anyway, and a
    restart right after its first start only costs a wait (slurmd's is about 9 s)."""
    unit = f"{service}.service"
    status = host.get_fact(SystemdStatus, user_mode=False, machine=None, user_name=None,
                           services=[unit])  # the question systemd.service asks
    was_running = bool(status.get(unit))
    systemd.service(name=f"Run {service}", service=service, running=True, enabled=True)
    systemd.service(name=f"Restart {service} on the new configuration", service=service,
                    restarted=True, _if=lambda: was_running and config.did_change())


def applies(site: Site, node: NodeSpec) -> bool:
    """Slurm nodes: slurmctld on the head, slurmd on the workers."""
    return "slurm" in node.schedulers


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("slurm", slurm, applies, needs_head=True, reads=("health",))
apply = ROLE.apply
