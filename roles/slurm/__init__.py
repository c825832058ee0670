"""The `slurm` role: slurmctld on the head, slurmd on the workers, GPUs as typed GRES.

Configless (configless_slurm.html): the head alone holds slurm.conf, gres.conf and cgroup.conf;
every slurmd fetches them (a drop-in gives it --conf-server; no worker keeps a copy).

Table of contents (``slurm()``): packages per role and distribution; slurm.conf (the spec's
partitions and GPU counts, each worker's CPUs/sockets/cores/threads and memory read from that
worker, or kept from the head's running file when the run did not reach it); one gres.conf
for the cluster (each worker's lines with NodeName=, from its GPU facts: File= by device minor,
Cores= from the GPU's CPU affinity, Links= from the NVLink topology; MPS/shard lines when the
spec shares GPUs); cgroup.conf (devices constrained). Each worker in the run judges the set
with its own GPUs (``slurmd -G``), then the head takes it after judging slurm.conf itself
(operations.checked_config); a node leaving slurm.conf must be drained and idle first. The
daemons take a change by `scontrol reconfigure`, or a restart where slurm.conf(5) says so
(gpuinfra.slurm.running.conf_change). Optional accounting (slurmdbd with MariaDB on the head).
Needs the munge role first. Data keys: defaults.py; per-distribution values: :data:`DISTRO`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.operations import apt, files, server, systemd

from gpuinfra import reboot
from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.cpus import CpuTopology
from gpuinfra.parsers.topo import TopoMatrix
from gpuinfra.slurm.conf import slurm_conf
from gpuinfra.slurm.gres import GresPlan, gpu_devices, gres_plan, node_gres_type
from gpuinfra.slurm.nodes import NodeHardware, node_hardware
from gpuinfra.slurm.running import (
    CONFIGLESS_DROPIN,
    ConfChange,
    RunningConfig,
    conf_change,
    conf_server,
    configless_dropin,
    node_gres_lines,
    running_config,
)
from gpuinfra.slurm.topology import topology_lines
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.kernel import CgroupHierarchy
from gpuinfra_deploy.facts.nvidia import NvidiaDeviceMinors, NvidiaGpus, NvidiaTopology
from gpuinfra_deploy.facts.system import CpuLayout as CpuLayoutFact
from gpuinfra_deploy.facts.system import MemTotalMb, host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.boot import boot_order
from gpuinfra_deploy.ops.checked import upload_source
from gpuinfra_deploy.ops.kernel_args import kernel_arguments, needs_cgroup_v1, node_arguments
from gpuinfra_deploy.ops.reboot import reboot_when_needed
from gpuinfra_deploy.run.ahead import installed_ahead
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import role_file, text
from gpuinfra_roles.slurm.checks import (
    every_setting_read,
    one_cgroup_plugin,
    one_slurm_site,
    slurm_nodes,
    versions_read_it,
)
from gpuinfra_roles.slurm.daemons import (
    SLURMDBD_CONF as SLURMDBD_CONF,
)
from gpuinfra_roles.slurm.daemons import accounting as accounting_setup
from gpuinfra_roles.slurm.daemons import (
    boot_needs,
    dbd_boot_needs,
    failed,
    running_before,
    state_folder,
)
from gpuinfra_roles.slurm.operations import (
    RunningSlurmConf,
    accounting_associations,
    checked_config,
    checked_here,
    controller_counts_gpus,
    reconfigure_script,
    removal_guard,
)

CONF_DIR = "/etc/slurm"
SLURM_CONF = f"{CONF_DIR}/slurm.conf"
GRES_CONF = f"{CONF_DIR}/gres.conf"
CGROUP_CONF = f"{CONF_DIR}/cgroup.conf"
TOPOLOGY_CONF = f"{CONF_DIR}/topology.conf"

# MpiDefault (slurm.conf(5): pmi2, pmix or none). Debian 12's slurm-wlm-basic-plugins
# 22.05.8-4+deb12u3 ships mpi/pmix (mpi_pmix.so -> mpi_pmix_v4.so), which dlopen()s
# /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so (the plugin's strings; measured): that
# unversioned name is only in libpmix-dev (libpmix2 has libpmix.so.2), so every Slurm node
# gets libpmix-dev beside slurmd. `srun --mpi=list` on the head then lists pmix (the lab proof,
# gpuinfra_lab/slurm_defaults.py).
PMIX_MEASURED = {
    "mpi_default": "pmix", "mpi_packages": ["libpmix-dev"],
    "mpi_why": "PMIx (mpi/pmix of slurm-wlm-basic-plugins, libpmix from libpmix-dev); "
               "srun --mpi=list shows the others",
}
# Ubuntu 22.04 (21.08.5) and 24.04 (23.11.4) build slurm-wlm from the same Debian packaging
# with PMIx (libpmix-dev in its Build-Depends): the same plugin and library path. Not measured
# here (no Ubuntu lab): `srun --mpi=list` on a deployed node says.
PMIX_SAME_PACKAGING = {**PMIX_MEASURED,
                       "mpi_why": PMIX_MEASURED["mpi_why"] + " (Debian's packaging; not "
                       "measured on this release)"}

# Debian's packaging of Slurm, the same names on 12 and 13.
_DEBIAN = {
    "controller": ["slurmctld", "slurm-client"],
    "compute": ["slurmd", "slurm-client"],
    "nvml_plugin": "slurm-wlm-nvml-plugin",  # contrib (enabled by nvidia_driver)
    "cgroup_plugin": "autodetect",
    "accounting": ["slurmdbd", "mariadb-server"],
    "mariadb_service": "mariadb",
}

# Per-distribution values: the task list below has no distro conditionals.
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {**_DEBIAN, **PMIX_MEASURED},  # Slurm 22.05.8
    # Slurm 24.11.5-4+deb13u1 (trixie main and trixie-security main Packages, 2026-12-07);
    # slurm-wlm-nvml-plugin 24.11.5-2 in contrib (depends on slurm-wlm-basic-plugins >= 24.11.5,
    # << 24.11.6); mariadb-server 1:11.8.9+ds-0+deb13u1 (its unit: mariadb.service; `mysql` is
    # still there, a link to mariadb in mariadb-client-core, read from the .deb). PMIx: the
    # plugin (mpi_pmix_v5.so) looks in /usr/lib/x86_64-linux-gnu/pmix2/lib, which libpmix-dev
    # 5.0.7-1 fills (read from the .debs); `srun --mpi=list` not measured on trixie yet.
    "debian-13": {**_DEBIAN, **PMIX_SAME_PACKAGING},
    "ubuntu-22.04": {  # Slurm 21.08.5: cgroup/v1 only (22.04 boots cgroup v2: see README)
        "controller": ["slurmctld", "slurm-client"],
        "compute": ["slurmd", "slurm-client"],
        "nvml_plugin": None,
        "cgroup_plugin": "cgroup/v1",
        **PMIX_SAME_PACKAGING,
        "accounting": ["slurmdbd", "mariadb-server"],
        "mariadb_service": "mariadb",
    },
    "ubuntu-24.04": {  # Slurm 23.11.4 (universe); NVML plugin in multiverse
        "controller": ["slurmctld", "slurm-client"],
        "compute": ["slurmd", "slurm-client"],
        "nvml_plugin": "slurm-wlm-nvml-plugin",
        "cgroup_plugin": "autodetect",
        **PMIX_SAME_PACKAGING,
        "accounting": ["slurmdbd", "mariadb-server"],
        "mariadb_service": "mariadb",
    },
}

def running(site: Site) -> RunningConfig | None:
    """The head's live slurm.conf and gres.conf, read once per run; None when the head is not
    in this run (then nothing is written there: the run says so)."""
    def read() -> RunningConfig | None:
        name = site.spec.head[0].name
        if not site.reached(name):
            return None
        raw = site.host(name).get_fact(RunningSlurmConf)
        return running_config(raw["slurm.conf"], raw["gres.conf"])

    return site.once(("slurm running config",), read)


def cpu_facts(site: Site, name: str) -> tuple[CpuTopology | None, int | None]:
    """(CPU layout, MemTotal MiB) of host ``name``, read from it once per run: slurm.conf
    needs every worker's, and each worker's gres.conf its own."""
    def read() -> tuple[dict[str, Any], int | None]:
        if not site.reached(name):
            return {}, None
        other = site.host(name)
        return other.get_fact(CpuLayoutFact), other.get_fact(MemTotalMb)

    layout, memory = site.once(("cpu facts", name), read)
    return (CpuTopology.from_json(layout) if layout else None), memory


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


def node_gres(site: Site, node: NodeSpec) -> GresPlan | None:
    """A node's gres.conf lines from its own GPU facts, read once per run (None: not reached)."""
    if node.gpus is None:
        return GresPlan(())

    def read() -> GresPlan | None:
        if not site.reached(node.name):
            return None
        other = site.host(node.name)
        gpus = other.get_fact(NvidiaGpus).get("gpus", [])
        devices, notes = gpu_devices(gpus, other.get_fact(NvidiaDeviceMinors))
        topo_json = other.get_fact(NvidiaTopology)
        topo = TopoMatrix(**{**topo_json, "gpu_numa_ids": {}}) if topo_json else None
        layout, _ = cpu_facts(site, node.name)
        plan = gres_plan(node, gres_type_of(node), devices, topo, layout)
        return GresPlan(plan.lines, tuple(notes) + plan.notes, plan.nvml_needed)

    return site.once(("gres plan", node.name), read)


def _gres_conf(site: Site) -> tuple[str, list[str]]:
    """The cluster's one gres.conf (each node's lines with NodeName=) and its notes."""
    kept = running(site) or RunningConfig()
    sections, notes = [], []
    for node in site.spec.workers_of("slurm"):
        plan = node_gres(site, node)
        if plan is None:
            # Its section as the head has it, notes too: a --limit run followed by a full one
            # leaves gres.conf byte for byte, so no slurmd is told to fetch it again. Why the
            # lines are kept is said in the run's output, not in the file.
            lines = kept.gres_lines.get(node.short_name, [])
            why = ("not reached in this run: its lines are kept from the head's gres.conf"
                   if lines else "not reached in this run, and the head's gres.conf has no "
                   "lines for it: deploy it (--limit HEAD --limit NODE) once it is up")
            sections.append({"node": node.short_name, "lines": lines,
                             "notes": kept.gres_notes.get(node.short_name, [])})
            notes.append(f"{node.short_name}: {why}")
            continue
        sections.append({"node": node.short_name, "notes": list(plan.notes),
                         "lines": node_gres_lines(node.short_name, plan.lines)})
        notes += [f"{node.short_name}: {note}" for note in plan.notes]
    return role_file("slurm", GRES_CONF, cluster=site.spec.name, sections=sections), notes


def _slurm_conf(site: Site, data: Any, settings: dict[str, Any]) -> tuple[str, list[str]]:
    """slurm.conf and its notes, computed once per run."""
    spec = site.spec
    conf = slurm_conf(
        spec,
        addresses={n.name: n.address for n in spec.nodes},
        hardware={n.name: worker_hardware(site, n.name) for n in spec.workers_of("slurm")},
        gres_type_of={n.name: gres_type_of(n) for n in spec.workers_of("slurm")},
        accounting=spec.slurm_accounting,
        extra=data["slurm_conf_extra"],
        health={k: v for k, v in data.items() if k.startswith("health_")},
        running=running(site),
        def_mem_per_gpu=data["slurm_def_mem_per_gpu"],
        def_cpu_per_gpu=data["slurm_def_cpu_per_gpu"],
        job_mapping=job_mapping_on(spec, data),
    )
    return role_file("slurm", SLURM_CONF, conf=conf, settings=settings), conf.notes


def job_mapping_on(spec: Any, data: Any) -> bool:
    """The monitoring role keeps which job holds each GPU on the Slurm GPU nodes
    (monitoring_job_mapping): slurm.conf names its Prolog and Epilog too."""
    return bool(data["monitoring_enabled"] and data["monitoring_job_mapping"]
                and any(n.gpus is not None for n in spec.workers_of("slurm")))


def conf_settings(data: Mapping[str, Any], distro: Mapping[str, Any]) -> dict[str, Any]:
    """What slurm.conf and cgroup.conf take from the role's knobs (``data``, site-wide) and
    the distribution's Slurm (``distro``: gpuinfra/knowledge)."""
    return {"slurmd_timeout": int(data["slurm_slurmd_timeout"]),
            "resume_timeout": int(data["slurm_resume_timeout"]),
            "reboot_program": data["slurm_reboot_program"],
            "state_save_location": data["slurm_state_save_location"],
            "ctld_timeout": int(data["slurm_ctld_timeout"]),
            "cgroup_plugin": distro["cgroup_plugin"],
            "mpi_default": distro["mpi_default"], "mpi_why": distro["mpi_why"]}


def _configs(site: Site, data: Any, distro: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The cluster's configuration (the head's files; every node judges it) and its notes."""
    settings = conf_settings(data, distro)

    def render() -> tuple[dict[str, str], list[str]]:
        conf_text, notes = _slurm_conf(site, data, settings)
        gres_text, gres_notes = _gres_conf(site)
        texts = {SLURM_CONF: conf_text, GRES_CONF: gres_text,
                 CGROUP_CONF: role_file("slurm", CGROUP_CONF, settings=settings)}
        lines = topology_lines(site.spec)
        if lines:
            texts[TOPOLOGY_CONF] = role_file("slurm", TOPOLOGY_CONF, cluster=site.spec.name,
                                             lines=lines)
        return texts, notes + gres_notes

    # Every input is site-wide (slurm_conf_extra and the timeout must agree on every host):
    # one set for the run, served by the head to every slurmd (configless), so its cgroup.conf
    # must suit every node's Slurm.
    def checked() -> tuple[dict[str, str], list[str]]:
        nodes = slurm_nodes(site)  # each Slurm node of the run with its distribution
        one_slurm_site(site, nodes)  # their Slurm releases work together (SchedMD's rules)
        one_cgroup_plugin(nodes, {k: v["cgroup_plugin"] for k, v in DISTRO.items()})
        versions_read_it(site, nodes)
        texts, notes = render()
        every_setting_read(nodes, texts)
        return texts, notes

    return site.once(("slurm configuration",), checked)


@deploy("slurm")
def slurm(site: Site, node: NodeSpec) -> None:
    spec = site.spec
    data = node.settings
    distro = DISTRO[host_distro()]
    # At least one: the spec gate refuses a Slurm site without a Slurm worker.
    workers = spec.workers_of("slurm")
    head = spec.head[0]

    texts, notes = _configs(site, data, distro)
    if node.is_head:
        for note in notes:
            logger.warning(f"{host.print_prefix}slurm: {note}")
    install = _install(site, node)
    files.directory(name=f"{CONF_DIR} exists", path=CONF_DIR, user="root", group="root",
                    mode="755")
    if node.is_worker:
        # The worker judges the cluster's files with its own GPUs before the head takes them.
        checked_here(name="Slurm configuration, judged by this node's slurmd (its gres.conf "
                          "lines against its GPUs)", files=texts, check_as=node.short_name)
    if not site.reached(head.name):
        logger.warning(f"{host.print_prefix}slurm: the head ({head.name}) is not in this run: "
                       "the cluster's slurm.conf and gres.conf live there and were not changed; "
                       f"`pyinfra inventory/<site>.py deploy.py --limit {head.name} --limit "
                       f"{host.name}` writes them")

    config = None
    accounting = spec.slurm_accounting and node.is_head
    if node.is_controller:
        state_folder(site, data)
    if node.is_head:
        check_as = _check_as(node, workers)
        removed = sorted(set((running(site) or RunningConfig()).node_lines)
                         - {w.short_name for w in workers})
        if removed:
            server.shell(name=f"Nodes leaving Slurm are drained and idle: {', '.join(removed)}",
                         commands=[removal_guard(removed)])
        # Held back by a worker that judged the files in this run and failed; not by one the
        # run does not reach (left out, or down: pyinfra fails it at connect), which judged
        # nothing and whose lines are kept from the head's files.
        judges = [w for w in workers if site.reached(w.name)]
        config = checked_config(name="Slurm configuration, checked by Slurm before it goes in",
                                files=texts, check_as=check_as,
                                _if=lambda: _workers_accepted(site, judges))
        if TOPOLOGY_CONF not in texts:
            # After slurm.conf without TopologyPlugin went in (a refused one stops the host
            # before this): no fabric, no topology.conf for slurmctld to serve.
            files.file(name=f"{TOPOLOGY_CONF} absent (no fabric_switches, no fabric_blocks)",
                       path=TOPOLOGY_CONF,
                       present=False, _if=lambda: not failed(site, judges))
    if node.is_backup_controller:
        # The same files as the head's, judged by Slurm here too; written after the head took
        # them (a refused set stops the head, and the backup keeps its files).
        config = checked_config(
            name="Slurm configuration (the head's), checked by Slurm before it goes in",
            files=texts, check_as=_check_as(node, workers),
            _if=lambda: site.reached(head.name) and not failed(site, [head, *workers]))
        if TOPOLOGY_CONF not in texts:
            files.file(name=f"{TOPOLOGY_CONF} absent (no fabric_switches, no fabric_blocks)",
                       path=TOPOLOGY_CONF,
                       present=False, _if=lambda: not failed(site, [head]))
    if node.is_login:
        # Slurm 22.05's client commands read /etc/slurm/slurm.conf (no sackd to serve them
        # configless): the head's own file, judged there, written after the head took it.
        files.put(name=f"{SLURM_CONF}: the head's (the client commands find the controllers)",
                  dest=SLURM_CONF, src=upload_source(texts[SLURM_CONF]), mode="644",
                  _if=lambda: site.reached(head.name) and not failed(site, [head, *workers]))
    boot_order([*boot_needs(node, spec.slurm_accounting),
                *([dbd_boot_needs(distro)] if accounting else [])])
    if accounting:
        accounting_setup(data, distro, spec)
    # On every node (the op order is shared): the head restarts or reconfigures before any
    # slurmd is restarted to fetch the files.
    change = _change(site, texts)
    _controller(node, config, change)
    if node.is_head:
        if accounting and any(w.gpus is not None for w in workers):
            controller_counts_gpus(name="slurmctld counts GPUs in accounting (gres/gpu TRES)")
        if accounting:
            accounting_associations(
                name="Accounting: the cluster, the site's accounts and users (sacctmgr)",
                cluster=spec.name, accounts=list(data["slurm_accounts"]),
                users=dict(data["slurm_users"]))
    if node.is_worker:
        # Slurm 21.08 (Ubuntu 22.04) has only cgroup/v1 and the release boots cgroup v2: the
        # kernel argument goes in the one boot-loader drop-in; slurmd starts after the reboot.
        cgroup_v1 = needs_cgroup_v1(node)
        arguments = kernel_arguments(*node_arguments(node)) if cgroup_v1 else None
        _compute(node, head, spec.backup_controllers, change,
                 waits_for_v1=cgroup_v1 and host.get_fact(CgroupHierarchy) == "v2")
        if cgroup_v1:
            reboot_when_needed(spec.reboot_policy, "to boot cgroup v1, which slurmd's "
                               "cgroup/v1 plugin needs (slurmd starts then)",
                               [(arguments, reboot.CGROUP_V1_ARGS_CHANGED)], worker=True)
    elif not node.is_login:  # a login node has no slurmd (slurm-client only)
        systemd.service(name="slurmd off on a host that is not a worker", service="slurmd",
                        running=False, enabled=False)
        # The package's postinst enables slurmd after this run's facts were read; deploy.py
        # installed it with the other roles' packages (gpuinfra_deploy/run/ahead.py).
        ahead = installed_ahead(site, node)
        server.shell(name="slurmd off right after its install (the package enables it)",
                     commands=["systemctl disable --now slurmd"],
                     _if=lambda: install.did_change() or bool(ahead and ahead.did_change()))


def _check_as(node: NodeSpec, workers: tuple[NodeSpec, ...]) -> str:
    """The node a controller judges the files as (``slurmd -G -N``): itself when it is a
    worker, else a worker whose GPUs are not shared (mps, shard) when there is one: Slurm
    cannot merge a sharing node's GRES without its gres.conf lines."""
    if node.is_worker:
        return node.short_name
    unshared = [w for w in workers if w.sharing.mode not in ("mps", "time-slicing")]
    return (unshared or list(workers))[0].short_name


def _workers_accepted(site: Site, workers: list[NodeSpec]) -> bool:
    """At execution: none of ``workers`` (those this run reached, each judging the files)
    failed, its own check of the files included; the head keeps its files otherwise, and says
    why."""
    refused = failed(site, workers)
    if refused:
        logger.warning(f"slurm: the head's slurm.conf and gres.conf were left as they are: "
                       f"{', '.join(refused)} failed in this run (its slurmd may have refused "
                       "them); fix it and deploy again")
    return not refused


def _change(site: Site, texts: dict[str, str]) -> ConfChange:
    """What the new files ask of the daemons (gpuinfra.slurm.running.conf_change), once per run;
    nothing when the head is not in this run (it keeps its files)."""
    def decide() -> ConfChange:
        now = running(site)
        if now is None:
            return ConfChange("none")
        change = conf_change(now, texts[SLURM_CONF], texts[GRES_CONF])
        left = [w.name for w in site.spec.workers_of("slurm") if not site.reached(w.name)]
        if change.slurmd and left and not now.empty:
            logger.warning(f"slurm: {change.why}: Slurm 22.05 needs every slurmd restarted "
                           f"(slurm.conf(5)); not in this run: {', '.join(left)}: "
                           "`systemctl restart slurmd` there (running jobs keep running)")
        return change

    return site.once(("slurm change",), decide)


def _controller(node: NodeSpec, config: Any, change: ConfChange) -> None:
    """slurmctld running; on changed files, `scontrol reconfigure` where Slurm takes the change
    that way, else a restart first (gpuinfra.slurm.running.conf_change); each slurmd then fetches
    the new files. Called on every Slurm node so that the workers' later operations are ordered
    after these (pyinfra orders operations by their place in the code); only the controllers
    act (a backup controller restarts its standby slurmctld on changed files)."""
    head = node.is_head
    # A backup controller (standby) restarts on any change of its files: it reads them then,
    # and takes no jobs until it takes over.
    backup = node.is_backup_controller
    was_running = running_before("slurmctld") if node.is_controller else False
    if node.is_controller:
        systemd.service(name="Run slurmctld", service="slurmctld", running=True, enabled=True)
    systemd.service(
        name="Restart slurmctld on the new configuration"
             + (f" ({change.why})" if change.kind == "restart" else ""),
        service="slurmctld", restarted=True,
        _if=lambda: was_running and (head and change.kind == "restart" or backup)
        and config.did_change())
    # On any change of the head's files, change.kind "none" included (cgroup.conf, which
    # conf_change does not read, or comments only): each slurmd runs the files it fetched, and
    # must fetch these (cgroup.conf(5) takes changes on `scontrol reconfigure` too).
    server.shell(
        name="The nodes take the new configuration (scontrol reconfigure: each slurmd fetches it)",
        commands=[reconfigure_script()],
        _if=lambda: head and was_running and config.did_change())


def _compute(node: NodeSpec, head: NodeSpec, backups: tuple[NodeSpec, ...], change: ConfChange,
             waits_for_v1: bool) -> None:
    """slurmd fetching the head's files (configless): its drop-in, no local copies; restarted
    when it must fetch them anew (a first switch to configless, or a change slurm.conf(5) says
    every slurmd must restart for: nodes added or changed, GresTypes...). ``waits_for_v1``:
    this boot has cgroup v2 only and this Slurm needs v1: slurmd is enabled, not started (it
    would fail), and starts at the boot that applies the kernel argument."""
    was_running = running_before("slurmd")
    dropin = files.put(name="slurmd fetches its configuration from slurmctld (drop-in)",
                       dest=CONFIGLESS_DROPIN,
                       src=upload_source(text(configless_dropin(conf_server(
                           head.short_name, head.address,
                           [(b.short_name, b.address) for b in backups]), host_distro()))),
                       mode="644", create_remote_dir=True)
    systemd.daemon_reload(name="systemd reads slurmd's drop-in", _if=dropin.did_change)
    if not node.is_head:
        for path in (SLURM_CONF, GRES_CONF, CGROUP_CONF, TOPOLOGY_CONF):
            files.file(name=f"{path} absent (the head serves it)", path=path, present=False)
    if waits_for_v1:
        logger.warning(f"{host.print_prefix}slurm: slurmd is not started: this boot mounted "
                       "cgroup v2 only and this Slurm's cgroup/v1 plugin needs v1; it starts "
                       "at the next boot (systemd.unified_cgroup_hierarchy=0 is in the boot "
                       "loader's configuration)")
        systemd.service(name="slurmd enabled (it starts at the boot with cgroup v1)",
                        service="slurmd", running=None, enabled=True)
        return
    systemd.service(name="Run slurmd", service="slurmd", running=True, enabled=True)
    systemd.service(
        name="Restart slurmd (it fetches the new configuration)"
             + (f" ({change.why})" if change.slurmd else ""), service="slurmd", restarted=True,
        _if=lambda: was_running and (dropin.did_change() or change.slurmd))


def _slurm_packages(node: NodeSpec) -> list[str]:
    distro = DISTRO[host_distro()]
    if node.is_login and not (node.is_controller or node.is_worker):
        # The client commands, and srun's MPI plugin's library (srun --mpi=pmix).
        return ["slurm-client", *distro["mpi_packages"]]
    # slurmd is on the head too, for `slurmd -G`, Slurm's own check of a staged config.
    packages = [*distro["compute"], *distro["mpi_packages"]]
    if node.is_controller:
        packages = list(dict.fromkeys([*distro["controller"], *packages]))
    return packages


def _accounting_packages(site: Site, node: NodeSpec) -> list[str]:
    return list(DISTRO[host_distro()]["accounting"]) \
        if site.spec.slurm_accounting and node.is_head else []


def packages(site: Site, node: NodeSpec) -> list[str]:
    """Slurm's packages and, on a head that keeps accounting, MariaDB and slurmdbd: deploy.py
    installs them with the other roles' (gpuinfra_deploy/run/ahead.py), each host at its own
    pace, so the head installs them while the workers install their driver. The NVML plugin
    (contrib, the driver's libraries) stays in :func:`_install`."""
    return [*_slurm_packages(node), *_accounting_packages(site, node)]


def _install(site: Site, node: NodeSpec) -> Any:
    """Slurm's packages on this node (the operation returned: slurmd is turned off on the
    head after it), and MariaDB with slurmdbd on a head that keeps accounting. Their services
    wait for their files (Debian's units start nothing without slurm.conf or slurmdbd.conf);
    MariaDB starts on its defaults and is configured below."""
    distro = DISTRO[host_distro()]
    packages = _slurm_packages(node)
    own = node_gres(site, node) if node.is_worker else None
    if own is not None and own.nvml_needed:
        if not distro["nvml_plugin"]:
            raise GpuinfraError(f"slurm: {host.name} shares its GPUs with MIG, which Slurm "
                                "schedules only through NVML; this distribution has no "
                                "NVML plugin package (use Debian 12 or Ubuntu 24.04)")
        packages.append(distro["nvml_plugin"])
    slurm = apt.packages(name="Install Slurm", packages=packages, no_recommends=True,
                         update=True, cache_time=APT_CACHE_S, _if=site.head_up)
    accounting = _accounting_packages(site, node)
    if accounting:
        apt.packages(name="Install MariaDB and slurmdbd", packages=accounting,
                     no_recommends=True, update=True, cache_time=APT_CACHE_S,
                     _if=site.head_up)
    return slurm


def applies(site: Site, node: NodeSpec) -> bool:
    """Slurm nodes: slurmctld on the head and the backup controllers, slurmd on the
    workers."""
    return "slurm" in node.schedulers


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("slurm", slurm, applies, needs_head=True, reads=("health", "monitoring"),
            packages=packages)
apply = ROLE.apply
