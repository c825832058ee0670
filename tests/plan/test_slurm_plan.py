"""Plan tests of the `slurm` role on the lab's three hosts: Debian 12, Ubuntu 22.04 and 24.04.

slurm.conf describes every worker from that worker's own facts, so the role is planned in a
three-host inventory (tests/plan/harness.py, plan_cluster/plan_hosts): lab-head, lab-worker1
(8x H100 SXM replayed) and lab-worker2 (2x H100 PCIe replayed), both on the lab's 2-CPU VM.
Fixture layers (tests/plan/facts/): base-fresh, <distro>, munge-fresh, slurm-fresh (+ the
worker's slurm-lab-workerN) make a node before the role; slurm-converged,
slurm-converged-<distro> and slurm-converged-head|worker make one the role converged, whose
live files' SHA-256 the tests set from the text the library renders for it.

What the role should write is computed here independently of the role: the library
(gpuinfra.slurmconf) and the templates, fed from the raw captures the fact fixtures were made
from (test_fact_fixtures_are_the_facts_of_their_captures keeps the two in step).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from pyinfra.api import Config, FileUploadCommand, Inventory, State
from pyinfra.api.exceptions import PyinfraError
from pyinfra.context import ctx_inventory, ctx_state

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.cpus import parse_lscpu, parse_meminfo_mb
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.slurmconf import (
    GresPlan,
    gpu_devices,
    gpu_type,
    gres_plan,
    node_hardware,
    slurm_conf,
)
from gpuinfra.spec import HostInput, NodeSpec, build_cluster
from gpuinfra.units import boot_dropin, dropin_path
from gpuinfra_deploy.facts._base import GPU_FIELDS
from gpuinfra_deploy.facts.nvidia import NvidiaGpus, NvidiaTopology
from gpuinfra_deploy.facts.system import CpuLayout, MemTotalMb
from gpuinfra_deploy.run.site import current_site
from gpuinfra_roles.health.defaults import DEFAULTS as HEALTH_DEFAULTS
from gpuinfra_roles.slurm import (
    CGROUP_CONF,
    DISTRO,
    GRES_CONF,
    SLURM_CONF,
    SLURMDBD_CONF,
    TEMPLATES,
    boot_needs,
    dbd_boot_needs,
    slurm,
)
from gpuinfra_roles.slurm.defaults import DEFAULTS
from gpuinfra_roles.slurm.operations import (
    STAGE_DIR,
    MariaDbAccounting,
    SlurmctldTres,
    check_command,
    gpu_tres_script,
)
from tests.conftest import REPO
from tests.plan.harness import (
    FACTS,
    FakeHost,
    MissingFact,
    Plan,
    load_facts,
    plan_cluster,
    plan_hosts,
    upload_text,
)

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
HEAD, WORKER1, WORKER2 = "lab-head", "lab-worker1", "lab-worker2"
CLUSTER = {"cluster_name": "lab"}
CAPTURES = REPO / "tests" / "fixtures" / "slurm"
HARDWARE = REPO / "gpuinfra_lab" / "hardware"
PROFILE = {WORKER1: "8x-h100-sxm-nvswitch", WORKER2: "2x-h100-pcie-bridged"}
SPEC = {
    HEAD: {"ssh_hostname": "10.0.0.10"},
    WORKER1: {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
              "gpu_topology": "nvswitch-all-to-all", "ssh_hostname": "10.0.0.11"},
    WORKER2: {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs",
              "ssh_hostname": "10.0.0.12"},
}
CONFIG_OP = "Slurm configuration, checked by Slurm before it goes in"
ACCOUNTING_KEY = "database=slurm_acct_db,user=slurm"


# ----------------------------------------------------------------------------- the lab's hosts

def role_of(name: str) -> str:
    return "head" if name == HEAD else "worker"


def layers(distro: str, name: str) -> list[str]:
    """The fact layers of ``name`` before the role."""
    worker = [] if name == HEAD else [f"slurm-lab-{name.removeprefix('lab-')}"]
    return ["base-fresh", distro, "munge-fresh", "slurm-fresh", *worker]


def fresh(distro: str, name: str) -> dict:
    return load_facts(*layers(distro, name))


def converged(distro: str, name: str) -> dict:
    return load_facts(*layers(distro, name), "slurm-converged", f"slurm-converged-{distro}",
                      f"slurm-converged-{role_of(name)}")


def lab(facts_of: dict[str, dict], data: dict | None = None) -> list[FakeHost]:
    groups = {HEAD: ("head",), WORKER1: ("workers",), WORKER2: ("workers",)}
    return [FakeHost(name, groups[name], facts, {**SPEC[name], **(data or {}).get(name, {})})
            for name, facts in facts_of.items()]


def fresh_lab(distro: str) -> dict[str, dict]:
    return {name: fresh(distro, name) for name in (HEAD, WORKER1, WORKER2)}


def converged_lab(distro: str, **cluster) -> dict[str, dict]:
    """Every host converged: its live Slurm files are the ones expected for it."""
    facts_of = {name: converged(distro, name) for name in (HEAD, WORKER1, WORKER2)}
    for name, facts in facts_of.items():
        facts["files.Sha256File"] = {
            **facts["files.Sha256File"],
            **{f"path={path}": sha256(text)
               for path, text in expected_files(distro, name, **cluster).items()}}
        facts["files.Sha1File"] = {**facts["files.Sha1File"],
                                   **dropin_sums(distro, name, cluster.get("accounting", False))}
    return facts_of


def dropin_sums(distro: str, name: str, accounting: bool) -> dict[str, str]:
    """Sha1File values of the boot drop-ins the role writes on ``name``, as in place."""
    groups = ("head",) if name == HEAD else ("workers",)
    needs = boot_needs(NodeSpec(name, groups), accounting)
    if accounting and name == HEAD:
        needs.append(dbd_boot_needs(DISTRO[distro]))
    return {f"path={dropin_path(n.unit)}":
            hashlib.sha1(boot_dropin(n.why, n.after, n.wants).encode()).hexdigest()
            for n in needs}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ----------------------------------------------------------------------------- the oracle

def capture_layout():
    return parse_lscpu((CAPTURES / "lscpu-p-lab-worker-2cpu.txt").read_text())


def capture_memory() -> int:
    return parse_meminfo_mb((CAPTURES / "meminfo-lab-worker-memtotal.txt").read_text())


def capture_gpus(name: str) -> list[dict]:
    gpus = json.loads((HARDWARE / PROFILE[name] / "gpus.json").read_text())
    return [{**g, "index": int(g["index"])} for g in gpus]


def expected_files(distro: str, name: str, accounting: bool = False,
                   extra: dict | None = None) -> dict[str, str]:
    """slurm.conf, gres.conf and cgroup.conf for ``name``, from the library and the captures."""
    spec = build_cluster([HostInput(n, ("head",) if n == HEAD else ("workers",),
                                    {**CLUSTER, **SPEC[n], "slurm_accounting": accounting})
                          for n in (HEAD, WORKER1, WORKER2)])
    workers = [n for n in spec.nodes if n.is_worker]
    reserve = DEFAULTS["slurm_memory_reserve_percent"]
    hardware = node_hardware(capture_layout(), capture_memory(), reserve)
    conf = slurm_conf(spec, {n: SPEC[n]["ssh_hostname"] for n in SPEC},
                      {n.name: hardware for n in workers},
                      {n.name: gpu_type(n.gpus.model.key) for n in workers},
                      accounting=accounting, extra=extra, health=HEALTH_DEFAULTS)
    settings = {"slurmd_timeout": DEFAULTS["slurm_slurmd_timeout"],
                "cgroup_plugin": DISTRO[distro]["cgroup_plugin"]}
    node = spec.node(name)
    plan = GresPlan(())
    if node.gpus:
        devices, notes = gpu_devices(capture_gpus(name), {})
        topo = parse_topo((HARDWARE / PROFILE[name] / "topo-m.txt").read_text())
        plan = gres_plan(node, gpu_type(node.gpus.model.key), devices, topo, capture_layout())
        plan = GresPlan(plan.lines, (*notes, *plan.notes), plan.nvml_needed)
    return {SLURM_CONF: TEMPLATES.render(SLURM_CONF, conf=conf, settings=settings),
            GRES_CONF: TEMPLATES.render(GRES_CONF, node=name, plan=plan),
            CGROUP_CONF: TEMPLATES.render(CGROUP_CONF, settings=settings)}


# ----------------------------------------------------------------------------- plan helpers

def plan_for(name: str, facts_of: dict[str, dict], cluster: dict | None = None,
             data: dict | None = None) -> Plan:
    return plan_cluster(slurm, lab(facts_of, data), name, {**CLUSTER, **(cluster or {})})


def staged(result: Plan) -> dict[str, str]:
    """Live path -> text of each file the configuration op stages."""
    uploads = [c for c in result.op(CONFIG_OP).raw if isinstance(c, FileUploadCommand)]
    return {f"/etc/slurm/{c.dest.rsplit('/', 1)[1]}": upload_text(c.src) for c in uploads}


def installed(result: Plan, op: str = "Install Slurm") -> str:
    return result.op(op).commands[-1].split("install --no-install-recommends ", 1)[1]


def lines(text: str) -> list[str]:
    return text.splitlines()


# ----------------------------------------------------------------------------- packages

@pytest.mark.parametrize("distro", DISTROS)
def test_head_installs_controller_client_and_slurmd_which_it_keeps_off(distro):
    result = plan_for(HEAD, fresh_lab(distro))
    assert installed(result) == "slurmctld slurm-client slurmd"
    assert result.op("Run slurmctld").commands == ("systemctl start slurmctld.service",
                                                   "systemctl enable slurmctld.service")
    assert result.op("slurmd off on a host that is not a worker")
    assert not [op for op in result.ops if op.name.endswith("Run slurmd")]
    assert not [op for op in result.ops if "MariaDB" in op.name]


@pytest.mark.parametrize("distro", DISTROS)
def test_workers_install_slurmd_and_the_client(distro):
    for name in (WORKER1, WORKER2):
        result = plan_for(name, fresh_lab(distro))
        assert installed(result) == "slurmd slurm-client"
        assert result.op("Run slurmd").commands == ("systemctl start slurmd.service",
                                                    "systemctl enable slurmd.service")
        assert not any("slurmctld" in c for c in result.commands)


@pytest.mark.parametrize("distro", DISTROS)
def test_cgroup_conf_follows_the_distribution(distro):
    text = staged(plan_for(WORKER1, fresh_lab(distro)))[CGROUP_CONF]
    plugin = "cgroup/v1" if distro == "ubuntu-22.04" else "autodetect"
    assert f"CgroupPlugin={plugin}" in lines(text)
    assert "ConstrainDevices=yes" in lines(text)


# ----------------------------------------------------------------------------- what is staged

@pytest.mark.parametrize("distro", DISTROS)
@pytest.mark.parametrize("name", [HEAD, WORKER1, WORKER2])
def test_staged_files_are_the_library_rendering_of_every_workers_facts(distro, name):
    assert staged(plan_for(name, fresh_lab(distro))) == expected_files(distro, name)


def test_slurm_conf_is_the_same_on_every_node_and_describes_each_worker():
    texts = {name: staged(plan_for(name, fresh_lab("debian-12")))[SLURM_CONF]
             for name in (HEAD, WORKER1, WORKER2)}
    assert len(set(texts.values())) == 1
    conf = lines(texts[HEAD])
    assert "SlurmctldHost=lab-head(10.0.0.10)" in conf and "GresTypes=gpu" in conf
    # slurmd -C on the lab VM: CPUs=2 ... RealMemory=24105, less the 2 % reserve.
    assert ("NodeName=lab-worker1 NodeAddr=10.0.0.11 CPUs=2 Sockets=1 CoresPerSocket=2 "
            "ThreadsPerCore=1 RealMemory=23622 Gres=gpu:h100-sxm5-80gb:8 State=UNKNOWN") in conf
    assert ("NodeName=lab-worker2 NodeAddr=10.0.0.12 CPUs=2 Sockets=1 CoresPerSocket=2 "
            "ThreadsPerCore=1 RealMemory=23622 Gres=gpu:h100-pcie-80gb:2 State=UNKNOWN") in conf
    assert ("PartitionName=gpu Nodes=lab-worker1,lab-worker2 MaxTime=INFINITE State=UP "
            "Default=YES") in conf


def test_each_worker_is_described_from_its_own_facts():
    facts_of = fresh_lab("debian-12")
    facts_of[WORKER2]["gpuinfra_deploy.facts.system.MemTotalMb"] = 515703
    facts_of[WORKER2]["gpuinfra_deploy.facts.system.CpuLayout"] = parse_lscpu(
        (CAPTURES / "lscpu-p-hgx-2x48c-SYNTHESIZED.txt").read_text()).to_json()
    conf = lines(staged(plan_for(WORKER1, facts_of))[SLURM_CONF])
    assert ("NodeName=lab-worker2 NodeAddr=10.0.0.12 CPUs=192 Sockets=2 CoresPerSocket=48 "
            "ThreadsPerCore=2 RealMemory=505388 Gres=gpu:h100-pcie-80gb:2 State=UNKNOWN") in conf
    assert any(line.startswith("NodeName=lab-worker1 ") and " CPUs=2 " in line
               for line in conf)


def test_every_workers_facts_are_asked_for():
    facts_of = fresh_lab("debian-12")
    del facts_of[WORKER2]["gpuinfra_deploy.facts.system.MemTotalMb"]
    with pytest.raises(MissingFact, match="lab-worker2: fixture lacks fact .*MemTotal"):
        plan_for(HEAD, facts_of)


def test_a_worker_whose_lscpu_failed_registers_one_cpu_until_the_next_deploy():
    facts_of = fresh_lab("debian-12")
    # the fact's value when lscpu fails
    facts_of[WORKER2]["gpuinfra_deploy.facts.system.CpuLayout"] = {}
    conf = lines(staged(plan_for(HEAD, facts_of))[SLURM_CONF])
    assert ("NodeName=lab-worker2 NodeAddr=10.0.0.12 CPUs=1 Gres=gpu:h100-pcie-80gb:2 "
            "State=UNKNOWN") in conf


def test_gres_conf_of_the_lab_h100_worker():
    gres = staged(plan_for(WORKER1, fresh_lab("debian-12")))[GRES_CONF]
    settings = [line for line in lines(gres) if line and not line.startswith("#")]
    assert settings == [
        f"Name=gpu Type=h100-sxm5-80gb File=/dev/nvidia{i} Links="
        + ",".join("-1" if j == i else "18" for j in range(8)) for i in range(8)]
    # The 2-CPU VM cannot hold the HGX affinity: Cores= is left out, and the file says why.
    assert any(line.startswith("# note: GPU0's CPU affinity (0-47,96-143)") for line in
               lines(gres))
    assert "# note: device minors of GPU 0-7 not reported by the driver" in gres


def test_gres_conf_of_a_real_hgx_host_pins_gpus_to_their_numa_half():
    facts_of = fresh_lab("debian-12")
    facts_of[WORKER1]["gpuinfra_deploy.facts.system.CpuLayout"] = parse_lscpu(
        (CAPTURES / "lscpu-p-hgx-2x48c-SYNTHESIZED.txt").read_text()).to_json()
    facts_of[WORKER1]["gpuinfra_deploy.facts.nvidia.NvidiaDeviceMinors"] = {
        g["pci.bus_id"][-12:].lower(): int(g["index"]) for g in capture_gpus(WORKER1)}
    gres = lines(staged(plan_for(WORKER1, facts_of))[GRES_CONF])
    gpu_lines = [line for line in gres if line.startswith("Name=gpu ")]
    assert [line.split(" Cores=")[1].split()[0] for line in gpu_lines] == \
        ["0-47"] * 4 + ["48-95"] * 4
    assert gpu_lines[0] == ("Name=gpu Type=h100-sxm5-80gb File=/dev/nvidia0 Cores=0-47 "
                            "Links=-1,18,18,18,18,18,18,18")
    assert not any(line.startswith("# note:") for line in gres)


def test_head_gres_conf_has_no_gpu_lines_and_the_check_runs_as_the_first_worker():
    result = plan_for(HEAD, fresh_lab("debian-12"))
    gres = staged(result)[GRES_CONF]
    assert [line for line in lines(gres) if line and not line.startswith("#")] == []
    assert check_command(STAGE_DIR, WORKER1, elsewhere=True) in result.op(CONFIG_OP).commands


def test_head_checks_as_a_worker_whose_gpus_are_not_shared():
    # lab-worker2 shares its GPUs with MPS: Slurm cannot merge its GRES on the head (no
    # gres.conf of its own there), so the head checks as lab-worker1, never as lab-worker2.
    commands = plan_for(HEAD, fresh_lab("debian-12")).op(CONFIG_OP).commands
    assert not [c for c in commands if f"-N {WORKER2}" in c]


def test_site_gpu_type_and_extra_settings_reach_the_files():
    data = {WORKER1: {"slurm_gpu_type": "h100"}}
    facts_of = fresh_lab("debian-12")
    result = plan_cluster(slurm, lab(facts_of, data), WORKER1,
                          {**CLUSTER, "slurm_conf_extra": {"MaxJobCount": 20000}})
    files = staged(result)
    assert " Gres=gpu:h100:8 " in files[SLURM_CONF]
    assert "MaxJobCount=20000" in lines(files[SLURM_CONF])
    assert "Name=gpu Type=h100 File=/dev/nvidia0 " in files[GRES_CONF]


# ----------------------------------------------------------------------------- checked_config

@pytest.mark.parametrize("distro", DISTROS)
@pytest.mark.parametrize("name", [HEAD, WORKER1, WORKER2])
def test_fresh_host_stages_then_lets_slurm_check_before_anything_goes_in(distro, name):
    op = plan_for(name, fresh_lab(distro)).op(CONFIG_OP)
    commands = list(op.commands)
    # The head checks as its first worker whose GPUs are not shared (lab-worker2 uses MPS),
    # dropping the one line Slurm prints there about the worker's GPU files (operations.py).
    check_as = WORKER1 if name == HEAD else name
    check = check_command(STAGE_DIR, check_as, elsewhere=name == HEAD)
    assert f"slurmd -G -f {STAGE_DIR}/slurm.conf -N {check_as} " in check
    assert commands[0] == f"install -d -m 0700 {STAGE_DIR}"  # private: root only
    assert [(type(c), c.dest) for c in op.raw[1:4]] == [
        (FileUploadCommand, f"{STAGE_DIR}/{f}") for f in ("slurm.conf", "gres.conf", "cgroup.conf")]
    assert commands.index(check) == 4
    moves = [i for i, c in enumerate(commands) if " mv " in f" {c} "]
    assert moves and min(moves) > commands.index(check)
    assert commands[5:] == [
        f"cp {STAGE_DIR}/{f} /etc/slurm/{f}.gpuinfra-new && chmod 0644 "
        f"/etc/slurm/{f}.gpuinfra-new && mv -f /etc/slurm/{f}.gpuinfra-new /etc/slurm/{f}"
        for f in ("slurm.conf", "gres.conf", "cgroup.conf")]


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_cluster_plans_no_command(distro):
    hosts = lab(converged_lab(distro))
    both = plan_hosts(slurm, hosts, [HEAD, WORKER1, WORKER2], CLUSTER)
    for name, result in both.plans.items():
        assert result.commands == [], (name, result.changing)


def test_converged_check_can_fail_on_one_file():
    facts_of = converged_lab("debian-12")
    facts_of[WORKER1]["files.Sha256File"][f"path={GRES_CONF}"] = "0" * 64
    result = plan_for(WORKER1, facts_of)
    assert [op.name for op in result.changing] == [
        f"slurm | {CONFIG_OP}", "slurm | Restart slurmd on the new configuration"]
    commands = result.op(CONFIG_OP).commands
    assert sum(c.startswith("FileUploadCommand(") for c in commands) == 3  # checked as a set
    assert [c.split(" && ")[-1] for c in commands if c.startswith("cp ")] == [
        f"mv -f {GRES_CONF}.gpuinfra-new {GRES_CONF}"]  # only the changed file goes in
    assert result.op("Restart slurmd").commands == ("systemctl restart slurmd.service",)


def test_a_workers_new_hardware_rewrites_slurm_conf_and_restarts_the_controller():
    facts_of = converged_lab("ubuntu-24.04")
    facts_of[WORKER2]["gpuinfra_deploy.facts.system.MemTotalMb"] = 48000  # worker2 got more memory
    head = plan_for(HEAD, facts_of)
    assert [op.name for op in head.changing] == [
        f"slurm | {CONFIG_OP}", "slurm | Restart slurmctld on the new configuration"]
    assert head.op("Restart slurmctld").commands == ("systemctl restart slurmctld.service",)
    assert "RealMemory=47040" in staged(head)[SLURM_CONF]


@pytest.mark.parametrize("distro", DISTROS)
def test_restarts_only_when_the_configuration_changes(distro):
    facts_of = converged_lab(distro)
    assert plan_for(HEAD, facts_of).op("Restart slurmctld").commands == ()
    assert plan_for(WORKER2, facts_of).op("Restart slurmd").commands == ()
    facts_of[HEAD]["files.Sha256File"][f"path={CGROUP_CONF}"] = "0" * 64
    assert plan_for(HEAD, facts_of).op("Restart slurmctld").commands == (
        "systemctl restart slurmctld.service",)


@pytest.mark.parametrize("name", [HEAD, WORKER1])
def test_a_first_start_is_not_followed_by_a_restart(name):
    """A daemon this run starts reads the new files: restarting it a second later only
    costs a wait (and slurmd restarted before slurmctld exists waits the longest)."""
    result = plan_for(name, fresh_lab("debian-12"))
    daemon = "slurmctld" if name == HEAD else "slurmd"
    assert f"systemctl start {daemon}.service" in result.op(f"Run {daemon}").commands
    assert result.op(f"Restart {daemon}").commands == ()


def test_fresh_head_disables_the_slurmd_its_package_enables():
    result = plan_for(HEAD, fresh_lab("debian-12"))
    assert any("slurmd" in c and "disable" in c for c in result.commands)


# ----------------------------------------------------------------------------- accounting

@pytest.mark.parametrize("distro", DISTROS)
def test_accounting_on_the_head_installs_mariadb_slurmdbd_and_creates_the_database(distro):
    result = plan_for(HEAD, fresh_lab(distro), {"slurm_accounting": True})
    assert installed(result, "Install MariaDB and slurmdbd") == "slurmdbd mariadb-server"
    assert result.op("Run MariaDB").commands == ("systemctl start mariadb.service",
                                                 "systemctl enable mariadb.service")
    sql = result.op("Accounting database slurm_acct_db and its user slurm").commands
    assert len(sql) == 1
    assert shlex.split(sql[0]) == [  # what mysql receives once the shell has unquoted it
        "mysql", "-e", "CREATE DATABASE IF NOT EXISTS slurm_acct_db; "
        "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED VIA unix_socket; "
        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"]
    assert any(c.startswith("FileUploadCommand(") and SLURMDBD_CONF in c
               for c in result.op(SLURMDBD_CONF).commands)
    assert result.op("Run slurmdbd").commands
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines(
        staged(result)[SLURM_CONF])
    order = [op.name for op in result.ops]
    assert order.index("slurm | Run slurmdbd") < order.index("slurm | Run slurmctld")
    # then it waits for slurmctld to hold the gres/gpu TRES (restarting it once if not)
    assert order.index("slurm | Run slurmctld") < order.index(
        "slurm | slurmctld counts GPUs in accounting (gres/gpu TRES)")
    assert result.op("gres/gpu TRES").commands == (gpu_tres_script(),)


def test_accounting_database_already_there_runs_no_sql():
    facts_of = fresh_lab("debian-12")
    facts_of[HEAD]["gpuinfra_roles.slurm.operations.MariaDbAccounting"] = {
        ACCOUNTING_KEY: {"database": True, "user": True}}
    result = plan_for(HEAD, facts_of, {"slurm_accounting": True})
    assert result.op("Accounting database").commands == ()
    facts_of[HEAD]["gpuinfra_roles.slurm.operations.MariaDbAccounting"] = {
        ACCOUNTING_KEY: {"database": True, "user": False}}
    again = plan_for(HEAD, facts_of, {"slurm_accounting": True})
    assert again.op("Accounting database").commands[0].startswith("mysql -e ")


def test_accounting_is_the_heads_alone():
    result = plan_for(WORKER1, fresh_lab("debian-12"), {"slurm_accounting": True})
    assert not [op for op in result.ops if "MariaDB" in op.name or "slurmdbd" in op.name]
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines(
        staged(result)[SLURM_CONF])  # slurm.conf is the same everywhere


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_head_with_accounting_plans_no_command(distro):
    facts_of = converged_lab(distro, accounting=True)
    head = facts_of[HEAD]
    dbd = TEMPLATES.render(SLURMDBD_CONF, cluster_name="lab", controller=HEAD,
                 settings={"db_name": DEFAULTS["slurm_db_name"],
                           "db_user": DEFAULTS["slurm_db_user"]})
    version = head["deb.DebPackages"]["slurmctld"]
    head["deb.DebPackages"].update({"slurmdbd": version, "mariadb-server": ["1:10.11.6-0"]})
    head["files.File"][f"path={SLURMDBD_CONF}"] = {"mode": 600, "size": len(dbd),
                                                   "user": "slurm", "group": "slurm"}
    head["files.Sha1File"][f"path={SLURMDBD_CONF}"] = hashlib.sha1(dbd.encode()).hexdigest()
    for fact in ("systemd.SystemdStatus", "systemd.SystemdEnabled"):
        head[fact] = {"*": {**head[fact]["*"], "mariadb.service": True,
                            "slurmdbd.service": True}}
    head["gpuinfra_roles.slurm.operations.MariaDbAccounting"] = {
        ACCOUNTING_KEY: {"database": True, "user": True}}
    head["gpuinfra_roles.slurm.operations.SlurmctldTres"] = {"answering": True, "gres_gpu": True}
    result = plan_for(HEAD, facts_of, {"slurm_accounting": True})
    assert result.commands == [], result.changing
    head["files.Sha1File"][f"path={SLURMDBD_CONF}"] = "0" * 40  # slurmdbd.conf edited by hand
    changed = plan_for(HEAD, facts_of, {"slurm_accounting": True})
    assert [op.name for op in changed.changing] == [
        f"slurm | {SLURMDBD_CONF} (slurm only, 0600)",
        "slurm | Restart slurmdbd on the new configuration"]


def test_a_database_name_that_is_not_an_identifier_is_refused():
    with pytest.raises(PyinfraError, match="slurm_db_name = 'acct; DROP'"):
        plan_for(HEAD, fresh_lab("debian-12"), {"slurm_accounting": True,
                                                "slurm_db_name": "acct; DROP"})


def test_mariadb_accounting_fact():
    fact = MariaDbAccounting()
    command = fact.command("slurm_acct_db", "slurm")
    words = shlex.split(command)
    assert words[:4] == ["mysql", "-N", "-B", "-e"]
    assert "schema_name='slurm_acct_db'" in words[4] and "user='slurm'" in words[4]
    assert command.endswith("|| echo '0 0'")
    assert fact.process(["1\t1"]) == {"database": True, "user": True}
    assert fact.process(["1 0"]) == {"database": True, "user": False}
    assert fact.process(["0 0"]) == {"database": False, "user": False}
    assert fact.process([]) == {"database": False, "user": False}


# ----------------------------------------------------------------------------- MIG

MIG = {"gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 2}}}


def test_mig_node_on_ubuntu_22_04_is_refused_without_an_nvml_plugin():
    with pytest.raises(GpuinfraError, match="no NVML plugin"):
        plan_for(WORKER1, fresh_lab("ubuntu-22.04"), data={WORKER1: MIG})


@pytest.mark.parametrize("distro", ["debian-12", "ubuntu-24.04"])
def test_mig_node_gets_the_nvml_plugin_and_autodetect(distro):
    result = plan_for(WORKER1, fresh_lab(distro), data={WORKER1: MIG})
    assert installed(result) == "slurmd slurm-client slurm-wlm-nvml-plugin"
    files = staged(result)
    assert "AutoDetect=nvml" in lines(files[GRES_CONF])
    assert " Gres=gpu:3g.40gb:16 " in files[SLURM_CONF]
    assert installed(plan_for(WORKER2, fresh_lab(distro), data={WORKER1: MIG})) == \
        "slurmd slurm-client"  # the other worker has no MIG


# ----------------------------------------------------------------------------- the spec gate

def test_an_invalid_spec_stops_the_role_before_any_operation():
    with pytest.raises(PyinfraError, match="gpu_count"):
        plan_for(WORKER1, fresh_lab("debian-12"), data={WORKER1: {"gpu_count": "8"}})


def test_each_run_gets_the_site_of_its_own_inventory_built_once():
    """The Site is kept per pyinfra State (weakly): two runs never share one, and the hosts of
    one run share the one built by the first host that asked."""
    def state_named(name: str) -> tuple[State, Inventory]:
        inventory = Inventory(([("h1", {"node_address": "192.0.2.1"}),
                                ("h2", {"node_address": "192.0.2.2"})], {"cluster_name": name}),
                              head=(["h1"], {}), workers=(["h2"], {}))
        return State(inventory, Config()), inventory

    sites = []
    for name in ("one", "two"):
        state, inventory = state_named(name)
        with ctx_state.use(state), ctx_inventory.use(inventory):
            first = current_site()
            assert current_site() is first
            sites.append(first)
    assert [s.spec.name for s in sites] == ["one", "two"]


def test_a_cluster_without_workers_is_refused_by_the_gate():
    only_head = [FakeHost(HEAD, ("head",), fresh("debian-12", HEAD), SPEC[HEAD])]
    with pytest.raises(PyinfraError, match="no Slurm worker"):
        plan_cluster(slurm, only_head, HEAD, CLUSTER)


# ----------------------------------------------------------------------------- Slurm's check

SLURMD_STUB = """#!/bin/sh
printf '%s\\n' "$*" > "$STUB_ARGS"
cat "$STUB_OUTPUT" >&2
exit "$STUB_RC"
"""


def run_check(tmp_path: Path, capture: str, rc: int) -> subprocess.CompletedProcess:
    """check_command's shell, with a `slurmd` on PATH that prints ``capture`` and exits ``rc``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "slurmd"
    stub.write_text(SLURMD_STUB)
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "STUB_OUTPUT": str(CAPTURES / capture), "STUB_RC": str(rc),
           "STUB_ARGS": str(tmp_path / "args")}
    return subprocess.run(["bash", "-c", check_command(STAGE_DIR, WORKER1)], env=env,
                          capture_output=True, text=True, timeout=30)


def test_check_passes_slurms_good_output(tmp_path):
    done = run_check(tmp_path, "slurmd-G-lab-worker1-8x-h100.txt", 0)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
    assert (tmp_path / "args").read_text() == f"-G -f {STAGE_DIR}/slurm.conf -N {WORKER1}\n"


def test_check_refuses_error_lines_even_when_slurmd_exits_0(tmp_path):
    done = run_check(tmp_path, "slurmd-G-invalid-cores.txt", 0)
    assert done.returncode == 1
    stderr = done.stderr.splitlines()
    assert stderr[:2] == ["slurmd-lab-worker1: error: xcpuinfo_abs_to_mac: failed",
                          "slurmd-lab-worker1: error: Invalid GRES data for gpu, Cores=0-47"]
    assert stderr[2].startswith("gpuinfra: Slurm refused the new configuration")
    assert "nothing was installed" in stderr[2]
    assert not any("Gres Name=" in line for line in stderr)  # only the error lines


def test_check_refuses_a_fatal_parse_error(tmp_path):
    done = run_check(tmp_path, "slurmd-G-unknown-key.txt", 1)
    assert done.returncode == 1
    assert "slurmd: fatal: Unable to process configuration file" in done.stderr
    assert "unrecognized key: SelectTypeParameter" in done.stderr
    assert "gpuinfra: Slurm refused the new configuration" in done.stderr


def test_check_refuses_a_failing_slurmd_even_without_error_lines(tmp_path):
    done = run_check(tmp_path, "slurmd-G-lab-worker1-8x-h100.txt", 1)
    assert done.returncode == 1 and "gpuinfra: Slurm refused" in done.stderr


def test_check_quotes_the_node_name():
    assert "-N 'a b'" in check_command(STAGE_DIR, "a b")


# ----------------------------------------------------------------------------- the fixtures

def test_fact_fixtures_are_the_facts_of_their_captures():
    """If this fails, a fact's process() changed: regenerate tests/plan/facts/slurm-lab-*.json
    from the captures named in their _comment."""
    layout = CpuLayout().process(
        (CAPTURES / "lscpu-p-lab-worker-2cpu.txt").read_text().split("\n"))
    memory = MemTotalMb().process(
        (CAPTURES / "meminfo-lab-worker-memtotal.txt").read_text().split("\n"))
    for name in (WORKER1, WORKER2):
        facts = json.loads((FACTS / f"slurm-lab-{name.removeprefix('lab-')}.json").read_text())
        rows = [", ".join(str(g[f]).removesuffix(" MiB") for f in GPU_FIELDS)
                for g in capture_gpus(name)]
        topo = (HARDWARE / PROFILE[name] / "topo-m.txt").read_text().split("\n")
        assert facts["gpuinfra_deploy.facts.system.CpuLayout"] == layout
        assert facts["gpuinfra_deploy.facts.system.MemTotalMb"] == memory == 24105
        assert facts["gpuinfra_deploy.facts.nvidia.NvidiaGpus"] == NvidiaGpus().process(rows)
        topology = facts["gpuinfra_deploy.facts.nvidia.NvidiaTopology"]
        assert topology == NvidiaTopology().process(topo)
        assert facts["gpuinfra_deploy.facts.nvidia.NvidiaDeviceMinors"] == {}


# ----------------------------------------------------------------------------- boot order

def dropin_text(result: Plan, unit: str) -> str:
    op = result.op(f"{unit}: boot order and bounded restart (drop-in)")
    return next(upload_text(c.src) for c in op.raw if isinstance(c, FileUploadCommand))


def test_the_controller_starts_after_munge_and_slurmdbd_and_restarts_a_bounded_number_of_times():
    """The reboot fault: slurmctld raced slurmdbd at boot and, with no saved state, exited for
    good. Its drop-in orders it after slurmdbd (accounting) and munge, with a bounded restart;
    slurmdbd waits for MariaDB; a worker's slurmd for munge."""
    head = plan_for(HEAD, fresh_lab("debian-12"), cluster={"slurm_accounting": True})
    ctld = dropin_text(head, "slurmctld.service")
    assert "After=munge.service network-online.target nss-lookup.target slurmdbd.service" in ctld
    assert "Wants=munge.service slurmdbd.service" in ctld
    assert "Restart=on-failure" in ctld and "StartLimitBurst=30" in ctld
    assert "After=munge.service mariadb.service" in dropin_text(head, "slurmdbd.service")
    assert head.op("Reload systemd units (boot order drop-ins)").commands == (
        "systemctl daemon-reload",)
    worker = plan_for(WORKER1, fresh_lab("debian-12"))
    assert "Wants=munge.service" in dropin_text(worker, "slurmd.service")
    no_accounting = plan_for(HEAD, fresh_lab("debian-12"))
    assert "slurmdbd" not in dropin_text(no_accounting, "slurmctld.service")


def test_a_controller_without_the_gpu_tres_is_made_to_count_gpus():
    """Once in about ten CI runs slurmctld came up without the gres/gpu TRES (it started
    before slurmdbd knew it) and sacct recorded jobs without their GPUs: a head whose
    slurmctld shows no gres/gpu in its nodes' CfgTRES gets the wait-and-restart-once step."""
    facts_of = fresh_lab("debian-12")
    head = facts_of[HEAD]
    head["gpuinfra_roles.slurm.operations.SlurmctldTres"] = {"answering": True, "gres_gpu": False}
    assert plan_for(HEAD, facts_of, {"slurm_accounting": True}).op("gres/gpu TRES").commands
    head["gpuinfra_roles.slurm.operations.SlurmctldTres"] = {"answering": True, "gres_gpu": True}
    assert plan_for(HEAD, facts_of, {"slurm_accounting": True}).op("gres/gpu TRES").commands == ()
    assert not [op for op in plan_for(HEAD, facts_of).ops if "TRES" in op.name]  # no accounting


def test_slurmctld_tres_fact_and_its_script(tmp_path):
    fact = SlurmctldTres()
    with_gpu = ["NodeName=w1 Arch=x86_64 CoresPerSocket=1 CfgTRES=cpu=2,mem=23622M,billing=2,"
                "gres/gpu=8 AllocTRES= CapWatts=n/a",
                "NodeName=head Arch=x86_64 CfgTRES=cpu=2,mem=23622M,billing=2 AllocTRES="]
    assert fact.process(with_gpu) == {"answering": True, "gres_gpu": True}
    assert fact.process([with_gpu[1]]) == {"answering": True, "gres_gpu": False}
    assert fact.default() == {"answering": False, "gres_gpu": False}
    # the script, run for real against a stand-in scontrol/systemctl: restarts once, then
    # succeeds when the TRES appears; gives up naming what to look at when it never does
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\n[ -f " + str(tmp_path / "restarted") + " ] && echo '" + with_gpu[0] + "'"
        "\necho '" + with_gpu[1] + "'\n")
    (bin_dir / "systemctl").write_text("#!/bin/sh\ntouch " + str(tmp_path / "restarted") + "\n")
    (bin_dir / "sleep").write_text("#!/bin/sh\n:\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    run = subprocess.run(["sh", "-c", gpu_tres_script()], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0 and "restarting it once" in run.stderr
    (bin_dir / "systemctl").write_text("#!/bin/sh\n:\n")
    (tmp_path / "restarted").unlink()
    run = subprocess.run(["sh", "-c", gpu_tres_script()], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and "sacctmgr show tres" in run.stderr
