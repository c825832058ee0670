"""The node health check (gpuinfra/health, roles/health/program.py) on real captures.

The GPUs' outputs are the lab's replays of real captures, printed by the lab's nvidia-smi
stand-in (gpuinfra_lab/nvidia-smi, sources in each profile's manifest.json); XIDs are the real
kernel-log lines of tests/fixtures/kernel-log; row remapping the lent H100's own answer
(tests/fixtures/device). Each check is shown failing on a broken capture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuinfra.health import collect
from gpuinfra.health.collect import Output
from gpuinfra.health.expectation import (
    Expectation,
    ExpectationError,
    GpuExpectation,
    from_json,
)
from gpuinfra.health.judge import REASON_LIMIT, Verdict, job_verdict, judge
from gpuinfra.health.metrics import metrics_text
from gpuinfra.health.probes import GPUS, JOB_PROBES, REMAPPED
from gpuinfra.health.slurm import decide, decide_after_job, scontrol
from gpuinfra.parsers.slurm import SlurmNode
from gpuinfra.verdicts import Finding
from gpuinfra_node import reader
from tests.conftest import REPO

LAB = REPO / "gpuinfra_lab"
KERNEL = REPO / "tests" / "fixtures" / "kernel-log"
DEVICE = REPO / "tests" / "fixtures" / "device" / "h100-80gb-hbm3-vm-drv580.159.04"
sys.path.insert(0, str(REPO / "roles" / "health"))
import program  # noqa: E402  (the node program, as the role installs it)

BROKEN = Expectation("lab-worker3", "lab-worker3",
                     GpuExpectation("A100-PCIE-40GB", 2, "bridged-pairs"))
BRIDGED = Expectation("lab-worker2", "lab-worker2",
                      GpuExpectation("H100-PCIE-80GB", 2, "bridged-pairs"))
HGX = Expectation("lab-worker1", "lab-worker1",
                  GpuExpectation("H100-SXM5-80GB", 8, "nvswitch-all-to-all", fabric=True))


@pytest.fixture()
def replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Point the check's commands at the lab's stand-in replaying a profile's captures."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nexec {sys.executable} {LAB / 'nvidia-smi'} \"$@\"\n")
    smi.chmod(0o755)
    # No journal, no dmesg of this machine: the kernel log is the test's own file.
    for tool in ("journalctl", "dmesg"):
        fake = bin_dir / tool
        fake.write_text('#!/bin/sh\n[ -f "$KERNEL_LOG" ] && cat "$KERNEL_LOG"\n')
        fake.chmod(0o755)
    monkeypatch.setattr(reader, "PATH", f"{bin_dir}:{collect.PATH}")
    monkeypatch.setattr(program, "PATH", reader.PATH)

    def use(profile: str, kernel_log: str = "") -> None:
        folder = tmp_path / profile
        if not folder.exists():
            from gpuinfra_lab.profiles import build

            folder.mkdir()
            for name, text in build(profile).items():
                (folder / name).write_text(text)
        monkeypatch.setenv("GPUINFRA_LAB_HARDWARE", str(folder))
        log = tmp_path / "kernel.log"
        log.write_text(kernel_log)
        monkeypatch.setenv("KERNEL_LOG", str(log))
    return use


def reading(expect: Expectation) -> dict[str, Output]:
    from gpuinfra.health.probes import probes

    return reader.read(probes(expect))


def test_healthy_hgx_and_bridged_pair_pass(replay) -> None:
    replay("8x-h100-sxm-nvswitch")
    verdict = judge(HGX, reading(HGX))
    assert verdict.healthy, verdict.reason()
    checks = {f.check for f in verdict.findings}
    assert {"gpu-count", "nvlink-topology", "p2p-r", "nvlink-links", "fabric",
            "persistence"} <= checks
    replay("2x-h100-pcie-bridged")
    assert judge(BRIDGED, reading(BRIDGED)).healthy


def test_missing_bridge_fails_with_the_topology_first(replay) -> None:
    replay("2x-a100-pcie-bridge-missing")
    verdict = judge(BROKEN, reading(BROKEN))
    assert not verdict.healthy
    assert verdict.reason().startswith("gpuinfra: GPU0-GPU1 nvlink-topology: PIX, want NV")
    assert len(verdict.reason()) <= REASON_LIMIT
    assert {f.check for f in verdict.failed} >= {"nvlink-topology", "p2p-r", "p2p-w"}
    assert all(f.cause and f.fix for f in verdict.failed)


def test_wrong_count_and_no_driver_fail(replay, monkeypatch) -> None:
    replay("2x-h100-pcie-bridged")
    four = Expectation("n", None, GpuExpectation("H100-PCIE-80GB", 4, "bridged-pairs"))
    assert "gpu-count" in judge(four, reading(four)).reason()
    monkeypatch.setenv("GPUINFRA_LAB_HARDWARE", "/nonexistent")
    verdict = judge(BRIDGED, reading(BRIDGED))
    assert verdict.reason().startswith("gpuinfra: node gpu-count: `nvidia-smi --query-gpu` "
                                       "failed")


def test_fatal_xid_fails_on_its_gpu_and_154_alone_does_not(replay) -> None:
    line = (KERNEL / "nvsentinel-155-xid79-line.txt").read_text()
    replay("2x-h100-pcie-bridged", line.replace("PCI:0000:44:00", "PCI:0000:c2:00"))
    verdict = judge(BRIDGED, reading(BRIDGED))
    assert [f.subject for f in verdict.failed] == ["GPU0 (0000:c2:00)"]
    assert "Xid 79" in verdict.reason()
    # Xid 120 then 154 (R565+), on a GPU this node does not list: the fatal 120 still counts.
    replay("2x-h100-pcie-bridged", (KERNEL / "nvidia-forum-364958-xid120-then-154.txt").read_text())
    assert "Xid 120" in judge(BRIDGED, reading(BRIDGED)).reason()
    fallen = (KERNEL / "nvsentinel-155-fallen-off-bus-without-xid.txt").read_text()
    replay("2x-h100-pcie-bridged", fallen)
    assert "Xid 79" in judge(BRIDGED, reading(BRIDGED)).reason()


def test_xid_154_asking_for_a_reset_drains_even_after_a_non_fatal_xid(replay) -> None:
    """Issue 47: Xid 62 (not in the fatal list), then 154 "GPU Reset Required", then 45: the
    recovery action fails the GPU, naming the action and the XID before it."""
    log = (KERNEL / "nvidia-forum-364958-xid62-then-154.txt").read_text()
    replay("2x-h100-pcie-bridged", log)
    reason = judge(BRIDGED, reading(BRIDGED)).reason()
    assert "GPU Reset Required" in reason and "Xid 62" in reason


def test_a_driver_failure_without_an_xid_line_drains(replay) -> None:
    """Issue 47: a GSP heartbeat timeout with a memory subsystem error, no Xid line
    (open-gpu-kernel-modules#1230): the node check fails it, as check --dmesg does."""
    replay("2x-h100-pcie-bridged", (KERNEL / "open-gpu-kernel-modules-1230-gsp-heartbeat-"
                                             "memsys-error-no-xid.txt").read_text())
    reason = judge(BRIDGED, reading(BRIDGED)).reason()
    assert "driver's GPU6" in reason and "GSP heartbeat timed out" in reason


def test_remapped_rows_on_the_lent_h100() -> None:
    """The real answer (no remap pending) passes; the same row with pending or failure Yes
    fails with its own cause."""
    from gpuinfra.health.judge import _remapped
    from gpuinfra.parsers.gpus import parse_gpus

    gpus = parse_gpus((DEVICE / "query-gpu-collector-gpus.txt").read_text(),
                      fields=["index", "uuid", "name", "pci.bus_id"]).gpus
    real = (DEVICE / "query-remapped-rows.txt").read_text()
    assert _remapped(gpus, Output(True, 0, real)) == []
    pending = _remapped(gpus, Output(True, 0, real.replace("No, No", "Yes, No")))
    assert [(f.subject, f.observed) for f in pending] == [("GPU0", "row remapping pending")]
    failed = _remapped(gpus, Output(True, 0, real.replace("No, No", "No, Yes")))
    assert "replace the GPU" in failed[0].fix
    assert REMAPPED[1].startswith("--query-remapped-rows=")


def test_epilog_judges_only_the_xids_after_the_prolog(replay) -> None:
    line = (KERNEL / "nvsentinel-155-xid79-line.txt").read_text()
    log = line.replace("PCI:0000:44:00", "PCI:0000:c2:00")
    replay("2x-h100-pcie-bridged", log)
    out = reader.read(JOB_PROBES)
    # The XID was there before the job (count 1 at its prolog): not the job's.
    assert job_verdict(BRIDGED, out, [0], "7", since=1).healthy
    after = job_verdict(BRIDGED, out, [0], "7", since=0)
    assert after.reason().startswith("gpuinfra: job 7: GPU0 (0000:c2:00) xid: Xid 79")
    # Another job's GPU: not this job's fault.
    assert job_verdict(BRIDGED, out, [1], "8", since=0).healthy


# ---------------------------------------------------------------- the test audit of e4dd2f2

UNREAD = Output(False, 1, error="permission denied")


def test_an_unreadable_kernel_log_fails_the_node_and_the_job(replay) -> None:
    """H4a/H4b: a kernel log the check cannot read hides every XID: the node check and the
    job's prolog/epilog fail naming `journalctl -k`, never pass."""
    from gpuinfra.health.judge import _xids

    assert [(f.check, f.severity) for f in _xids([], UNREAD)] == [("xid", "fail")]
    assert "`journalctl -k` failed: permission denied" in _xids([], UNREAD)[0].observed
    replay("2x-h100-pcie-bridged")
    out = dict(reader.read(JOB_PROBES))
    assert job_verdict(BRIDGED, out, [0], "7", since=0).healthy
    out["kernel-log"] = UNREAD
    verdict = job_verdict(BRIDGED, out, [0], "7", since=0)
    assert not verdict.healthy and "journalctl -k" in verdict.reason()


@pytest.mark.parametrize("state", ["inactive", "failed", "activating"])
def test_a_service_not_active_fails_naming_it(state) -> None:
    """H6: every state but active fails, naming the unit (nvidia-fabricmanager's cause)."""
    from gpuinfra.health.judge import _services

    found = _services(("slurmd", "nvidia-fabricmanager"),
                      Output(True, 0, f"{state}\nactive\n"))
    assert [(f.subject, f.observed, f.severity) for f in found] == [("slurmd", state, "fail")]
    fabric = _services(("nvidia-fabricmanager",), Output(False, 3, f"{state}\n"))
    assert fabric[0].severity == "fail" and "new CUDA contexts fail" in fabric[0].cause
    assert _services(("slurmd",), Output(True, 0, "active\n")) == []


NODE = SlurmNode("w1", "idle", "gpu:2", "none")


def node(state: str, reason: str) -> SlurmNode:
    return SlurmNode("w1", state, "gpu:2", reason)


@pytest.mark.parametrize(("seen", "reason", "mode", "kind"), [
    (node("idle", ""), "gpuinfra: x", "drain", "drain"),
    (node("mixed", ""), "gpuinfra: x", "drain", "drain"),
    (node("drained", "maintenance"), "gpuinfra: x", "drain", "none"),  # an operator's drain
    (node("drained", "gpuinfra: y"), "gpuinfra: x", "drain", "none"),  # first cause kept
    (node("drained", "gpuinfra: y"), "", "drain", "resume"),
    (node("draining", "gpuinfra: y"), "", "drain", "resume"),
    (node("drained", "maintenance"), "", "drain", "none"),  # never resumed by gpuinfra
    (node("idle", ""), "gpuinfra: x", "report", "none"),
    (None, "gpuinfra: x", "drain", "none"),
])
def test_drain_and_resume_rules(seen, reason, mode, kind) -> None:
    assert decide(seen, reason, mode).kind == kind


def test_epilog_rules_and_commands() -> None:
    assert decide_after_job(node("drained", "gpuinfra: y"), "gpuinfra: job 3: z",
                            "drain").kind == "drain"
    assert decide_after_job(node("drained", "maintenance"), "gpuinfra: job 3: z",
                            "drain").kind == "none"
    action = decide(node("idle", ""), "gpuinfra: GPU0 x", "drain")
    assert scontrol("w1", action) == ["scontrol", "update", "NodeName=w1", "State=DRAIN",
                                      "Reason=gpuinfra: GPU0 x"]


def slurm_stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """sinfo, scontrol and logger stand-ins beside the replay's tools: sinfo prints the file
    ``state`` (the node's line) or, asked ``-O`` (the breaker's form), ``cluster`` (every
    node); scontrol appends its arguments to ``calls``. No settle wait."""
    state, cluster, calls = tmp_path / "state", tmp_path / "cluster", tmp_path / "calls"
    bin_dir = Path(reader.PATH.split(":")[0])
    (bin_dir / "sinfo").write_text(f'#!/bin/sh\ncase "$*" in *" -O "*) cat "{cluster}";; '
                                   f'*) cat "{state}";; esac\n')
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n')
    (bin_dir / "logger").write_text("#!/bin/sh\ntrue\n")
    for tool in ("sinfo", "scontrol", "logger"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setattr(program, "STATE_DIR", tmp_path / "run")
    monkeypatch.setattr(program.breaker, "SETTLE_S", 0)
    return state, cluster, calls


def test_slurm_mode_drains_then_resumes_through_scontrol(replay, tmp_path, monkeypatch) -> None:
    """The HealthCheckProgram end to end, with sinfo and scontrol stand-ins that record."""
    state, cluster, calls = slurm_stand_ins(tmp_path, monkeypatch)
    expect_file = tmp_path / "health.json"
    expect_file.write_text(BROKEN.to_json())
    replay("2x-a100-pcie-bridge-missing")
    state.write_text("lab-worker3|idle|gpu:2|none\n")
    cluster.write_text("lab-worker3|idle|gpu:2|none|(null)|\nlab-worker4|idle|gpu:2|none|"
                       "(null)|\n")
    assert program.main(["--expect", str(expect_file), "slurm"]) == 0
    assert "State=DRAIN Reason=gpuinfra: GPU0-GPU1 nvlink-topology" in calls.read_text()
    assert "update NodeName=lab-worker3 Comment=gpuinfra-drained: " in calls.read_text()
    # The breaker (0.1 of two GPU nodes: one) holds a second node's drain and trips.
    calls.write_text("")
    cluster.write_text("lab-worker3|idle|gpu:2|none|(null)|\nlab-worker4|drained|gpu:2|"
                       "gpuinfra: GPU1 lost|gpuinfra-drained: 1|\n")
    assert program.main(["--expect", str(expect_file), "slurm"]) == 0
    said = calls.read_text()
    assert "State=DRAIN" not in said
    assert "update NodeName=lab-worker3 Comment=gpuinfra-breaker: tripped " in said
    assert "1 of 2 GPU nodes drained automatically" in said
    # No sinfo of the cluster: the breaker cannot count, so nothing is drained.
    calls.write_text("")
    cluster.write_text("")
    assert program.main(["--expect", str(expect_file), "slurm"]) == 0
    assert calls.read_text() == ""
    # Healthy again (the spec of the capture replayed): resumed; an operator's drain is not.
    expect_file.write_text(Expectation("lab-worker3", "lab-worker3", GpuExpectation(
        "A100-PCIE-40GB", 2, "pcie-only")).to_json())
    calls.write_text("")
    state.write_text("lab-worker3|drained|gpu:2|gpuinfra: GPU0-GPU1 nvlink-topology\n")
    assert program.main(["--expect", str(expect_file), "slurm"]) == 0
    assert calls.read_text().split() == ["update", "NodeName=lab-worker3", "State=RESUME"]
    calls.write_text("")
    state.write_text("lab-worker3|drained|gpu:2|maintenance\n")
    assert program.main(["--expect", str(expect_file), "slurm"]) == 0
    assert calls.read_text() == ""


def test_expectation_round_trip_and_refusals(tmp_path) -> None:
    assert from_json(HGX.to_json()) == HGX
    raw = json.loads(HGX.to_json())
    cases = {
        "gpus.count is 0": {**raw, "gpus": {**raw["gpus"], "count": 0}},
        'gpus.topology is "nvlink-mesh-9"': {**raw, "gpus": {**raw["gpus"],
                                                             "topology": "nvlink-mesh-9"}},
        "on_failure is \"kill\"": {**raw, "on_failure": "kill"},
        "node is missing": {k: v for k, v in raw.items() if k != "node"},
        "version is 2": {**raw, "version": 2},
        'temperature_action is "melt"': {**raw, "temperature_action": "melt"},
        "ecc_max is -1": {**raw, "ecc_max": -1},
        "temperature_max is true": {**raw, "temperature_max": True},
    }
    for said, broken in cases.items():
        with pytest.raises(ExpectationError) as err:
            from_json(json.dumps(broken), "/etc/gpuinfra/health.json")
        assert said in str(err.value) and "fix: deploy again" in str(err.value)
        assert str(err.value).startswith("/etc/gpuinfra/health.json: ")
    with pytest.raises(ExpectationError, match="not JSON"):
        from_json('{"node": ', "f")
    # A file written before the thresholds existed reads their defaults.
    old = {k: v for k, v in raw.items()
           if k not in ("temperature_max", "temperature_action", "ecc_max", "ecc_action")}
    assert from_json(json.dumps(old)) == HGX


def test_unreadable_expectation_exits_2_and_slurm_modes_exit_0(tmp_path, capsys) -> None:
    bad = tmp_path / "health.json"
    bad.write_text("{}")
    assert program.main(["--expect", str(bad), "check"]) == 2
    assert program.main(["validate", str(bad)]) == 2
    assert "version is missing" in capsys.readouterr().err


def test_metrics_name_the_failure_and_the_drain() -> None:
    failed = Finding("xid", "GPU0 (0000:c2:00)", "no fatal XID", "Xid 79", "fail", "c", "f")
    text = metrics_text(Verdict("n", [failed]), "gpuinfra: GPU0 xid", 0.25, 1000.0)
    assert "gpuinfra_health_ok 0" in text
    assert 'gpuinfra_health_failure{check="xid",subject="GPU0 (0000:c2:00)",' in text
    assert 'gpuinfra_health_drained{reason="gpuinfra: GPU0 xid"} 1' in text
    assert "gpuinfra_health_ok 1" in metrics_text(Verdict("n", []), None, 0.1, 1.0)


def test_the_packed_library_runs_the_program_alone(tmp_path) -> None:
    """The zip the role installs holds every module the program imports: the program runs
    from a folder with nothing else, in Python's isolated mode; and it packs the same bytes
    twice (a second deploy changes nothing)."""
    from gpuinfra_deploy.nodecode import node_zip

    assert node_zip() == node_zip.__wrapped__()
    (tmp_path / "gpuinfra.zip").write_bytes(node_zip())
    (tmp_path / "program.py").write_text((REPO / "roles/health/program.py").read_text())
    (tmp_path / "health.json").write_text(HGX.to_json())
    # -S: no site-packages either (a node has Python's standard library and nothing else).
    command = [sys.executable, "-I", "-S", str(tmp_path / "program.py")]
    run = subprocess.run([*command, "validate", str(tmp_path / "health.json")],
                         capture_output=True, text=True, cwd="/",
                         env={"PATH": os.environ["PATH"]}, check=False)
    assert run.returncode == 0, run.stderr
    # Every mode's imports: `check` on a node without nvidia-smi judges (exit 1), never a
    # traceback.
    run = subprocess.run([*command, "--expect", str(tmp_path / "health.json"), "check"],
                         capture_output=True, text=True, cwd="/", env={"PATH": "/nonexistent"},
                         check=False)
    assert run.returncode == 1 and run.stdout.startswith("gpuinfra: node gpu-count"), run
    (tmp_path / "health.json").write_text("[]")
    run = subprocess.run([*command, "validate", str(tmp_path / "health.json")],
                         capture_output=True, text=True, cwd="/", check=False)
    assert run.returncode == 2 and "not an object" in run.stderr
    assert GPUS[0] == "nvidia-smi"


# The driver's own format of a contained ECC error (NVIDIA/open-gpu-kernel-modules 595.45.04,
# src/nvidia/src/kernel/gpu/arch/ampere/kern_gpu_error_cont_ga100.c, comment of its log
# function), on this node's GPU0.
XID94 = ("NVRM: Xid (PCI:0000:c2:00): 94, pid=7062, Contained: CE User Channel (0x9). RST: No, "
         "D-RST: No\n")


def test_the_sites_xid_policy_decides_what_drains(replay) -> None:
    """Issue 48 item 2: NVIDIA's catalog says RESTART_APP for Xid 94 (contained ECC error), so
    by default it warns and the node stays in service; a site that sets {94: 'drain'} drains
    on it, and {79: 'warn'} keeps a node whose GPU fell off the bus (its choice)."""
    from dataclasses import replace

    from gpuinfra.knowledge.xids import drain_xids

    replay("2x-h100-pcie-bridged", XID94)
    verdict = judge(BRIDGED, reading(BRIDGED))
    assert verdict.healthy and [f.severity for f in verdict.findings if f.check == "xid"] == [
        "warn"]
    strict = replace(BRIDGED, drain_xids=drain_xids({94: "drain"}))
    assert "Xid 94" in judge(strict, reading(strict)).reason()
    replay("2x-h100-pcie-bridged", (KERNEL / "nvsentinel-155-xid79-line.txt").read_text()
           .replace("PCI:0000:44:00", "PCI:0000:c2:00"))
    lenient = replace(BRIDGED, drain_xids=drain_xids({79: "warn"}))
    assert judge(lenient, reading(lenient)).healthy
    assert not judge(BRIDGED, reading(BRIDGED)).healthy


def test_the_policy_reaches_the_node_in_its_expectation_file() -> None:
    from gpuinfra.health.expectation import from_json

    strict = Expectation("n", drain_xids=(48, 79, 94))
    assert from_json(strict.to_json()).drain_xids == (48, 79, 94)
    older = json.loads(strict.to_json())
    del older["drain_xids"]  # a file a deploy before the policy wrote: the catalog's defaults
    assert from_json(json.dumps(older)).drain_xids == (48, 64, 74, 79, 95, 119, 120, 140)
    older["drain_xids"] = [94, 999]
    with pytest.raises(Exception, match="drain_xids"):
        from_json(json.dumps(older))


@pytest.mark.parametrize(("policy", "words"), [
    ({200: "drain"}, "Xid 200 is not an error the NVIDIA driver logs"),
    ({154: "warn"}, "Xid 154 is no error of its own"),
    ({94: "reset"}, "'drain' or 'warn'"),
    ({"94": "drain"}, "an XID number (an int)"),
    ([94], "must be a mapping"),
])
def test_a_bad_xid_policy_is_refused_before_any_host_is_touched(policy, words) -> None:
    from gpuinfra.spec import HostInput, validate
    from gpuinfra_deploy.run.knobs import knobs_of

    hosts = [HostInput("head01", ("head",), {"health_xid_policy": policy,
                                             "node_address": "10.0.0.1"}),
             HostInput("gpu01", ("workers",), {"health_xid_policy": policy,
                                               "node_address": "10.0.0.2",
                                               "gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
                                               "gpu_topology": "nvswitch-all-to-all"})]
    found = [e for e in validate(hosts, knobs=knobs_of()) if e.field == "health_xid_policy"]
    assert found and words in found[0].problem and found[0].fix, found
    assert validate([HostInput(h.name, h.groups, {**h.data, "health_xid_policy": {94: "drain"}})
                     for h in hosts], knobs=knobs_of()) == []


def _fake_smi(bin_dir: Path, reset_rc: int) -> None:
    """nvidia-smi answering the GPU list (the 2x-h100-pcie-bridged replay's bus ids) and
    ``-r`` with ``reset_rc``, as the driver would on a GPU in use (nvidia-smi's exit 255)."""
    script = bin_dir / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\ncase "$1" in -r) echo "GPU 00000000:C2:00.0 is currently in use by '
        f'another process." >&2; exit {reset_rc};; esac\n'
        'printf "0, GPU-a, NVIDIA H100 PCIe, 00000000:C2:00.0, Enabled\\n'
        '1, GPU-b, NVIDIA H100 PCIe, 00000000:C3:00.0, Enabled\\n"\n')
    script.chmod(0o755)


def test_reset_gpu_marks_the_kernel_log_and_the_check_then_passes(replay, tmp_path, monkeypatch,
                                                                   capsys) -> None:
    """Issue 48: XIDs judged since the GPU's last reset. ``gpuinfra-health reset-gpu`` resets
    the GPU with nvidia-smi -r and writes the mark to the kernel log (here a file for
    /dev/kmsg); the health check reading that log passes the GPU its fatal XID failed. A reset
    that fails, or an unknown GPU, marks nothing."""
    line = (KERNEL / "nvsentinel-155-xid79-line.txt").read_text()
    log = line.replace("PCI:0000:44:00", "PCI:0000:c2:00")
    replay("2x-h100-pcie-bridged", log)
    assert "Xid 79" in judge(BRIDGED, reading(BRIDGED)).reason()
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    monkeypatch.setattr(program, "KMSG", str(kmsg))
    (tmp_path / "bin" / "logger").write_text("#!/bin/sh\ntrue\n")
    (tmp_path / "bin" / "logger").chmod(0o755)
    smi = tmp_path / "bin"
    _fake_smi(smi, 255)
    assert program.main(["reset-gpu", "0"]) == 1
    assert "currently in use" in capsys.readouterr().err and kmsg.read_text() == ""
    assert program.main(["reset-gpu", "7"]) == 2
    assert "no GPU '7' on this node (nvidia-smi lists 0 00000000:C2:00.0" in \
        capsys.readouterr().err and kmsg.read_text() == ""
    _fake_smi(smi, 0)
    assert program.main(["reset-gpu", "0000:c2:00.0"]) == 0
    assert kmsg.read_text() == "gpuinfra-health GPU reset PCI:00000000:C2:00.0 (nvidia-smi -r)\n"
    # The node's kernel log now holds the mark after the XID: the check passes (the replayed
    # GPUs again: the fake nvidia-smi above answered the list only).
    (smi / "nvidia-smi").write_text(f"#!/bin/sh\nexec {sys.executable} {LAB / 'nvidia-smi'} "
                                    '"$@"\n')
    replay("2x-h100-pcie-bridged", log + kmsg.read_text())
    verdict = judge(BRIDGED, reading(BRIDGED))
    assert verdict.healthy, verdict.reason()
    # The epilog's count is of every XID, cleared or not: the prolog's mark stays aligned.
    assert program.xid_count(reader.read(JOB_PROBES)["kernel-log"]) == 1


def test_gpu_thresholds_use_the_alerts_numbers_and_the_sites_actions() -> None:
    """Issue 48: temperature above monitoring_gpu_temperature_max and uncorrectable ECC errors
    above health_gpu_ecc_max, read with the collector's queries (the lent H100's answers,
    tests/fixtures/device): warned by default, failed (drained) when the site says "drain",
    not read when "off"; within the limits one ok each."""
    from dataclasses import replace

    from gpuinfra.health import thresholds
    from gpuinfra.health.probes import probes

    telemetry = (DEVICE / "query-gpu-collector-telemetry.txt").read_text()  # 0, 35, ...
    ecc = (DEVICE / "query-gpu-collector-ecc.txt").read_text()  # 0, 0, 0
    healthy = {"telemetry": Output(True, 0, telemetry), "ecc": Output(True, 0, ecc)}
    assert [(f.check, f.severity) for f in thresholds.findings(BRIDGED, healthy)] == [
        ("temperature", "ok"), ("ecc", "ok")]
    hot = {"telemetry": Output(True, 0, telemetry.replace("0, 35,", "0, 91,")),
           "ecc": Output(True, 0, ecc.replace("0, 0, 0", "0, 2, 0"))}
    said = thresholds.findings(BRIDGED, hot)
    assert [(f.check, f.subject, f.observed, f.severity) for f in said] == [
        ("temperature", "GPU0", "91 C", "warn"),
        ("ecc", "GPU0", "2 uncorrectable ECC errors since the driver loaded", "warn")]
    assert all(f.cause and f.fix for f in said)
    drain = replace(BRIDGED, temperature_action="drain", ecc_action="drain")
    assert [f.severity for f in thresholds.findings(drain, hot)] == ["fail", "fail"]
    roomy = replace(BRIDGED, temperature_max=95, ecc_max=2)
    assert [f.severity for f in thresholds.findings(roomy, hot)] == ["ok", "ok"]
    off = replace(BRIDGED, temperature_action="off", ecc_action="off")
    assert thresholds.findings(off, hot) == []
    assert not {"telemetry", "ecc"} & set(probes(off))
    assert {"telemetry", "ecc"} <= set(probes(BRIDGED))
    # A board without ECC ([N/A]) or a failed query: nothing to judge, never a failure.
    blind = {"telemetry": Output(False, 6, "", "no value"), "ecc": Output(True, 0, "0, [N/A], "
                                                                          "[N/A]\n")}
    assert thresholds.findings(drain, blind) == []


def test_a_hot_gpu_drains_only_where_the_site_says_so(replay) -> None:
    """The whole check on the lab's replay (temperatures 28 and 29 C): healthy with the
    defaults; with a 25 C limit and "drain" it fails on both GPUs naming the limit."""
    from dataclasses import replace

    replay("2x-h100-pcie-bridged")
    assert judge(BRIDGED, reading(BRIDGED)).healthy
    cold = replace(BRIDGED, temperature_max=25)
    verdict = judge(cold, reading(cold))
    assert verdict.healthy and [f.subject for f in verdict.findings if f.severity == "warn"] \
        == ["GPU0", "GPU1"]
    strict = replace(cold, temperature_action="drain")
    verdict = judge(strict, reading(strict))
    assert verdict.reason().startswith("gpuinfra: GPU0 temperature: 28 C, want at most 25 C")


def test_the_prolog_drains_within_the_breaker_and_lets_the_job_run_past_it(
        replay, tmp_path, monkeypatch) -> None:
    """Issue 48: the Prolog's drain is bounded too. A fatal XID on the job's GPU drains the node
    and fails the Prolog (exit 1: Slurm requeues the job); when another node took the
    breaker's share, the drain is held, the trip stamped, and the Prolog exits 0 (a failing
    Prolog would make Slurm drain the node itself, past the bound)."""
    state, cluster, calls = slurm_stand_ins(tmp_path, monkeypatch)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    expect_file = tmp_path / "health.json"
    expect_file.write_text(BRIDGED.to_json())
    line = (KERNEL / "nvsentinel-155-xid79-line.txt").read_text()
    replay("2x-h100-pcie-bridged", line.replace("PCI:0000:44:00", "PCI:0000:c2:00"))
    state.write_text("lab-worker2|allocated|gpu:2|none\n")
    cluster.write_text("lab-worker2|allocated|gpu:2|none|(null)|\n"
                       "lab-worker9|idle|gpu:2|none|(null)|\n")
    assert program.main(["--expect", str(expect_file), "prolog"]) == 1
    assert "State=DRAIN Reason=gpuinfra: job 42: GPU0 (0000:c2:00) xid" in calls.read_text()
    calls.write_text("")
    cluster.write_text("lab-worker2|allocated|gpu:2|none|(null)|\n"
                       "lab-worker9|drained|gpu:2|gpuinfra: GPU1 lost|gpuinfra-drained: "
                       f"{int(__import__('time').time())}|\n")
    assert program.main(["--expect", str(expect_file), "prolog"]) == 0
    said = calls.read_text()
    assert "State=DRAIN" not in said
    assert "update NodeName=lab-worker2 Comment=gpuinfra-breaker: tripped " in said
