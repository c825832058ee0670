"""Plan tests of the `slurm` role on the lab's three hosts: Debian 12, Ubuntu 22.04 and 24.04.

Slurm runs configless (gpuinfra.slurm.conf, "configless"): the head alone has slurm.conf,
gres.conf (one file for the cluster, each worker's lines with ``NodeName=``) and cgroup.conf,
and every slurmd fetches them from slurmctld. The role is planned in a three-host inventory
(tests/plan/harness.py, plan_cluster/plan_hosts): lab-head, lab-worker1 (8x H100 SXM replayed)
and lab-worker2 (2x H100 PCIe replayed), both on the lab's 2-CPU VM. Fixture layers
(tests/plan/facts/): base-fresh, <distro>, munge-fresh, slurm-fresh (+ the worker's
slurm-lab-workerN) make a node before the role; slurm-converged, slurm-converged-<distro> and
slurm-converged-head|worker make one the role converged, whose state the tests complete from
the text the library renders for the cluster: the head's live files (their SHA-256, and their
text as RunningSlurmConf reads it), each worker's mark of the set it accepted, the slurmd
drop-in's SHA-1.

What the role should write is computed here independently of the role: the library
(gpuinfra.slurm.conf) and the templates, fed from the raw captures the fact fixtures were made
from (test_fact_fixtures_are_the_facts_of_their_captures keeps the two in step).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from pyinfra.api import Config, FileUploadCommand, Inventory, State
from pyinfra.api.exceptions import PyinfraError
from pyinfra.context import ctx_inventory, ctx_state

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.cpus import parse_lscpu, parse_meminfo_mb
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.slurm.accounting import sacctmgr_script
from gpuinfra.slurm.conf import slurm_conf
from gpuinfra.slurm.gres import gpu_devices, gpu_type, gres_plan
from gpuinfra.slurm.nodes import node_hardware
from gpuinfra.slurm.running import CONFIGLESS_DROPIN, node_gres_lines
from gpuinfra.spec import HostInput, NodeSpec, build_cluster
from gpuinfra.units import dropin_path
from gpuinfra.vfio import CGROUP_V1_ARGS, CGROUP_V1_WHY, grub_dropin
from gpuinfra_deploy.facts._base import GPU_FIELDS
from gpuinfra_deploy.facts.nvidia import NvidiaGpus, NvidiaTopology
from gpuinfra_deploy.facts.system import CpuLayout, MemTotalMb
from gpuinfra_deploy.run.site import current_site
from gpuinfra_deploy.templates import role_file
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_roles.health.defaults import DEFAULTS as HEALTH_DEFAULTS
from gpuinfra_roles.slurm import (
    CGROUP_CONF,
    DISTRO,
    GRES_CONF,
    SLURM_CONF,
    SLURMDBD_CONF,
    boot_needs,
    conf_settings,
    dbd_boot_needs,
    slurm,
)
from gpuinfra_roles.slurm.defaults import DEFAULTS
from gpuinfra_roles.slurm.operations import (
    CHECKED_MARK,
    GRES_MARK,
    STAGE_DIR,
    MariaDbAccounting,
    RunningSlurmConf,
    SlurmAssociations,
    SlurmctldTres,
    check_command,
    gpu_tres_script,
    reconfigure_script,
    removal_guard,
)
from tests.conftest import REPO
from tests.plan import harness
from tests.plan.harness import (
    ClusterPlan,
    FakeHost,
    MissingFact,
    Plan,
    fact_file,
    load_facts,
    plan_cluster,
    plan_hosts,
    upload_text,
)

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
HEAD, WORKER1, WORKER2 = "lab-head", "lab-worker1", "lab-worker2"
WORKERS = (WORKER1, WORKER2)
ALL = (HEAD, WORKER1, WORKER2)
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
JUDGE_OP = ("Slurm configuration, judged by this node's slurmd (its gres.conf lines against "
            "its GPUs)")
JUDGE_STAGE = f"{STAGE_DIR}-check"
DROPIN_OP = "slurmd fetches its configuration from slurmctld (drop-in)"
RESTART_CTLD = "Restart slurmctld on the new configuration"
RECONFIGURE = "The nodes take the new configuration (scontrol reconfigure: each slurmd fetches it)"
RESTART_SLURMD = "Restart slurmd (it fetches the new configuration)"
RUNNING = "gpuinfra_roles.slurm.operations.RunningSlurmConf"
CONF_FILES = (SLURM_CONF, GRES_CONF, CGROUP_CONF)
ACCOUNTING_KEY = "database=slurm_acct_db,user=slurm"
ASSOCIATIONS = "gpuinfra_roles.slurm.operations.SlurmAssociations"
# slurmd's drop-in on every worker, as it must read (written out here, not rendered).
DROPIN_TEXT = """\
# Managed by gpuinfra: local edits are overwritten on the next deploy.
# The node's Slurm configuration is the controller's (configless_slurm.html): gpuinfra_roles/slurm.
[Unit]
# No local slurm.conf: slurmd fetches it from slurmctld.
ConditionPathExists=

[Service]
ExecStart=
ExecStart=/usr/sbin/slurmd -D -s --conf-server 10.0.0.10:6817 $SLURMD_OPTIONS
"""
# slurmd -C of a 2-socket HGX (tests/fixtures/slurm/lscpu-p-hgx-2x48c-SYNTHESIZED.txt, 515703
# MiB less 2 %): lab-worker2's line in a head's running slurm.conf, so that a line kept from
# that file cannot be mistaken for one computed from the fixtures (CPUs=2 there).
BIG_WORKER2 = ("NodeName=lab-worker2 NodeAddr=10.0.0.12 CPUs=192 Sockets=2 CoresPerSocket=48 "
               "ThreadsPerCore=2 RealMemory=505388 Gres=gpu:h100-pcie-80gb:2 "
               "Features=h100,h100-pcie-80gb,gpus2,nvlink Weight=161 State=UNKNOWN")
BIG_WORKER2_GRES = [
    "NodeName=lab-worker2 Name=gpu Type=h100-pcie-80gb File=/dev/nvidia0 Cores=48-95 "
    "Links=-1,12",
    "NodeName=lab-worker2 Name=gpu Type=h100-pcie-80gb File=/dev/nvidia1 Cores=48-95 "
    "Links=12,-1"]


# ----------------------------------------------------------------------------- the lab's hosts

def role_of(name: str) -> str:
    return "head" if name == HEAD else "worker"


def groups_of(name: str) -> tuple[str, ...]:
    return ("head",) if name == HEAD else ("workers",)


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
    return [FakeHost(name, groups_of(name), facts, {**SPEC[name], **(data or {}).get(name, {})})
            for name, facts in facts_of.items()]


def fresh_lab(distro: str) -> dict[str, dict]:
    return {name: fresh(distro, name) for name in ALL}


def converged_lab(distro: str, **cluster) -> dict[str, dict]:
    """Every host converged: the head runs the files expected for the cluster, each worker
    accepted them and fetches them through its drop-in."""
    files = expected_files(distro, **cluster)
    facts_of = {name: converged(distro, name) for name in ALL}
    head_runs(facts_of[HEAD], files)
    for name in WORKERS:
        judged(facts_of[name], files)
    for name, facts in facts_of.items():
        facts["files.Sha1File"] = {**facts["files.Sha1File"],
                                   **dropin_sums(distro, name, cluster.get("accounting", False))}
    return facts_of


def head_runs(facts: dict, files: dict[str, str]) -> None:
    """The head's live Slurm files are ``files``: their SHA-256 (what the install compares)
    and their text as RunningSlurmConf reads it (what conf_change compares)."""
    facts["files.Sha256File"] = {**facts["files.Sha256File"],
                                 **{f"path={path}": sha256(text) for path, text in files.items()}}
    facts[RUNNING] = RunningSlurmConf().process(
        [*files[SLURM_CONF].splitlines(), GRES_MARK, *files[GRES_CONF].splitlines()])


def judged(facts: dict, files: dict[str, str]) -> None:
    """The worker accepted ``files`` in an earlier run: its mark holds their digests."""
    facts["files.Sha256File"] = {**facts["files.Sha256File"],
                                 f"path={CHECKED_MARK}": sha256(mark(files))}


def mark(files: dict[str, str]) -> str:
    """What a worker writes to CHECKED_MARK once it accepted ``files``: a line per file."""
    return "".join(f"{path} {sha256(text)}\n" for path, text in sorted(files.items()))


def dropin_sums(distro: str, name: str, accounting: bool) -> dict[str, str]:
    """Sha1File values of the drop-ins the role writes on ``name``, as in place: the boot
    order ones and, on a worker, slurmd's configless one."""
    needs = boot_needs(NodeSpec(name, groups_of(name)), accounting)
    if accounting and name == HEAD:
        needs.append(dbd_boot_needs(DISTRO[distro]))
    sums = {f"path={dropin_path(n.unit)}":
            hashlib.sha1(n.text().encode()).hexdigest()
            for n in needs}
    if name != HEAD:
        sums[f"path={CONFIGLESS_DROPIN}"] = hashlib.sha1(DROPIN_TEXT.encode()).hexdigest()
    return sums


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@contextmanager
def not_reached(*names: str, down: bool = False) -> Iterator[None]:
    """The run does not reach ``names``: left out by ``--limit`` (pyinfra never connects to
    them) or, with ``down``, a host that did not answer (connect_all also fails it). The
    harness connects every host of its inventory; this takes the connection back from these."""
    connect_all = harness.connect_all

    def connect(state: State) -> None:
        connect_all(state)
        lost = {h for h in state.inventory if h.name.removeprefix("@fake/") in names}
        for h in lost:
            h.connected = False
        if down:
            state.fail_hosts(lost)

    with mock.patch.object(harness, "connect_all", connect):
        yield


# ----------------------------------------------------------------------------- the oracle

def capture_layout():
    return parse_lscpu((CAPTURES / "lscpu-p-lab-worker-2cpu.txt").read_text())


def capture_memory() -> int:
    return parse_meminfo_mb((CAPTURES / "meminfo-lab-worker-memtotal.txt").read_text())


def capture_gpus(name: str) -> list[dict]:
    gpus = json.loads((HARDWARE / PROFILE[name] / "gpus.json").read_text())
    return [{**g, "index": int(g["index"])} for g in gpus]


def expected_files(distro: str, accounting: bool = False, extra: dict | None = None,
                   workers: tuple[str, ...] = WORKERS) -> dict[str, str]:
    """The cluster's slurm.conf, gres.conf and cgroup.conf, from the library and the captures
    (``workers``: the cluster's workers, each on the lab VM with its replayed GPUs)."""
    names = (HEAD, *workers)
    spec = build_cluster([HostInput(n, groups_of(n),
                                    {**CLUSTER, **SPEC[n], "slurm_accounting": accounting})
                          for n in names])
    nodes = [n for n in spec.nodes if n.is_worker]
    reserve = DEFAULTS["slurm_memory_reserve_percent"]
    hardware = node_hardware(capture_layout(), capture_memory(), reserve)
    conf = slurm_conf(spec, {n: SPEC[n]["ssh_hostname"] for n in names},
                      {n.name: hardware for n in nodes},
                      {n.name: gpu_type(n.gpus.model.key) for n in nodes},
                      accounting=accounting, extra=extra, health=HEALTH_DEFAULTS,
                      job_mapping=True)  # monitoring_job_mapping's default, GPU workers
    settings = conf_settings(DEFAULTS, DISTRO[distro])
    sections = []
    for node in nodes:
        devices, notes = gpu_devices(capture_gpus(node.name), {})
        topo = parse_topo((HARDWARE / PROFILE[node.name] / "topo-m.txt").read_text())
        plan = gres_plan(node, gpu_type(node.gpus.model.key), devices, topo, capture_layout())
        sections.append({"node": node.short_name, "notes": [*notes, *plan.notes],
                         "lines": node_gres_lines(node.short_name, plan.lines)})
    return {SLURM_CONF: role_file("slurm", SLURM_CONF, conf=conf, settings=settings),
            GRES_CONF: role_file("slurm", GRES_CONF, cluster="lab", sections=sections),
            CGROUP_CONF: role_file("slurm", CGROUP_CONF, settings=settings)}


# ----------------------------------------------------------------------------- plan helpers

def plan_for(name: str, facts_of: dict[str, dict], cluster: dict | None = None,
             data: dict | None = None) -> Plan:
    return plan_cluster(slurm, lab(facts_of, data), name, {**CLUSTER, **(cluster or {})})


def plan_all(facts_of: dict[str, dict], cluster: dict | None = None, data: dict | None = None,
             targets: tuple[str, ...] = ALL, failed: tuple[str, ...] = ()) -> ClusterPlan:
    return plan_hosts(slurm, lab(facts_of, data), list(targets), {**CLUSTER, **(cluster or {})},
                      failed=failed)


def staged(result: Plan, op: str = CONFIG_OP) -> dict[str, str]:
    """Live path -> text of each file the head's install op (or a worker's judge op)
    stages."""
    uploads = [c for c in result.op(op).raw if isinstance(c, FileUploadCommand)]
    return {f"/etc/slurm/{c.dest.rsplit('/', 1)[1]}": upload_text(c.src) for c in uploads}


def uploaded(result: Plan, op: str) -> str:
    return next(upload_text(c.src) for c in result.op(op).raw
                if isinstance(c, FileUploadCommand))


def installed(result: Plan, op: str = "Install Slurm") -> str:
    return result.op(op).commands[-1].split("install --no-install-recommends ", 1)[1]


def changing(result: Plan) -> list[str]:
    return [op.name.removeprefix("slurm | ") for op in result.changing]


def lines(text: str) -> list[str]:
    return text.splitlines()


def settings_lines(text: str) -> list[str]:
    return [line for line in lines(text) if line and not line.startswith("#")]


def slurm_warnings(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


# ----------------------------------------------------------------------------- packages

@pytest.mark.parametrize("distro", DISTROS)
def test_head_installs_controller_client_and_slurmd_which_it_keeps_off(distro):
    result = plan_for(HEAD, fresh_lab(distro))
    assert installed(result) == "slurmctld slurm-client slurmd libpmix-dev"
    assert result.op("Run slurmctld").commands == ("systemctl start slurmctld.service",
                                                   "systemctl enable slurmctld.service")
    assert result.op("slurmd off on a host that is not a worker")
    assert not [op for op in result.ops if op.name.endswith("Run slurmd")]
    assert not [op for op in result.ops if "MariaDB" in op.name]
    # slurmd fetches nothing on the head: no drop-in, no judgement of its own
    assert not [op for op in result.ops if "drop-in" in op.name and "slurmd" in op.name
                and "boot order" not in op.name]
    assert not [op for op in result.ops if JUDGE_OP in op.name]


@pytest.mark.parametrize("distro", DISTROS)
def test_workers_install_slurmd_and_the_client(distro):
    for name in WORKERS:
        result = plan_for(name, fresh_lab(distro))
        assert installed(result) == "slurmd slurm-client libpmix-dev"
        if distro == "ubuntu-22.04":  # booted cgroup v2: slurmd starts at the next boot
            assert result.op(V1_WAIT_OP).commands == ("systemctl enable slurmd.service",)
        else:
            assert result.op("Run slurmd").commands == ("systemctl start slurmd.service",
                                                        "systemctl enable slurmd.service")
        assert not any("slurmctld" in c for c in result.commands)


V1_WAIT_OP = "slurmd enabled (it starts at the boot with cgroup v1)"
V1_REASON = ("kernel arguments for cgroup v1 added (boot loader updated): slurmd's cgroup/v1 "
             "plugin needs them")


@pytest.mark.parametrize("distro", DISTROS)
def test_slurm_21_08_boots_cgroup_v1_through_the_one_kernel_argument_drop_in(distro):
    """Ubuntu 22.04's Slurm 21.08 has only cgroup/v1 and the release boots cgroup v2: each
    worker gets systemd.unified_cgroup_hierarchy=0 in the GRUB drop-in the vfio and rdma roles
    share, a reboot marker, and slurmd enabled but not started (it would fail on v2); the head
    (no slurmd running there) and the other distributions get none of it."""
    for name in WORKERS:
        result = plan_for(name, fresh_lab(distro))
        grub = [op for op in result.ops if "Kernel arguments for GRUB" in op.name]
        if distro != "ubuntu-22.04":
            assert not grub and not [op for op in result.ops if "reboot" in op.name.lower()]
            continue
        assert [op.name for op in grub] == [
            "slurm | Kernel arguments for GRUB: systemd.unified_cgroup_hierarchy=0"]
        assert uploaded(result, "Kernel arguments for GRUB") == file_text(grub_dropin(
            CGROUP_V1_ARGS, CGROUP_V1_WHY))
        assert result.op("Regenerate the GRUB configuration").commands == ("update-grub",)
        assert not [op for op in result.ops if op.name.endswith("| Run slurmd")]
        marker = result.op(f"Record that a reboot is needed: {V1_REASON}")
        assert marker.commands and "/run/gpuinfra/reboot-required" in marker.commands[0]
    head = plan_for(HEAD, fresh_lab(distro))
    assert not [op for op in head.ops if "Kernel arguments" in op.name]


def test_a_slurm_21_08_worker_booted_with_cgroup_v1_runs_slurmd():
    """After the reboot (cgroup v1 mounted, the drop-in in place): slurmd runs, no marker."""
    facts = fresh_lab("ubuntu-22.04")
    for name in WORKERS:
        facts[name]["gpuinfra_deploy.facts.kernel.CgroupHierarchy"] = "v1"
    result = plan_for(WORKERS[0], facts)
    assert result.op("Run slurmd").commands == ("systemctl start slurmd.service",
                                                "systemctl enable slurmd.service")
    assert not [op for op in result.ops if op.name.endswith(V1_WAIT_OP)]


@pytest.mark.parametrize("distro", DISTROS)
def test_cgroup_conf_follows_the_distribution(distro):
    text = staged(plan_for(HEAD, fresh_lab(distro)))[CGROUP_CONF]
    plugin = "cgroup/v1" if distro == "ubuntu-22.04" else "autodetect"
    assert f"CgroupPlugin={plugin}" in lines(text)
    assert "ConstrainDevices=yes" in lines(text)


# ----------------------------------------------------------------------------- what is staged

@pytest.mark.parametrize("distro", DISTROS)
def test_the_head_stages_the_library_rendering_of_every_workers_facts(distro):
    assert staged(plan_for(HEAD, fresh_lab(distro))) == expected_files(distro)


@pytest.mark.parametrize("distro", DISTROS)
def test_each_worker_judges_the_same_set_the_head_stages(distro):
    both = plan_all(fresh_lab(distro))
    expected = expected_files(distro)
    assert staged(both.plans[HEAD]) == expected
    for name in WORKERS:
        assert staged(both.plans[name], JUDGE_OP) == expected, name


def test_slurm_conf_describes_each_worker():
    conf = lines(staged(plan_for(HEAD, fresh_lab("debian-12")))[SLURM_CONF])
    assert "SlurmctldHost=lab-head(10.0.0.10)" in conf and "GresTypes=gpu" in conf
    # Configless: slurmctld serves the files (the role's own value, nothing of the site's).
    assert "SlurmctldParameters=enable_configless" in conf
    # slurmd -C on the lab VM: CPUs=2 ... RealMemory=24105, less the 2 % reserve.
    assert ("NodeName=lab-worker1 NodeAddr=10.0.0.11 CPUs=2 Sockets=1 CoresPerSocket=2 "
            "ThreadsPerCore=1 RealMemory=23622 Gres=gpu:h100-sxm5-80gb:8 "
            "Features=h100,h100-sxm5-80gb,gpus8,nvswitch Weight=641 State=UNKNOWN") in conf
    assert ("NodeName=lab-worker2 NodeAddr=10.0.0.12 CPUs=2 Sockets=1 CoresPerSocket=2 "
            "ThreadsPerCore=1 RealMemory=23622 Gres=gpu:h100-pcie-80gb:2 "
            "Features=h100,h100-pcie-80gb,gpus2,nvlink Weight=161 State=UNKNOWN") in conf
    # DefMemPerGPU: lab-worker1's 23622 MiB over its 8 GPUs, the partition's smallest share
    assert ("PartitionName=gpu Nodes=lab-worker1,lab-worker2 MaxTime=INFINITE State=UP "
            "Default=YES DefMemPerGPU=2952") in conf


def test_each_worker_is_described_from_its_own_facts():
    facts_of = fresh_lab("debian-12")
    facts_of[WORKER2]["gpuinfra_deploy.facts.system.MemTotalMb"] = 515703
    facts_of[WORKER2]["gpuinfra_deploy.facts.system.CpuLayout"] = parse_lscpu(
        (CAPTURES / "lscpu-p-hgx-2x48c-SYNTHESIZED.txt").read_text()).to_json()
    for name in (HEAD, WORKER1):  # the head, and a worker judging the set
        files = staged(plan_for(name, facts_of), CONFIG_OP if name == HEAD else JUDGE_OP)
        conf = lines(files[SLURM_CONF])
        assert BIG_WORKER2 in conf
        assert any(line.startswith("NodeName=lab-worker1 ") and " CPUs=2 " in line
                   for line in conf)


def test_every_workers_facts_are_asked_for():
    facts_of = fresh_lab("debian-12")
    del facts_of[WORKER2]["gpuinfra_deploy.facts.system.MemTotalMb"]
    with pytest.raises(MissingFact, match="lab-worker2: fixture lacks fact .*MemTotal"):
        plan_for(HEAD, facts_of)
    facts_of = fresh_lab("debian-12")
    del facts_of[WORKER2]["gpuinfra_deploy.facts.nvidia.NvidiaGpus"]  # gres.conf needs them
    with pytest.raises(MissingFact, match="lab-worker2: fixture lacks fact .*NvidiaGpus"):
        plan_for(HEAD, facts_of)


def test_a_worker_whose_lscpu_failed_registers_one_cpu_until_the_next_deploy():
    facts_of = fresh_lab("debian-12")
    # the fact's value when lscpu fails
    facts_of[WORKER2]["gpuinfra_deploy.facts.system.CpuLayout"] = {}
    conf = lines(staged(plan_for(HEAD, facts_of))[SLURM_CONF])
    assert ("NodeName=lab-worker2 NodeAddr=10.0.0.12 CPUs=1 Gres=gpu:h100-pcie-80gb:2 "
            "Features=h100,h100-pcie-80gb,gpus2,nvlink Weight=161 State=UNKNOWN") in conf


H100_SXM_LINKS = [",".join("-1" if j == i else "18" for j in range(8)) for i in range(8)]


def test_gres_conf_is_the_clusters_each_line_naming_its_node():
    gres = staged(plan_for(HEAD, fresh_lab("debian-12")))[GRES_CONF]
    assert lines(gres)[1].startswith("# gres.conf of cluster lab (gpuinfra_roles/slurm)")
    assert settings_lines(gres) == [
        *(f"NodeName=lab-worker1 Name=gpu Type=h100-sxm5-80gb File=/dev/nvidia{i} "
          f"Links={H100_SXM_LINKS[i]}" for i in range(8)),
        "NodeName=lab-worker2 Name=gpu Type=h100-pcie-80gb File=/dev/nvidia0 Links=-1,12",
        "NodeName=lab-worker2 Name=gpu Type=h100-pcie-80gb File=/dev/nvidia1 Links=12,-1"]
    # One commented section per worker; its notes in its own section. The 2-CPU VM cannot
    # hold the HGX affinity: Cores= is left out, and the file says why.
    worker1 = gres.split("\n# lab-worker1\n", 1)[1].split("\n# lab-worker2\n", 1)[0]
    assert any(line.startswith("# note: GPU0's CPU affinity (0-47,96-143)")
               for line in lines(worker1))
    assert "# note: device minors of GPU 0-7 not reported by the driver" in worker1
    worker2 = gres.split("\n# lab-worker2\n", 1)[1]
    assert "# note: device minors of GPU 0-1 not reported by the driver" in worker2
    assert "lab-worker1" not in worker2


def test_gres_conf_of_a_real_hgx_host_pins_gpus_to_their_numa_half():
    facts_of = fresh_lab("debian-12")
    facts_of[WORKER1]["gpuinfra_deploy.facts.system.CpuLayout"] = parse_lscpu(
        (CAPTURES / "lscpu-p-hgx-2x48c-SYNTHESIZED.txt").read_text()).to_json()
    facts_of[WORKER1]["gpuinfra_deploy.facts.nvidia.NvidiaDeviceMinors"] = {
        g["pci.bus_id"][-12:].lower(): int(g["index"]) for g in capture_gpus(WORKER1)}
    gres = staged(plan_for(HEAD, facts_of))[GRES_CONF]
    gpu_lines = [line for line in lines(gres) if line.startswith("NodeName=lab-worker1 ")]
    assert [line.split(" Cores=")[1].split()[0] for line in gpu_lines] == \
        ["0-47"] * 4 + ["48-95"] * 4
    assert gpu_lines[0] == ("NodeName=lab-worker1 Name=gpu Type=h100-sxm5-80gb "
                            "File=/dev/nvidia0 Cores=0-47 Links=-1,18,18,18,18,18,18,18")
    worker1 = gres.split("\n# lab-worker1\n", 1)[1].split("\n# lab-worker2\n", 1)[0]
    assert not any(line.startswith("# note:") for line in lines(worker1))


def test_the_head_checks_as_its_first_worker_on_a_copy_with_an_empty_gres_conf():
    """The head has none of the GPU device files gres.conf names: it judges slurm.conf and
    cgroup.conf as a worker, with an empty gres.conf beside them; each worker judges its own
    lines (test_each_worker_judges_the_set_as_itself)."""
    commands = plan_for(HEAD, fresh_lab("debian-12")).op(CONFIG_OP).commands
    assert check_command(STAGE_DIR, WORKER1, elsewhere=True) in commands
    assert not [c for c in commands if f"-N {WORKER2}" in c]


def test_the_head_checks_as_a_worker_whose_gpus_are_not_shared():
    # lab-worker1 shares its GPUs with MPS: Slurm cannot merge its GRES on the head (no
    # gres.conf lines there), so the head checks as lab-worker2, never as lab-worker1.
    data = {WORKER1: {"gpu_sharing": {"mode": "mps", "clients": 4}}}
    result = plan_for(HEAD, fresh_lab("debian-12"), data=data)
    commands = result.op(CONFIG_OP).commands
    assert check_command(STAGE_DIR, WORKER2, elsewhere=True) in commands
    assert not [c for c in commands if f"-N {WORKER1}" in c]
    assert "NodeName=lab-worker1 Name=mps Count=100 File=/dev/nvidia0" in lines(
        staged(result)[GRES_CONF])


def test_site_gpu_type_and_extra_settings_reach_the_files():
    data = {WORKER1: {"slurm_gpu_type": "h100"}}
    extra = {"MaxJobCount": 20000, "SlurmctldParameters": "idle_on_node_suspend"}
    for name, op in ((HEAD, CONFIG_OP), (WORKER1, JUDGE_OP)):
        files = staged(plan_for(name, fresh_lab("debian-12"), {"slurm_conf_extra": extra},
                                data), op)
        assert " Gres=gpu:h100:8 " in files[SLURM_CONF]
        assert "MaxJobCount=20000" in lines(files[SLURM_CONF])
        # the site's SlurmctldParameters are added to the role's, once
        assert [line for line in lines(files[SLURM_CONF])
                if line.startswith("SlurmctldParameters=")] == [
            "SlurmctldParameters=enable_configless,idle_on_node_suspend"]
        assert "NodeName=lab-worker1 Name=gpu Type=h100 File=/dev/nvidia0 " in files[GRES_CONF]


# ----------------------------------------------------------------------------- the head installs

@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_head_stages_then_lets_slurm_check_before_anything_goes_in(distro):
    op = plan_for(HEAD, fresh_lab(distro)).op(CONFIG_OP)
    commands = list(op.commands)
    # The head checks as its first worker whose GPUs are not shared, on a copy with an
    # empty gres.conf, dropping the one line Slurm prints there about the worker's GPU files.
    check = check_command(STAGE_DIR, WORKER1, elsewhere=True)
    assert f"-N {WORKER1}" in check and "gres.conf" in check.split("slurmd -G", 1)[0]
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


# ----------------------------------------------------------------------------- workers judge

@pytest.mark.parametrize("distro", DISTROS)
@pytest.mark.parametrize("name", WORKERS)
def test_each_worker_judges_the_set_as_itself_and_keeps_nothing(distro, name):
    """A worker stages the cluster's files, lets its own slurmd judge them as itself (its
    gres.conf lines against its GPU device files: not the head's empty-gres copy), removes
    the stage, and remembers what it accepted; it never installs them."""
    result = plan_for(name, fresh_lab(distro))
    op = result.op(JUDGE_OP)
    commands = list(op.commands)
    assert commands[0] == f"rm -rf {JUDGE_STAGE} && install -d -m 0700 {JUDGE_STAGE}"
    assert [(type(c), c.dest) for c in op.raw[1:4]] == [
        (FileUploadCommand, f"{JUDGE_STAGE}/{f}")
        for f in ("slurm.conf", "gres.conf", "cgroup.conf")]
    assert commands[4] == check_command(JUDGE_STAGE, name)
    assert f"slurmd -G -f {JUDGE_STAGE}/slurm.conf -N {name} " in commands[4]
    assert check_command(JUDGE_STAGE, name, elsewhere=True) != commands[4]
    assert '"$d/gres.conf"' not in commands[4]  # its own gres.conf lines, not an empty copy
    assert commands[5] == f"rm -rf {JUDGE_STAGE}"
    assert shlex.split(commands[6]) == ["printf", "%s", mark(expected_files(distro)), ">",
                                        CHECKED_MARK]
    assert len(commands) == 7
    # Nothing goes into /etc/slurm: no install op, no copy or move there.
    assert not [o for o in result.ops if CONFIG_OP in o.name]
    assert not [c for c in result.commands if (" mv " in f" {c} " or c.startswith("cp "))
                and "grub.d" not in c]  # Ubuntu 22.04: the cgroup v1 kernel argument


@pytest.mark.parametrize("distro", DISTROS)
@pytest.mark.parametrize("name", WORKERS)
def test_each_worker_fetches_its_configuration_from_the_head(distro, name):
    result = plan_for(name, fresh_lab(distro))
    assert uploaded(result, DROPIN_OP) == DROPIN_TEXT
    assert result.op(DROPIN_OP).commands[0] == "mkdir -p /etc/systemd/system/slurmd.service.d"
    assert any(c.startswith("FileUploadCommand(") and CONFIGLESS_DROPIN in c
               for c in result.op(DROPIN_OP).commands)
    assert result.op("systemd reads slurmd's drop-in").commands == ("systemctl daemon-reload",)
    # A fresh worker has no local copy: the absent ops have nothing to do.
    for path in CONF_FILES:
        assert result.op(f"{path} absent (the head serves it)").commands == ()
    order = [op.name for op in result.ops]
    start = V1_WAIT_OP if distro == "ubuntu-22.04" else "Run slurmd"
    assert order.index(f"slurm | {DROPIN_OP}") < order.index(f"slurm | {start}")


def test_a_worker_of_the_per_node_design_loses_its_copies_and_restarts_on_the_drop_in():
    """A worker set up before configless: its own slurm.conf, gres.conf and cgroup.conf, slurmd
    running without the drop-in. The copies go, slurmd is restarted to fetch the head's."""
    facts_of = converged_lab("debian-12")
    worker = facts_of[WORKER1]
    del worker["files.Sha1File"][f"path={CONFIGLESS_DROPIN}"]
    worker["files.File"] = {**worker["files.File"],
                            **{f"path={p}": {"mode": 644, "size": 100, "user": "root",
                                             "group": "root"} for p in CONF_FILES}}
    worker["files.File"].pop(f"path={CONFIGLESS_DROPIN}")
    result = plan_for(WORKER1, facts_of)
    assert changing(result) == [
        DROPIN_OP, "systemd reads slurmd's drop-in",
        *(f"{path} absent (the head serves it)" for path in CONF_FILES),
        RESTART_SLURMD]
    for path in CONF_FILES:
        assert result.op(f"{path} absent").commands == (f"rm -f {path}",)
    assert result.op(RESTART_SLURMD).commands == ("systemctl restart slurmd.service",)


def test_the_workers_judge_before_the_head_installs_and_slurmd_starts_after_slurmctld():
    both = plan_all(fresh_lab("debian-12"))
    install = both.position(HEAD, CONFIG_OP)
    for name in WORKERS:
        assert both.position(name, JUDGE_OP) < install
        assert both.position(HEAD, "Run slurmctld") < both.position(name, "Run slurmd")
    assert install < both.position(HEAD, "Run slurmctld")


# ----------------------------------------------------------------------------- converged

@pytest.mark.parametrize("distro", DISTROS)
def test_converged_cluster_plans_no_command(distro):
    both = plan_all(converged_lab(distro))
    for name, result in both.plans.items():
        assert result.commands == [], (name, result.changing)
    for name in WORKERS:  # a worker asks nothing more of its slurmd than it did
        assert both.plans[name].op(JUDGE_OP).commands == ()


@pytest.mark.parametrize("distro", DISTROS)
def test_a_worker_judges_again_when_the_set_changed_since_it_accepted_one(distro):
    facts_of = converged_lab(distro)
    facts_of[WORKER2]["files.Sha256File"][f"path={CHECKED_MARK}"] = "0" * 64
    result = plan_for(WORKER2, facts_of)
    assert changing(result) == [JUDGE_OP]
    assert staged(result, JUDGE_OP) == expected_files(distro)


def test_a_hand_edited_gres_conf_on_the_head_is_checked_as_a_set_and_only_it_goes_in():
    """Someone removed lab-worker2's lines from the head's gres.conf: the role puts the file
    back (checked with the other two), and since gres.conf changed every daemon takes it:
    slurmctld restarted, `scontrol reconfigure`, each slurmd restarted."""
    facts_of = converged_lab("debian-12")
    files = expected_files("debian-12")
    edited = "\n".join(line for line in lines(files[GRES_CONF])
                       if not line.startswith("NodeName=lab-worker2 ")) + "\n"
    head_runs(facts_of[HEAD], {**files, GRES_CONF: edited})
    both = plan_all(facts_of)
    head = both.plans[HEAD]
    assert changing(head) == [CONFIG_OP, f"{RESTART_CTLD} (gres.conf changed)",
                              RECONFIGURE]
    commands = head.op(CONFIG_OP).commands
    assert sum(c.startswith("FileUploadCommand(") for c in commands) == 3  # checked as a set
    assert [c.split(" && ")[-1] for c in commands if c.startswith("cp ")] == [
        f"mv -f {GRES_CONF}.gpuinfra-new {GRES_CONF}"]  # only the changed file goes in
    assert head.op(RESTART_CTLD).commands == ("systemctl restart slurmctld.service",)
    assert head.op(RECONFIGURE).commands == (reconfigure_script(),)
    for name in WORKERS:  # they accepted this set before: no new judgement, a restart
        assert changing(both.plans[name]) == [f"{RESTART_SLURMD} (gres.conf changed)"]


def test_a_workers_new_hardware_restarts_every_daemon():
    """slurm.conf(5): changes in node configuration need slurmctld and every slurmd
    restarted."""
    facts_of = converged_lab("ubuntu-24.04")
    facts_of[WORKER2]["gpuinfra_deploy.facts.system.MemTotalMb"] = 48000  # worker2 got more memory
    both = plan_all(facts_of)
    head = both.plans[HEAD]
    why = "node definitions changed: lab-worker2"
    assert changing(head) == [CONFIG_OP, f"{RESTART_CTLD} ({why})",
                              RECONFIGURE]
    assert head.op("Restart slurmctld").commands == ("systemctl restart slurmctld.service",)
    assert "RealMemory=47040" in staged(head)[SLURM_CONF]
    for name in WORKERS:  # each judges the new set, then restarts after the controller
        assert changing(both.plans[name]) == [
            JUDGE_OP,
            f"{RESTART_SLURMD} ({why})"]
        assert both.position(name, JUDGE_OP) < both.position(HEAD, CONFIG_OP)
        assert both.position(HEAD, RECONFIGURE) < both.position(name, RESTART_SLURMD)
    assert both.position(HEAD, RESTART_CTLD) < both.position(HEAD, RECONFIGURE)


@pytest.mark.parametrize("distro", DISTROS)
def test_restarts_only_when_the_configuration_changes(distro):
    facts_of = converged_lab(distro)
    assert plan_for(HEAD, facts_of).op(RESTART_CTLD).commands == ()
    assert plan_for(WORKER2, facts_of).op(RESTART_SLURMD).commands == ()
    # cgroup.conf edited by hand on the head: it goes back, and every slurmd fetches it
    # (cgroup.conf(5): changes take effect on `scontrol reconfigure`); nothing restarts
    facts_of[HEAD]["files.Sha256File"][f"path={CGROUP_CONF}"] = "0" * 64
    both = plan_all(facts_of)
    assert changing(both.plans[HEAD]) == [CONFIG_OP, RECONFIGURE]
    assert both.plans[HEAD].op(RECONFIGURE).commands == (reconfigure_script(),)
    for name in WORKERS:
        assert both.plans[name].commands == []


def test_files_that_differ_only_in_comments_are_fetched_again_by_every_slurmd():
    """A head whose gres.conf carries a note this release no longer writes (an earlier
    release wrote "not reached" notes there after a --limit run); the next full run takes the
    note out. The lines are the same (nothing for slurmctld to re-read), but each slurmd must
    run the head's files byte for byte (gpuinfra_verify test_node_runs_the_heads_configuration):
    reconfigure."""
    facts_of = converged_lab("debian-12")
    files = expected_files("debian-12")
    noted = files[GRES_CONF].replace(
        "\n# lab-worker2\n", "\n# lab-worker2\n# note: not reached in this run: its lines are "
        "kept from the head's gres.conf\n")
    assert noted != files[GRES_CONF]
    head_runs(facts_of[HEAD], {**files, GRES_CONF: noted})
    head = plan_all(facts_of).plans[HEAD]
    assert changing(head) == [CONFIG_OP, RECONFIGURE]
    assert [c.split(" && ")[-1] for c in head.op(CONFIG_OP).commands if c.startswith("cp ")] \
        == [f"mv -f {GRES_CONF}.gpuinfra-new {GRES_CONF}"]


@pytest.mark.parametrize("name", [HEAD, WORKER1])
def test_a_first_start_is_not_followed_by_a_restart(name):
    """A daemon this run starts reads the new files: restarting it a second later only
    costs a wait (and slurmd restarted before slurmctld exists waits the longest)."""
    result = plan_for(name, fresh_lab("debian-12"))
    daemon = "slurmctld" if name == HEAD else "slurmd"
    assert f"systemctl start {daemon}.service" in result.op(f"Run {daemon}").commands
    assert result.op(f"Restart {daemon}").commands == ()
    assert result.op(RECONFIGURE).commands == ()


def test_fresh_head_disables_the_slurmd_its_package_enables():
    result = plan_for(HEAD, fresh_lab("debian-12"))
    assert any("slurmd" in c and "disable" in c for c in result.commands)


# ----------------------------------------------------------------------------- how daemons take it

@pytest.mark.parametrize("distro", DISTROS)
def test_a_reconfigurable_key_is_taken_by_scontrol_reconfigure_without_a_restart(distro):
    """MinJobAge: slurm.conf(5) notes no restart for it, so `scontrol reconfigure` (slurmctld
    re-reads, each slurmd fetches the files); no daemon restarts, no running job notices."""
    facts_of = converged_lab(distro)
    both = plan_all(facts_of, {"slurm_conf_extra": {"MinJobAge": 600}})
    head = both.plans[HEAD]
    assert changing(head) == [CONFIG_OP, RECONFIGURE]
    assert [c.split(" && ")[-1] for c in head.op(CONFIG_OP).commands if c.startswith("cp ")] \
        == [f"mv -f {SLURM_CONF}.gpuinfra-new {SLURM_CONF}"]
    assert "MinJobAge=600" in lines(staged(head)[SLURM_CONF])
    assert head.op(RESTART_CTLD).commands == ()
    assert head.op(RECONFIGURE).commands == (reconfigure_script(),)
    for name in WORKERS:
        assert changing(both.plans[name]) == [
            JUDGE_OP]
        assert both.plans[name].op(RESTART_SLURMD).commands == ()


def test_max_job_count_restarts_slurmctld_and_no_slurmd():
    """MaxJobCount: slurm.conf(5) 22.05, 'a restart of slurmctld is required'."""
    both = plan_all(converged_lab("debian-12"), {"slurm_conf_extra": {"MaxJobCount": 20000}})
    head = both.plans[HEAD]
    assert changing(head) == [CONFIG_OP, f"{RESTART_CTLD} (maxjobcount changed)",
                              RECONFIGURE]
    assert head.op(RESTART_CTLD).commands == ("systemctl restart slurmctld.service",)
    for name in WORKERS:
        assert both.plans[name].op(RESTART_SLURMD).commands == ()


def test_a_new_worker_restarts_slurmctld_and_every_running_slurmd():
    """A cluster of lab-worker1 gets lab-worker2 (slurm.conf(5), NODE CONFIGURATION: adding
    nodes needs slurmctld and the slurmd daemons restarted): the running slurmd restarts,
    the new one starts on the new files."""
    old = expected_files("debian-12", workers=(WORKER1,))
    facts_of = converged_lab("debian-12")
    head_runs(facts_of[HEAD], old)
    judged(facts_of[WORKER1], old)
    facts_of[WORKER2] = fresh("debian-12", WORKER2)
    both = plan_all(facts_of)
    why = "nodes added or removed: lab-worker2"
    head = both.plans[HEAD]
    assert changing(head) == [CONFIG_OP, f"{RESTART_CTLD} ({why})",
                              RECONFIGURE]
    assert [c.split(" && ")[-1] for c in head.op(CONFIG_OP).commands if c.startswith("cp ")] \
        == [f"mv -f {p}.gpuinfra-new {p}" for p in (SLURM_CONF, GRES_CONF)]
    assert both.plans[WORKER1].op(RESTART_SLURMD).commands == (
        "systemctl restart slurmd.service",)
    assert both.plans[WORKER2].op(RESTART_SLURMD).commands == ()  # it starts on them
    assert "systemctl start slurmd.service" in both.plans[WORKER2].op("Run slurmd").commands
    assert both.position(HEAD, RECONFIGURE) < both.position(WORKER1, RESTART_SLURMD)
    assert both.position(HEAD, RECONFIGURE) < both.position(WORKER2, "Run slurmd")


# ----------------------------------------------------------------------------- what the run reaches

BIG_WORKER2_NOTE = "# note: written by an earlier deploy, kept as it is"


def running_with_big_worker2(distro: str) -> dict[str, str]:
    """The head's running files, where lab-worker2 (deployed earlier) is a 2-socket HGX whose
    GPUs have Cores=: lines (and a note) this run cannot compute for it (it is not reached)."""
    files = expected_files(distro)
    computed = next(line for line in lines(files[SLURM_CONF])
                    if line.startswith("NodeName=lab-worker2 "))
    before, _ = files[GRES_CONF].split("\n# lab-worker2\n", 1)
    return {**files, SLURM_CONF: files[SLURM_CONF].replace(computed, BIG_WORKER2),
            GRES_CONF: "\n".join([before, "# lab-worker2", BIG_WORKER2_NOTE,
                                  *BIG_WORKER2_GRES]) + "\n"}


def worker1_links_dropped(gres: str) -> str:
    """gres.conf as it was before lab-worker1's driver was loaded: its lines without Links=."""
    return "\n".join(line.split(" Links=")[0] if line.startswith("NodeName=lab-worker1 ")
                     else line for line in gres.split("\n"))


@pytest.mark.parametrize("distro", DISTROS)
@pytest.mark.parametrize("down", [False, True], ids=["left-out", "down"])
def test_a_worker_not_reached_keeps_its_lines_from_the_heads_running_files(distro, down,
                                                                           caplog):
    """lab-worker2 is left out by --limit, or down (pyinfra fails it at connect): the head
    still writes the cluster's files (lab-worker1's lines changed), lab-worker2's part kept
    from its running ones byte for byte, notes too. A worker that judged nothing in this run
    does not hold the head's files back."""
    facts_of = converged_lab(distro)
    running_files = running_with_big_worker2(distro)
    running_files[GRES_CONF] = worker1_links_dropped(running_files[GRES_CONF])
    head_runs(facts_of[HEAD], running_files)
    with not_reached(WORKER2, down=down), caplog.at_level(logging.WARNING):
        head = plan_all(facts_of, targets=(HEAD, WORKER1)).plans[HEAD]
    assert head.op(CONFIG_OP).commands, "the head did not write its files"
    files = staged(head)
    conf = lines(files[SLURM_CONF])
    assert BIG_WORKER2 in conf
    assert not [line for line in conf if " CPUs=1 " in line]
    gres = files[GRES_CONF]
    assert gres != running_files[GRES_CONF]
    assert gres.split("\n# lab-worker2\n", 1)[1] == \
        running_files[GRES_CONF].split("\n# lab-worker2\n", 1)[1]
    assert lines(gres.split("\n# lab-worker2\n", 1)[1]) == [BIG_WORKER2_NOTE, *BIG_WORKER2_GRES]
    warned = slurm_warnings(caplog)
    assert "lab-worker2: not reached in this run: its line is kept" in warned
    assert "lab-worker2: not reached in this run: its lines are kept from the head's gres.conf" \
        in warned
    # lab-worker1's lines changed: Slurm 22.05 restarts for a gres.conf change; the slurmd
    # this run does not reach is named with the command to run there.
    assert "not in this run: lab-worker2: `systemctl restart slurmd` there" in warned


@pytest.mark.parametrize("distro", DISTROS)
def test_a_limited_run_then_a_full_run_leave_the_heads_files_as_they_are(distro, caplog):
    """The gap bench.fleet found (issue 26): `--limit lab-head --limit lab-worker1` wrote
    "not reached" notes into lab-worker2's gres.conf section and the next full run took them
    out again, so each such pair told every slurmd to fetch gres.conf anew. Now the section of
    a node not reached is kept as the head has it and the reason is said in the output only:
    on a converged cluster both runs leave every file as it is and reconfigure nothing."""
    facts_of = converged_lab(distro)
    head_runs(facts_of[HEAD], running_with_big_worker2(distro))
    with not_reached(WORKER2), caplog.at_level(logging.WARNING):
        limited = plan_all(facts_of, targets=(HEAD, WORKER1)).plans[HEAD]
    assert "lab-worker2: not reached in this run" in slurm_warnings(caplog)
    assert limited.op(CONFIG_OP).commands == ()
    assert limited.op(RECONFIGURE).commands == ()
    assert limited.op(RESTART_CTLD).commands == ()
    head_runs(facts_of[HEAD], expected_files(distro))
    full = plan_all(facts_of)
    assert changing(full.plans[HEAD]) == []
    with not_reached(WORKER2):
        again = plan_all(facts_of, targets=(HEAD, WORKER1)).plans[HEAD]
    assert changing(again) == []


def test_a_worker_never_deployed_and_not_reached_gets_the_placeholder_with_its_note(caplog):
    facts_of = fresh_lab("debian-12")
    with not_reached(WORKER2), caplog.at_level(logging.WARNING):
        head = plan_all(facts_of, targets=(HEAD, WORKER1)).plans[HEAD]
    files = staged(head)
    assert ("NodeName=lab-worker2 NodeAddr=10.0.0.12 CPUs=1 Gres=gpu:h100-pcie-80gb:2 "
            "Features=h100,h100-pcie-80gb,gpus2,nvlink Weight=161 State=UNKNOWN") \
        in lines(files[SLURM_CONF])
    # Its section is empty: the reason is in the run's output, not in the file.
    assert files[GRES_CONF].split("\n# lab-worker2\n", 1)[1].strip() == ""
    warned = slurm_warnings(caplog)
    assert "lab-worker2: not reached in this run, and the head's gres.conf has no lines" \
        in warned
    assert "lab-worker2: hardware unknown" in warned


def test_the_head_not_in_the_run_is_said_and_nothing_of_the_heads_is_planned(caplog):
    """`--limit lab-worker1`: the worker judges and fetches, the head's files stay as they
    are (the run says how to write them); no controller operation acts."""
    with not_reached(HEAD), caplog.at_level(logging.WARNING):
        result = plan_all(converged_lab("debian-12"), {"slurm_conf_extra": {"MinJobAge": 600}},
                          targets=(WORKER1,)).plans[WORKER1]
    assert ("slurm: the head (lab-head) is not in this run: the cluster's slurm.conf and "
            "gres.conf live there and were not changed") in slurm_warnings(caplog)
    assert "--limit lab-head --limit lab-worker1" in slurm_warnings(caplog)
    assert not [op for op in result.ops if CONFIG_OP in op.name]
    assert result.op(RESTART_CTLD).commands == () and result.op(RECONFIGURE).commands == ()
    assert not any("slurmctld" in c or "scontrol" in c for c in result.commands)
    # It still judges the set (with the setting) and never installs it.
    assert changing(result) == [JUDGE_OP]
    assert "MinJobAge=600" in lines(staged(result, JUDGE_OP)[SLURM_CONF])


@pytest.mark.parametrize("distro", DISTROS)
def test_a_worker_failing_in_this_run_keeps_the_heads_files_as_they_are(distro, caplog):
    """A worker whose slurmd refused the set (or that failed otherwise) fails in this run: at
    execution the head's install op finds it failed (its _if) and changes nothing, so no
    daemon takes the new files; the run says why."""
    facts_of = converged_lab(distro)
    cluster = {"slurm_conf_extra": {"MinJobAge": 600}}
    with caplog.at_level(logging.WARNING):
        both = plan_all(facts_of, cluster, failed=(WORKER2,))
    head = both.plans[HEAD]
    assert head.op(CONFIG_OP).commands == ()
    assert head.op(RECONFIGURE).commands == () and head.op(RESTART_CTLD).commands == ()
    assert ("the head's slurm.conf and gres.conf were left as they are: lab-worker2 failed in "
            "this run") in slurm_warnings(caplog)
    # without the failure, the same run installs slurm.conf and reconfigures
    again = plan_all(facts_of, cluster).plans[HEAD]
    assert changing(again) == [CONFIG_OP, RECONFIGURE]


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
        staged(result, JUDGE_OP)[SLURM_CONF])  # the worker judges the head's slurm.conf


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_head_with_accounting_plans_no_command(distro):
    facts_of = converged_lab(distro, accounting=True)
    head = facts_of[HEAD]
    dbd = role_file("slurm", SLURMDBD_CONF, cluster_name="lab", controller=HEAD,
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
    head[ASSOCIATIONS] = {"answering": True, "rows": [["lab", "root", ""], ["lab", "root", "root"]]}
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
    assert installed(result) == "slurmd slurm-client libpmix-dev slurm-wlm-nvml-plugin"
    files = staged(result, JUDGE_OP)
    assert "NodeName=lab-worker1 AutoDetect=nvml" in lines(files[GRES_CONF])
    assert files == staged(plan_for(HEAD, fresh_lab(distro), data={WORKER1: MIG}))
    assert " Gres=gpu:3g.40gb:16 " in files[SLURM_CONF]
    assert installed(plan_for(WORKER2, fresh_lab(distro), data={WORKER1: MIG})) == \
        "slurmd slurm-client libpmix-dev"  # the other worker has no MIG


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


# ----------------------------------------------------------------------------- a node leaves

WORKER3 = ("NodeName=lab-worker3 NodeAddr=10.0.0.13 CPUs=2 Sockets=1 CoresPerSocket=2 "
           "ThreadsPerCore=1 RealMemory=23622 Gres=gpu:h100-pcie-80gb:2 "
           "Features=h100,h100-pcie-80gb,gpus2,nvlink Weight=161 State=UNKNOWN")
LEAVING = "Nodes leaving Slurm are drained and idle"


def test_a_node_leaving_the_inventory_is_checked_drained_and_idle_before_the_files_change():
    """lab-worker3 is in the head's running slurm.conf but no longer in the inventory: the
    head first refuses unless Slurm has it drained and idle (docs/day2.md), then writes
    the files without it, which restarts every daemon (nodes removed)."""
    facts_of = converged_lab("debian-12")
    files = expected_files("debian-12")
    worker2 = next(line for line in lines(files[SLURM_CONF])
                   if line.startswith("NodeName=lab-worker2 "))
    head_runs(facts_of[HEAD], {**files,
                               SLURM_CONF: files[SLURM_CONF].replace(worker2,
                                                                     f"{worker2}\n{WORKER3}")})
    both = plan_all(facts_of)
    head = both.plans[HEAD]
    why = "nodes added or removed: lab-worker3"
    assert changing(head) == [f"{LEAVING}: lab-worker3", CONFIG_OP, f"{RESTART_CTLD} ({why})",
                              RECONFIGURE]
    assert head.op(LEAVING).commands == (removal_guard(["lab-worker3"]),)
    assert "lab-worker3" not in staged(head)[SLURM_CONF]
    for name in WORKERS:
        assert both.plans[name].op(RESTART_SLURMD).commands == (
            "systemctl restart slurmd.service",)
    # a converged cluster has no node leaving: no such operation at all
    assert not [op for op in plan_for(HEAD, converged_lab("debian-12")).ops
                if LEAVING in op.name]


@pytest.mark.parametrize("jobs,state,refused", [
    ("", "drained", None),
    ("", "down", None),
    ("", "idle", "jobs running: none; not drained: lab-worker3"),
    ("4242", "draining", "jobs running: 4242; not drained: none"),
])
def test_the_removal_guard_passes_only_a_drained_idle_node(tmp_path, jobs, state, refused):
    """removal_guard's shell against a stand-in squeue and sinfo (their -h output)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(f"#!/bin/sh\nprintf '%s' '{jobs}'\n"
                                    f"[ -n '{jobs}' ] && echo\nexit 0\n")
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\necho 'lab-worker3 {state}'\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    done = subprocess.run(["sh", "-c", removal_guard(["lab-worker3"])],
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=30)
    if refused is None:
        assert done.returncode == 0 and done.stderr == "", done.stderr
    else:
        assert done.returncode == 1
        assert lines(done.stderr)[0] == refused
        assert "scontrol update nodename=lab-worker3 state=drain" in done.stderr
        assert "nothing was changed" in done.stderr


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
    """If this fails, a fact's process() changed: regenerate the slurm-lab-* fact sets
    from the captures named in their _comment."""
    layout = CpuLayout().process(
        (CAPTURES / "lscpu-p-lab-worker-2cpu.txt").read_text().split("\n"))
    memory = MemTotalMb().process(
        (CAPTURES / "meminfo-lab-worker-memtotal.txt").read_text().split("\n"))
    for name in (WORKER1, WORKER2):
        facts = json.loads(fact_file(f"slurm-lab-{name.removeprefix('lab-')}").read_text())
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


def test_nodes_needing_different_cgroup_conf_files_are_refused():
    """Configless serves the head's one cgroup.conf: a worker on Ubuntu 22.04 (Slurm 21.08,
    cgroup/v1 only) beside Debian 12 nodes (autodetect) cannot share it; every Slurm node on one
    cgroup plugin passes (an Ubuntu 24.04 head, Slurm 23.11, over Debian 12's 22.05: a mix
    Slurm runs, gpuinfra.slurm.mixed)."""
    mixed = {HEAD: fresh("debian-12", HEAD), WORKER1: fresh("ubuntu-22.04", WORKER1),
             WORKER2: fresh("debian-12", WORKER2)}
    with pytest.raises(GpuinfraError, match=r"CgroupPlugin=autodetect: lab-head \(debian-12\), "
                                            r"lab-worker2 \(debian-12\); CgroupPlugin=cgroup/v1: "
                                            r"lab-worker1 \(ubuntu-22.04\)"):
        plan_for(HEAD, mixed)
    agreeing = {HEAD: fresh("ubuntu-24.04", HEAD), WORKER1: fresh("debian-12", WORKER1),
                WORKER2: fresh("ubuntu-24.04", WORKER2)}
    assert staged(plan_for(HEAD, agreeing))[CGROUP_CONF]


SHARD = {"gpu_sharing": {"mode": "time-slicing", "replicas": 4}}


def test_what_a_slurm_version_cannot_read_is_refused():
    """Knowledge audit e4dd2f2 rows 1-2: shard GRES (time-slicing) arrived in Slurm 22.05 and
    HealthCheckNodeState=NONDRAINED_IDLE in 23.02 (SchedMD's changelogs): on Ubuntu 22.04's
    21.08 a shard node is refused, on Debian 12's 22.05 NONDRAINED_IDLE is; newer pass."""
    with pytest.raises(GpuinfraError, match=r"lab-worker1 \(ubuntu-22.04, Slurm 21.08\): "
                                            r"gpu_sharing mode 'time-slicing'"):
        plan_for(HEAD, fresh_lab("ubuntu-22.04"), data={WORKER1: SHARD})
    assert staged(plan_for(HEAD, fresh_lab("debian-12"), data={WORKER1: SHARD}))[GRES_CONF]
    idle = {"health_enabled": True, "health_check_node_state": "NONDRAINED_IDLE"}
    everyone = {name: idle for name in ALL}
    with pytest.raises(GpuinfraError, match=r"NONDRAINED_IDLE was added in Slurm 23.02 .* "
                                            r"runs Slurm 22.05"):
        plan_for(HEAD, fresh_lab("debian-12"), data=everyone)
    assert staged(plan_for(HEAD, fresh_lab("ubuntu-24.04"), data=everyone))[SLURM_CONF]


# ----------------------------------------------------------------------------- production keys

PRODUCTION_PARTITIONS = [
    {"name": "gpu", "nodes": list(WORKERS), "default": True, "max_time": "2-00:00:00",
     "default_time": "1:00:00", "allow_groups": ["gpu-users"], "priority_tier": 10},
    {"name": "short", "nodes": [WORKER2], "max_time": 30, "oversubscribe": "NO",
     "def_mem_per_gpu": 4096},
]


@pytest.mark.parametrize("distro", DISTROS)
def test_the_head_stages_the_production_keys_from_the_spec_and_the_workers_facts(distro):
    """Debian 12, Ubuntu 22.04 and 24.04: the partitions' Slurm settings as the spec says,
    DefMemPerGPU from the workers' recorded memory (RealMemory 23622 MiB, less the 2 % reserve,
    over lab-worker1's 8 GPUs), MpiDefault=pmix with libpmix-dev installed beside slurmd, and
    PrologFlags=Contain."""
    cluster = {"slurm_partitions": PRODUCTION_PARTITIONS}
    head = plan_for(HEAD, fresh_lab(distro), cluster)
    conf = lines(staged(head)[SLURM_CONF])
    assert ("PartitionName=gpu Nodes=lab-worker1,lab-worker2 MaxTime=2-00:00:00 "
            "DefaultTime=1:00:00 State=UP Default=YES AllowGroups=gpu-users PriorityTier=10 "
            "DefMemPerGPU=2952") in conf
    # lab-worker2 alone: 2 CPUs for its 2 GPUs, so DefCpuPerGPU=1 there
    assert ("PartitionName=short Nodes=lab-worker2 MaxTime=30 State=UP OverSubscribe=NO "
            "DefMemPerGPU=4096 DefCpuPerGPU=1") in conf
    assert "MpiDefault=pmix" in conf and "PrologFlags=Contain" in conf
    assert "libpmix-dev" in installed(head).split()
    for name in WORKERS:  # each worker judges the same file with its slurmd
        judged_conf = staged(plan_for(name, fresh_lab(distro), cluster), JUDGE_OP)[SLURM_CONF]
        assert judged_conf == staged(head)[SLURM_CONF]


@pytest.mark.parametrize("distro", DISTROS)
def test_the_sites_per_gpu_defaults_replace_the_computed_ones(distro):
    data = {n: {"slurm_def_mem_per_gpu": 8000, "slurm_def_cpu_per_gpu": 1} for n in ALL}
    conf = lines(staged(plan_for(HEAD, fresh_lab(distro), data=data))[SLURM_CONF])
    assert ("PartitionName=gpu Nodes=lab-worker1,lab-worker2 MaxTime=INFINITE State=UP "
            "Default=YES DefMemPerGPU=8000 DefCpuPerGPU=1") in conf


def test_the_lab_partition_without_def_cpu_per_gpu_is_said_at_deploy(caplog):
    """The lab's workers have 2 CPUs for 8 GPUs: DefCpuPerGPU is left out, and the run says
    why (a warning on the head)."""
    with caplog.at_level(logging.WARNING):
        plan_for(HEAD, fresh_lab("debian-12"))
    assert "partition gpu: DefCpuPerGPU left out: lab-worker1 has fewer CPUs than GPUs" \
        in slurm_warnings(caplog)


def test_a_bad_partition_value_stops_the_run_before_any_operation():
    parts = [{"name": "gpu", "nodes": list(WORKERS), "max_time": "two days"}]
    with pytest.raises(PyinfraError, match=r"slurm_partitions\[0\]\['max_time'\] = 'two days'"):
        plan_for(HEAD, fresh_lab("debian-12"), {"slurm_partitions": parts})


@pytest.mark.parametrize("distro", DISTROS)
def test_a_converged_cluster_with_the_production_keys_plans_nothing(distro):
    cluster = {"slurm_partitions": PRODUCTION_PARTITIONS}
    facts_of = converged_lab(distro)
    files = {**expected_files(distro)}
    files[SLURM_CONF] = staged(plan_for(HEAD, fresh_lab(distro), cluster))[SLURM_CONF]
    head_runs(facts_of[HEAD], files)
    for name in WORKERS:
        judged(facts_of[name], files)
    both = plan_all(facts_of, cluster)
    for name in ALL:
        assert both.plans[name].changing == [], name


# ----------------------------------------------------------------------------- associations

ASSOC_OP = "Accounting: the cluster, the site's accounts and users (sacctmgr)"
SITE_USERS = {"slurm_accounting": True, "slurm_accounts": ["ml", "vision"],
              "slurm_users": {"alice": "ml", "bob": "research"}}


@pytest.mark.parametrize("distro", DISTROS)
def test_accounting_adds_the_sites_accounts_and_users_after_slurmctld_runs(distro):
    result = plan_for(HEAD, fresh_lab(distro), SITE_USERS)
    (script,) = result.op(ASSOC_OP).commands
    assert script == sacctmgr_script("lab", ["ml", "vision"], {"alice": "ml", "bob": "research"})
    # each add only where the list does not show it; research made for bob; nothing removed
    assert "|| sacctmgr -i add account research cluster=lab" in script
    assert ("grep -qx alice || sacctmgr -i add user alice account=ml defaultaccount=ml "
            "cluster=lab") in script
    assert "delete" not in script and "modify" not in script
    order = [op.name for op in result.ops]
    assert order.index("slurm | Run slurmctld") < order.index(f"slurm | {ASSOC_OP}")


def test_associations_already_there_plan_nothing_and_one_missing_user_plans_the_script():
    facts_of = fresh_lab("debian-12")
    rows = [["lab", "root", ""], ["lab", "ml", ""], ["lab", "vision", ""],
            ["lab", "research", ""], ["lab", "ml", "alice"], ["lab", "research", "bob"]]
    facts_of[HEAD][ASSOCIATIONS] = {"answering": True, "rows": rows}
    assert plan_for(HEAD, facts_of, SITE_USERS).op(ASSOC_OP).commands == ()
    facts_of[HEAD][ASSOCIATIONS] = {"answering": True, "rows": rows[:-1]}
    assert plan_for(HEAD, facts_of, SITE_USERS).op(ASSOC_OP).commands != ()


def test_associations_are_the_heads_alone_and_only_with_accounting():
    assert not [op for op in plan_for(WORKER1, fresh_lab("debian-12"), SITE_USERS).ops
                if op.name.endswith(ASSOC_OP)]
    cluster = {**SITE_USERS, "slurm_accounting": False}
    assert not [op for op in plan_for(HEAD, fresh_lab("debian-12"), cluster).ops
                if op.name.endswith(ASSOC_OP)]


def test_a_bad_user_name_stops_the_run_before_any_operation():
    cluster = {**SITE_USERS, "slurm_users": {"Alice Smith": "ml"}}
    with pytest.raises(PyinfraError, match="slurm_users"):
        plan_for(HEAD, fresh_lab("debian-12"), cluster)


def test_slurm_associations_fact():
    fact = SlurmAssociations()
    assert fact.process(["#not-answering"]) == {"answering": False, "rows": []}
    assert fact.process(["lab|root|", "lab|root|root", "lab|ml|alice"]) == {
        "answering": True, "rows": [["lab", "root", ""], ["lab", "root", "root"],
                                    ["lab", "ml", "alice"]]}


# ----------------------------------------------------------------------------- the fabric

FABRIC = {"fabric_switches": {"leaf1": [WORKER1], "leaf2": [WORKER2],
                              "spine": ["leaf1", "leaf2"]}}


def test_a_fabric_stages_topology_conf_judged_by_slurmctld():
    """Issue 45 item 1: topology.conf beside slurm.conf (TopologyPlugin=topology/tree), and
    the head's check runs slurmctld on the staged copy (slurmd -G does not read it)."""
    head = plan_for(HEAD, fresh_lab("debian-12"), cluster=FABRIC)
    files = staged(head)
    assert settings_lines(files["/etc/slurm/topology.conf"]) == [
        "SwitchName=leaf1 Nodes=lab-worker1", "SwitchName=leaf2 Nodes=lab-worker2",
        "SwitchName=spine Switches=leaf1,leaf2"]
    assert "TopologyPlugin=topology/tree" in lines(files[SLURM_CONF])
    check = " ".join(head.op(CONFIG_OP).commands)
    assert "slurmctld -D -i -f" in check and "topology.conf" in check
    names = [op.name for op in head.ops]
    assert not any("topology.conf absent" in n for n in names)
    worker = plan_for(WORKER1, fresh_lab("debian-12"), cluster=FABRIC)
    assert "/etc/slurm/topology.conf" in staged(worker, JUDGE_OP)
    assert worker.op("/etc/slurm/topology.conf absent (the head serves it)")


def test_without_a_fabric_there_is_no_topology_conf():
    head = plan_for(HEAD, fresh_lab("debian-12"))
    files = staged(head)
    assert "/etc/slurm/topology.conf" not in files
    assert not any(line.startswith("TopologyPlugin") for line in lines(files[SLURM_CONF]))
    assert "slurmctld -D" not in " ".join(head.op(CONFIG_OP).commands)
    assert head.op("/etc/slurm/topology.conf absent (no fabric_switches, no fabric_blocks)")
