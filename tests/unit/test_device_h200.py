"""What a real H200 printed (tests/fixtures/device/h200-141gb-vm-drv580.159.04, captured on the
GPU machine lent to this project by run.sh), read by the code a deploy runs: the MIG table of
gpuinfra/knowledge/gpus.py, the health check's reading and verdict, the MIG plan and the
driver role's refusal under a real GPU process."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path

import pytest

from gpuinfra.driverchange import PackageChange, driver_change_refusal, gpu_processes
from gpuinfra.health.collect import Output
from gpuinfra.health.expectation import from_json
from gpuinfra.health.judge import judge
from gpuinfra.health.probes import probes
from gpuinfra.jobs.nccl_verdict import SOCKET_CAUSE
from gpuinfra.jobs.smoke_verdict import Expected, expected_from_log, judge_smoke, parse_smoke
from gpuinfra.knowledge.gpus import GPU_MODELS
from gpuinfra.parsers.fabric import parse_fabric
from gpuinfra.parsers.gpus import parse_gpus
from gpuinfra.parsers.mig import available_profiles, parse_mig
from gpuinfra.parsers.nvlink import parse_nvlink
from gpuinfra.parsers.processes import parse_compute_apps
from gpuinfra.sharing.migplan import compute_processes, node_state, plan_node
from gpuinfra.verdicts import check_system, failures
from gpuinfra_deploy.facts.nvidia import NvidiaMigState

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "device" / "h200-141gb-vm-drv580.159.04"
MODEL = "H200-SXM-141GB"
UUID = "GPU-d23e0b6b-de2b-580f-38ca-adc4142ffaca"


def _text(name: str) -> str:
    return (H200 / name).read_text()


def _reading(name: str = "health-reading.json") -> tuple[dict, dict[str, Output]]:
    raw = json.loads(_text(name))
    return raw, {key: Output.from_json(value) for key, value in raw["reading"].items()}


def test_the_gpu_is_an_h200_by_name_and_pci_id() -> None:
    gpus = parse_gpus(_text("query-gpu-driver.txt")).gpus
    assert [(g.name, g.model) for g in gpus] == [("NVIDIA H200", MODEL)]
    assert gpus[0].fields["memory.total"] == 143771
    assert re.findall(r"vendor=0x10de device=0x([0-9a-f]{4})", _text("pci-sysfs.txt")) == \
        list(GPU_MODELS[MODEL].pci_ids)


def test_mig_profiles_and_placements_match_the_knowledge() -> None:
    """The H200 rows of knowledge/gpus.py were inferred from the H100's and the MIG guide's
    sizes; this machine's -lgip and -lgipp are the first capture of them."""
    known = GPU_MODELS[MODEL].mig_profiles
    listing = parse_mig(_text("mig-lgip.txt"))
    assert available_profiles(listing) == {0: {n: p.max_instances for n, p in known.items()}}
    ids = {e.profile_id: e.profile for e in listing.entries}
    placements = {ids[p.profile_id]: tuple(p.starts)
                  for p in parse_mig(_text("mig-lgipp.txt")).entries}
    assert placements == {name: p.placements for name, p in known.items()}


def test_the_node_judged_itself_as_the_library_judges_its_reading() -> None:
    """The health check installed on the machine (install_health.py, as its role installs it)
    read it and said healthy; the library's verdict on the same reading says the same, every
    finding alike, and the reading ran exactly the commands the expectation calls for."""
    raw, reading = _reading()
    expect = from_json(json.dumps(raw["expect"]))
    # Recorded before the GPU thresholds (gpuinfra.health.thresholds): its expectation has no
    # threshold keys, which read the defaults now, so today's check would also run their two
    # queries; none of its findings came from them.
    assert set(reading) == set(probes(expect)) - {"telemetry", "ecc"}
    verdict = judge(expect, reading)
    assert verdict.healthy and raw["verdict"]["healthy"]
    assert [f.to_json() for f in verdict.findings] == raw["verdict"]["findings"]
    assert {f.check: f.severity for f in verdict.findings} == {
        "gpu-count": "ok", "gpu-model": "ok", "profile": "ok", "persistence": "ok"}
    assert json.loads(_text("health-check.json"))["healthy"] is True


def test_a_gpu_process_does_not_make_the_node_unhealthy() -> None:
    raw, reading = _reading("health-reading-busy.json")
    assert judge(from_json(json.dumps(raw["expect"])), reading).healthy


def _spec(**gpus: object):
    raw, reading = _reading()
    expect = from_json(json.dumps(raw["expect"]))
    assert expect.gpus is not None
    return dataclasses.replace(expect, gpus=dataclasses.replace(expect.gpus, **gpus)), reading


@pytest.mark.parametrize(("change", "check", "words"), [
    ({"model": "H100-SXM5-80GB"}, "gpu-model", "NVIDIA H200 (H200-SXM-141GB), want H100-SXM5-80GB"),
    ({"count": 2}, "gpu-count", "nvidia-smi --query-gpu: 1, want 2 GPUs"),
])
def test_the_real_reading_fails_a_spec_the_machine_does_not_meet(change, check, words) -> None:
    """The model case was a pass before the device run: on a node whose topology is not
    checked (pcie-only) nothing but nvlink names judged the model, and one GPU without
    NVLink peers prints none. The health check said healthy to an H100 spec on this H200."""
    expect, reading = _spec(**change)
    verdict = judge(expect, reading)
    assert not verdict.healthy
    assert verdict.failed[0].check == check and words in verdict.reason()


def test_mig_asked_for_where_mig_is_disabled_fails_naming_the_role() -> None:
    """The MIG part of the reading is the real STATE_COMMAND output (mig-state.txt)."""
    expect, reading = _spec()
    expect = dataclasses.replace(expect, mig=({"3g.71gb": 2},))
    assert "mig" in probes(expect)
    reading = {**reading, "mig": Output(True, 0, _text("mig-state.txt"))}
    verdict = judge(expect, reading)
    assert [f.check for f in verdict.failed][:1] == ["mig"]
    assert "MIG mode Disabled, the spec wants Enabled" in verdict.reason()
    assert "gpu_sharing" in verdict.failed[0].cause


def _busy_state() -> dict[str, str]:
    return NvidiaMigState().process(_text("mig-state-busy.txt").splitlines())


def test_the_compute_apps_query_with_a_process_running() -> None:
    """The project's own query with a process on the GPU (PyTorch holding 1 GiB), which no
    posted capture had (tests/fixtures/compute-apps/INDEX.md)."""
    apps = parse_compute_apps(_text("compute-apps-busy.txt"))
    assert [(a.gpu_uuid, a.pid, a.name) for a in apps] == [(UUID, 1179, "python3")]
    assert parse_compute_apps(_text("compute-apps.txt")) == []


def test_a_mig_change_under_the_running_process_is_refused() -> None:
    states = node_state(_busy_state())
    assert [(s.index, s.mig_current, s.processes) for s in states] == \
        [(0, False, ("1179 python3",))]
    plan, = plan_node(states, [{"3g.71gb": 2}], GPU_MODELS[MODEL])
    assert plan.refusal is not None and "1179 python3" in plan.refusal
    assert "Drain the node" in plan.refusal
    idle = NvidiaMigState().process(_text("mig-state.txt").splitlines())
    plan, = plan_node(node_state(idle), [{"3g.71gb": 2}], GPU_MODELS[MODEL])
    assert plan.refusal is None and plan.set_mode is True


def test_the_driver_role_refuses_to_change_the_driver_under_it() -> None:
    processes = gpu_processes(compute_processes(_busy_state()))
    assert [str(p) for p in processes] == [f"pid 1179 python3 on GPU 0 ({UUID})"]
    refusal = driver_change_refusal(
        "h200", [PackageChange("nvidia-driver-535", "535.261.03-0ubuntu1", ("580.159.04",))],
        processes, node_name="h200", schedulers=["slurm"])
    assert refusal is not None and "pid 1179 python3" in refusal
    assert "scontrol update nodename=h200 state=drain" in refusal


def test_every_capture_has_its_command_and_the_index_names_the_folder() -> None:
    with (H200 / "commands.tsv").open() as handle:
        commands = {row["name"]: int(row["rc"]) for row in csv.DictReader(handle, delimiter="\t")}
    run_sh = {"compute-apps-busy", "mig-state", "mig-state-busy", "nvidia-smi-busy"}
    others = {"red-run", "smoke-nccl-1gpu"}  # run-red.sh's and run-smoke.sh's output
    assert {p.stem for p in H200.glob("*.txt")} - others == set(commands) | run_sh
    for name in ("nvidia-smi-q", "topo-m", "mig-lgip", "mig-lgipp", "compute-apps"):
        assert commands[name] == 0, f"{name} did not answer on the device"
    assert f"## {H200.name}" in (H200.parent / "INDEX.md").read_text()


def test_the_model_is_judged_from_nvidia_smi_q_where_no_list_was_read() -> None:
    """`gpuinfra check --smi-q` on a capture: the names of `nvidia-smi -q` judge the model
    (before the device run only `nvlink --status` names did, and this GPU prints none)."""
    fabric = parse_fabric(_text("nvidia-smi-q.txt"))
    assert parse_nvlink(_text("nvlink-status.txt")).gpus == {}
    right = check_system("pcie-only", 1, MODEL, fabric=fabric)
    assert [(f.check, f.severity) for f in right][:2] == [("gpu-count", "ok"),
                                                          ("gpu-model", "ok")]
    wrong = failures(check_system("pcie-only", 1, "H100-SXM5-80GB", fabric=fabric))
    assert [f.check for f in wrong] == ["gpu-model"]
    assert wrong[0].observed == "NVIDIA H200 (H200-SXM-141GB)"


def test_a_gpu_name_the_knowledge_lacks_is_a_warning_not_a_pass() -> None:
    found = check_system("pcie-only", 1, MODEL, gpu_names=["NVIDIA H201"])
    model = next(f for f in found if f.check == "gpu-model")
    assert (model.severity, model.observed) == ("warn", "NVIDIA H201")
    assert "smi_names" in model.cause


def test_the_smoke_jobs_nccl_path_ran_on_a_real_gpu() -> None:
    """run-smoke.sh: the training script's CUDA and NCCL path (the lab runs gloo on CPUs), one
    rank under torchrun, NCCL_DEBUG=INFO."""
    log = parse_smoke(_text("smoke-nccl-1gpu.txt"))
    rank, = log.results
    assert (rank["backend"], rank["device"], rank["replicas_in_sync"]) == \
        ("nccl", "NVIDIA H200", True)
    verdict = {f.check: f for f in judge_smoke(log, expected_from_log(log))}
    assert not [f for f in verdict.values() if f.failed]
    assert verdict["busbw"].severity == "warn" and "one rank" in verdict["busbw"].cause


def test_nccl_without_ib_is_read_as_sockets() -> None:
    """NCCL 2.28 on a host without IB prints "NET/IB : No device found." and even "NET/IB :
    Using [RO]; OOB eth0" before "Using network Socket". The smoke judge read those NET/IB
    lines as IB used: on a cluster with RDMA NICs, a job on sockets passed its transport check
    (observed "IB, Socket"). It now reads only the choice, as the NCCL-tests parser does."""
    log = parse_smoke(_text("smoke-nccl-1gpu.txt"))
    assert log.networks == ["Socket"]
    transport, = [f for f in judge_smoke(log, Expected("nccl", 2, 1, rdma=True))
                  if f.check == "transport"]
    assert transport.failed and transport.cause == SOCKET_CAUSE
