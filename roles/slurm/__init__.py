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

from pyinfra import host, inventory, logger
from pyinfra.api import deploy
from pyinfra.facts.server import LinuxDistribution
from pyinfra.operations import apt, files, server, systemd

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.cpus import CpuLayout
from gpuinfra.parsers.topo import TopoMatrix
from gpuinfra.platforms import distro_key, node_address
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
from gpuinfra_cli.gate import require_valid
from roles.data import role_data
from roles.facts import CpuLayout as CpuLayoutFact
from roles.facts import MemTotalMb, NvidiaDeviceMinors, NvidiaGpus, NvidiaTopology
from roles.slurm.defaults import DEFAULTS
from roles.slurm.operations import accounting_db, check_sql_name, checked_config
from roles.templates import render

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

# CPU facts of each worker are read once per run: slurm.conf needs every worker's, and each
# worker's gres.conf its own.
_CPU_FACTS: dict[tuple[int, str], tuple[dict[str, Any], int | None]] = {}


def cluster_spec() -> ClusterSpec:
    return require_valid(inventory)


def cpu_facts(name: str) -> tuple[CpuLayout | None, int | None]:
    """(CPU layout, MemTotal MiB) of host ``name``, read from it once per run."""
    other = inventory.get_host(name)
    key = (id(other.state), name)
    if key not in _CPU_FACTS:
        _CPU_FACTS[key] = (other.get_fact(CpuLayoutFact), other.get_fact(MemTotalMb))
    layout, memory = _CPU_FACTS[key]
    return (CpuLayout.from_json(layout) if layout else None), memory


def worker_hardware(name: str) -> NodeHardware | None:
    """A worker's slurm.conf hardware: its own CPUs and memory, less its own
    slurm_memory_reserve_percent (so slurm.conf is the same whichever host renders it)."""
    layout, memory = cpu_facts(name)
    if layout is None or not memory:
        return None
    reserve = role_data(inventory.get_host(name), DEFAULTS)["slurm_memory_reserve_percent"]
    return node_hardware(layout, memory, reserve)


def gres_type_of(name: str) -> str:
    """The GRES type of a node's GPUs: its slurm_gpu_type, else its model in lower case."""
    spec = cluster_spec().node(name)
    override = inventory.get_host(name).data.get("slurm_gpu_type")
    return node_gres_type(spec, override) if spec.gpus else "none"


def _node_gres(node: NodeSpec) -> GresPlan:
    """This node's gres.conf lines from its own GPU facts."""
    if node.gpus is None:
        return GresPlan(())
    gpus = host.get_fact(NvidiaGpus).get("gpus", [])
    devices, notes = gpu_devices(gpus, host.get_fact(NvidiaDeviceMinors))
    topo_json = host.get_fact(NvidiaTopology)
    topo = TopoMatrix(**{**topo_json, "gpu_numa_ids": {}}) if topo_json else None
    layout, _ = cpu_facts(node.name)
    plan = gres_plan(node, gres_type_of(node.name), devices, topo, layout)
    return GresPlan(plan.lines, tuple(notes) + plan.notes, plan.nvml_needed)


def _configs(spec: ClusterSpec, node: NodeSpec, data: dict[str, Any],
             distro: dict[str, Any]) -> tuple[dict[str, str], GresPlan, list[str]]:
    workers = [n for n in spec.nodes if n.is_worker]
    conf = slurm_conf(
        spec,
        addresses={n.name: node_address(inventory.get_host(n.name).data) for n in spec.nodes},
        hardware={n.name: worker_hardware(n.name) for n in workers},
        gres_type_of={n.name: gres_type_of(n.name) for n in workers},
        accounting=spec.slurm_accounting,
        extra=data["slurm_conf_extra"],
    )
    settings = {"slurmd_timeout": int(data["slurm_slurmd_timeout"]),
                "cgroup_plugin": distro["cgroup_plugin"]}
    plan = _node_gres(node)
    texts = {
        SLURM_CONF: render("slurm", SLURM_CONF, conf=conf, settings=settings),
        GRES_CONF: render("slurm", GRES_CONF, node=node.short_name, plan=plan),
        CGROUP_CONF: render("slurm", CGROUP_CONF, settings=settings),
    }
    return texts, plan, conf.notes


@deploy("slurm")
def slurm() -> None:
    spec = cluster_spec()
    node = spec.node(host.name)
    data = role_data(host, DEFAULTS)
    distro = DISTRO[distro_key(host.get_fact(LinuxDistribution))]
    workers = [n for n in spec.nodes if n.is_worker]
    if not workers:
        raise GpuinfraError("slurm: no host in the 'workers' group: nothing to schedule on")

    texts, plan, notes = _configs(spec, node, data, distro)
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
                           update=True, cache_time=86400)
    files.directory(name=f"{CONF_DIR} exists", path=CONF_DIR, user="root", group="root",
                    mode="755")
    check_as = node.short_name if node.is_worker else workers[0].short_name
    config = checked_config(name="Slurm configuration, checked by Slurm before it goes in",
                            files=texts, check_as=check_as)

    if spec.slurm_accounting and node.is_head:
        _accounting(data, distro, spec)
    if node.is_head:
        systemd.service(name="Run slurmctld", service="slurmctld", running=True, enabled=True)
        systemd.service(name="Restart slurmctld on the new configuration", service="slurmctld",
                        restarted=True, _if=config.did_change)
    if node.is_worker:
        systemd.service(name="Run slurmd", service="slurmd", running=True, enabled=True)
        systemd.service(name="Restart slurmd on the new configuration", service="slurmd",
                        restarted=True, _if=config.did_change)
    else:
        systemd.service(name="slurmd off on a host that is not a worker", service="slurmd",
                        running=False, enabled=False)
        # The package's postinst enables slurmd after this run's facts were read.
        server.shell(name="slurmd off right after its install (the package enables it)",
                     commands=["systemctl disable --now slurmd"], _if=install.did_change)


def _accounting(data: dict[str, Any], distro: dict[str, Any], spec: ClusterSpec) -> None:
    """slurmdbd with MariaDB on the head; the database user authenticates by unix socket."""
    apt.packages(name="Install MariaDB and slurmdbd", packages=list(distro["accounting"]),
                 no_recommends=True, update=True, cache_time=86400)
    systemd.service(name="Run MariaDB", service=distro["mariadb_service"], running=True,
                    enabled=True)
    db = check_sql_name(data["slurm_db_name"], "slurm_db_name")
    user = check_sql_name(data["slurm_db_user"], "slurm_db_user")
    accounting_db(name=f"Accounting database {db} and its user {user}", database=db,
                  user=user)
    text = render("slurm", SLURMDBD_CONF, cluster_name=spec.name,
                  controller=spec.head[0].short_name,
                  settings={"db_name": db, "db_user": user})
    dbd = files.put(name=f"{SLURMDBD_CONF} (slurm only, 0600)", dest=SLURMDBD_CONF,
                    src=StringIO(text), user="slurm", group="slurm", mode="600")
    systemd.service(name="Run slurmdbd", service="slurmdbd", running=True, enabled=True)
    systemd.service(name="Restart slurmdbd on the new configuration", service="slurmdbd",
                    restarted=True, _if=dbd.did_change)
