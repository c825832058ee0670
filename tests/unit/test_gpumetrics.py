"""The GPU collector's metric text, on real captures (through the lab's replay of them) and on
real kernel-log lines; and the collector as shipped to a node, run alone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuinfra.monitoring.gpumetrics import (
    NVLINK_COMMAND,
    QUERIES,
    Output,
    XidEvent,
    bus_address,
    metrics_text,
    parse_xids,
)
from gpuinfra_roles.monitoring import collector_files

KERNEL_LOG = Path(__file__).resolve().parents[1] / "fixtures" / "kernel-log"

REPO = Path(__file__).resolve().parents[2]
REPLAY = REPO / "gpuinfra_lab" / "nvidia-smi"
HARDWARE = REPO / "gpuinfra_lab" / "hardware"


def replay(profile: str, argv: list[str]) -> Output:
    """What the lab's nvidia-smi (replaying real captures of ``profile``) answers."""
    run = subprocess.run([sys.executable, str(REPLAY), *argv[1:]], capture_output=True,
                         text=True, check=False,
                         env={**os.environ, "GPUINFRA_LAB_HARDWARE": str(HARDWARE / profile)})
    return Output(run.returncode == 0, text=run.stdout)


def collect(profile: str, kernel_log: str = "") -> str:
    outputs = {q.name: replay(profile, q.command()) for q in QUERIES}
    return metrics_text(outputs, replay(profile, NVLINK_COMMAND), Output(True, text=kernel_log),
                        1_700_000_000.4)


def samples(text: str, metric: str) -> dict[str, float]:
    """{label text: value} of one metric."""
    found = re.findall(rf"^{metric}\{{(.*)\}} (\S+)$", text, re.MULTILINE)
    return {labels: float(value) for labels, value in found}


def test_hgx_h100_every_gpu_with_its_captured_telemetry():
    text = collect("8x-h100-sxm-nvswitch")
    info = samples(text, "gpuinfra_gpu_info")
    assert len(info) == 8
    assert any('name="NVIDIA H100 80GB HBM3"' in k and 'pci_bus_id="00000000:19:00.0"' in k
               for k in info)
    temps = samples(text, "gpuinfra_gpu_temperature_celsius")
    # GPU Current Temp of the -q capture: 29 C on GPU 0, 31 C on GPU 7.
    assert temps['gpu="0",uuid="GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"'] == 29
    assert sorted(temps.values()) == [29, 29, 30, 30, 31, 31, 32, 32]
    assert samples(text, "gpuinfra_gpu_power_draw_watts")[
        'gpu="0",uuid="GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"'] == 67.74
    assert set(samples(text, "gpuinfra_gpu_memory_total_bytes").values()) == {81559 * 1048576}
    assert set(samples(text, "gpuinfra_gpu_ecc_uncorrected_volatile_errors").values()) == {0}
    assert set(samples(text, "gpuinfra_gpu_nvlink_links_active").values()) == {18}
    assert set(samples(text, "gpuinfra_gpu_nvlink_link_min_gbytes_per_second").values()) == {26.562}
    assert set(samples(text, "gpuinfra_gpu_xid_errors").values()) == {0}
    # H100 retires no pages (row remapping: N/A in the capture): no retired-pages series.
    assert "gpuinfra_gpu_retired_pages_double_bit{" not in text
    ok = samples(text, "gpuinfra_gpu_collector_query_ok")
    assert ok['query="gpus"'] == ok['query="telemetry"'] == ok['query="nvlink"'] == 1
    # The replay has no capture of --query-remapped-rows: it refuses, and the metric says so.
    assert ok['query="remapped_rows"'] == 0
    assert "gpuinfra_gpu_collector_last_run_timestamp_seconds 1700000000\n" in text


def test_bridged_h100_pcie_twelve_links_up_six_inactive():
    text = collect("2x-h100-pcie-bridged")
    assert len(samples(text, "gpuinfra_gpu_info")) == 2
    assert set(samples(text, "gpuinfra_gpu_nvlink_links_active").values()) == {12}
    assert set(samples(text, "gpuinfra_gpu_nvlink_links_inactive").values()) == {6}
    assert sorted(samples(text, "gpuinfra_gpu_temperature_celsius").values()) == [28, 29]
    # Corrected ECC counts are not in the captured summary: the ECC query is refused.
    assert samples(text, "gpuinfra_gpu_collector_query_ok")['query="ecc"'] == 0


def test_a100_without_bridge_shows_no_active_link():
    text = collect("2x-a100-pcie-bridge-missing")
    # "Unable to retrieve NVLink information as all links are inActive": 0 links up.
    assert set(samples(text, "gpuinfra_gpu_nvlink_links_active").values()) == {0}
    assert "gpuinfra_gpu_nvlink_link_min_gbytes_per_second" not in text
    # No power draw was captured on that host: the replay refuses the telemetry query.
    assert samples(text, "gpuinfra_gpu_collector_query_ok")['query="telemetry"'] == 0
    assert "gpuinfra_gpu_temperature_celsius" not in text


def test_no_driver_no_gpu_series_and_every_query_marked_failed():
    failed = Output(False)
    text = metrics_text({q.name: failed for q in QUERIES}, failed, failed, 0)
    assert "gpuinfra_gpu_info" not in text
    assert set(samples(text, "gpuinfra_gpu_collector_query_ok").values()) == {0}


def test_unreadable_output_counts_as_a_failed_query():
    text = metrics_text({"gpus": Output(True, text="garbage without commas\n")}, None, None, 0)
    assert samples(text, "gpuinfra_gpu_collector_query_ok")['query="gpus"'] == 0


# ---------------------------------------------------------------------------- XIDs

def test_xid_lines_and_the_fallen_off_message_of_real_logs():
    line = (KERNEL_LOG / "nvsentinel-155-xid79-line.txt").read_text()
    assert parse_xids(line) == [XidEvent((0, 0x44, 0), 79)]
    block = (KERNEL_LOG / "nvsentinel-155-fallen-off-bus-without-xid.txt").read_text()
    assert parse_xids(block) == [XidEvent((0, 0xB3, 0), 79)]
    assert parse_xids("NVRM: loading NVIDIA UNIX Open Kernel Module\n") == []


def test_xids_are_counted_per_gpu_and_kept_for_a_gpu_that_vanished():
    # GPU 1 of the HGX capture is 00000000:3B:00.0; an XID 79 for 0000:44:00 has no GPU left.
    log = ("NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception\n"
           "NVRM: Xid (PCI:0000:3b:00): 31, pid=1, MMU Fault\n"
           + (KERNEL_LOG / "nvsentinel-155-xid79-line.txt").read_text())
    text = collect("8x-h100-sxm-nvswitch", log)
    xids = samples(text, "gpuinfra_gpu_xid_errors")
    gpu1 = next(k for k in xids if 'gpu="1"' in k)
    assert xids[gpu1] == 2 and 'pci_bus_id="0000:3b:00"' in gpu1
    assert samples(text, "gpuinfra_gpu_last_xid")[gpu1] == 31
    assert xids['gpu="",uuid="",pci_bus_id="0000:44:00"'] == 1
    assert bus_address("00000000:3B:00.0") == (0, 0x3B, 0)


def test_a_gpu_reset_marked_in_the_kernel_log_clears_that_gpus_earlier_xids():
    """Issue 48: `gpuinfra-health reset-gpu` writes RESET_MARK into the kernel log; XIDs of that
    GPU before it are kept (the epilog counts since the prolog) but no longer judged or counted;
    another GPU's, and the same GPU's after the reset, are."""
    from gpuinfra.monitoring.gpumetrics import RESET_MARK, judge_xids

    fatal = (KERNEL_LOG / "nvsentinel-155-xid79-line.txt").read_text().replace(
        "PCI:0000:44:00", "PCI:0000:3b:00")
    other = "NVRM: Xid (PCI:0000:4c:00): 48, pid=1, DBE\n"
    mark = f"{RESET_MARK} PCI:00000000:3B:00.0 (nvidia-smi -r)\n"
    events = parse_xids(fatal + other + mark)
    assert [(e.address, e.xid, e.cleared) for e in events] == [
        ((0, 0x3B, 0), 79, True), ((0, 0x4C, 0), 48, False)]
    assert [(j.address, j.fatal) for j in judge_xids(events)] == [((0, 0x4C, 0), True)]
    # The same GPU failing again after its reset counts again.
    after = parse_xids(fatal + mark + fatal)
    assert [(j.codes, j.fatal) for j in judge_xids(after)] == [((79,), True)]
    # The collector's series: GPU 1 (00000000:3B:00.0) back to 0, the alert's input clear.
    text = collect("8x-h100-sxm-nvswitch", fatal + mark)
    gpu1 = next(k for k in samples(text, "gpuinfra_gpu_xid_errors") if 'gpu="1"' in k)
    assert samples(text, "gpuinfra_gpu_xid_errors")[gpu1] == 0
    assert samples(collect("8x-h100-sxm-nvswitch", fatal), "gpuinfra_gpu_xid_errors")[gpu1] == 1
    # A mark for another address, or a user's look-alike without the PCI address, clears none.
    assert not parse_xids(fatal + f"{RESET_MARK} PCI:00000000:3C:00.0\n")[0].cleared
    assert not parse_xids(fatal + f"{RESET_MARK} of every GPU\n")[0].cleared


def test_xid_154_after_a_fatal_xid_is_read_with_its_recovery_action():
    """Real R565+ logs: the fatal XID, then Xid 154 with the action the driver wants."""
    gsp = (KERNEL_LOG / "nvidia-forum-364958-xid120-then-154.txt").read_text()
    assert parse_xids(gsp) == [XidEvent((0, 1, 0), 120), XidEvent((0, 1, 0), 154, 1)]
    pmu = (KERNEL_LOG / "nvidia-forum-364958-xid62-then-154.txt").read_text()
    assert [(e.xid, e.recovery_action) for e in parse_xids(pmu)] == [(62, None), (154, 1),
                                                                      (45, None)]
    reboot = ("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) "
              "to 0x2 (Node Reboot Required)\n")
    assert parse_xids(reboot)[0].recovery_action == 2


def test_every_code_since_boot_is_counted_not_only_the_last():
    """Xid 62, 154 (reset required), then 45 (an application's channel): the last XID is 45,
    yet the reset the driver asked for and the 62 before it are both in the metrics."""
    log = (KERNEL_LOG / "nvidia-forum-364958-xid62-then-154.txt").read_text()
    text = collect("8x-h100-sxm-nvswitch", log)
    lost = 'gpu="",uuid="",pci_bus_id="0000:01:00"'
    assert samples(text, "gpuinfra_gpu_last_xid")[lost] == 45
    by_code = samples(text, "gpuinfra_gpu_xid_errors_by_code")
    assert {k: v for k, v in by_code.items() if k.startswith(lost)} == {
        f'{lost},xid="45"': 1, f'{lost},xid="62"': 1, f'{lost},xid="154"': 1}
    assert samples(text, "gpuinfra_gpu_recovery_action") == {lost: 1}
    # GPUs without any XID: a 0 total, no per-code and no recovery-action series.
    assert "gpuinfra_gpu_xid_errors_by_code{gpu=\"0\"" not in text
    assert samples(text, "gpuinfra_gpu_xid_errors")[
        'gpu="0",uuid="GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa",pci_bus_id="0000:19:00"'] == 0


# ---------------------------------------------------------------------------- exposition

def test_text_is_valid_exposition_format(promtool):
    text = collect("8x-h100-sxm-nvswitch")
    run = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                         text=True, check=False)
    # promtool lints names too (e.g. counters must end in _total): only errors fail here.
    assert "error while linting" not in run.stderr + run.stdout, run.stderr


# ---------------------------------------------------------------------------- the collector

def test_collector_runs_alone_with_the_modules_it_ships(tmp_path):
    """The files the role installs, copied to an empty folder and run with ``python3 -I``
    (no repository on the path), against the replayed 8x H100: the shipped set is complete."""
    lib = tmp_path / "lib"
    for path, data in collector_files().items():
        target = lib / path.removeprefix("/usr/local/lib/gpuinfra-gpu-metrics/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    shutil.copy(REPLAY, smi)
    smi.chmod(0o755)
    out = tmp_path / "gpu.prom"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin",
           "GPUINFRA_LAB_HARDWARE": str(HARDWARE / "8x-h100-sxm-nvswitch")}
    run = subprocess.run(["python3", "-I", "-S", str(lib / "collect.py"), "--out", str(out)],
                         capture_output=True, text=True, check=False, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    assert len(samples(text, "gpuinfra_gpu_info")) == 8
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    assert not list(tmp_path.glob(".gpu.prom.*"))  # no temporary file left behind


@pytest.fixture
def promtool():
    from tests.unit.test_monitoring_rules import promtool_path

    return promtool_path()


def test_a_driver_failure_without_an_xid_line_is_a_series():
    """Issue 47: the collector reads the same driver failures as the health check and check
    --dmesg (open-gpu-kernel-modules#1230: GPU6's GSP heartbeat, then a memory subsystem error),
    one series each, which GpuDriverFailure alerts on."""
    from gpuinfra.health.collect import Output
    from gpuinfra.monitoring.gpumetrics import metrics_text

    log = (KERNEL_LOG / "open-gpu-kernel-modules-1230-gsp-heartbeat-memsys-error-no-xid.txt"
           ).read_text()
    text = metrics_text({}, None, Output(True, 0, log), 0.0)
    assert 'gpuinfra_gpu_driver_failures{driver_gpu="6",failure="GSP heartbeat timed out"} 1' \
        in text
    assert 'failure="memory subsystem error"} 1' in text
