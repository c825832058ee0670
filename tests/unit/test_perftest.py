"""The per-NIC check: `ib_write_bw` parser on real runs, the floors, and `gpuinfra perftest check`.

Inputs marked DERIVED are real runs (tests/fixtures/perftest/INDEX.md) with a named edit.
"""

from __future__ import annotations

import json
import re

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.knowledge.network import nic_floor
from gpuinfra.parsers.perftest import parse_ib_write_bw
from gpuinfra.rdma.perftest import judge_ib_write_bw
from gpuinfra_cli.main import main
from tests.conftest import REAL, REPO

PERFTEST = REPO / "tests" / "fixtures" / "perftest"
RAIL1 = PERFTEST / "dgx-spark-cx7-rail1-rocep1s0f0-ib-write-bw-report-gbits.txt"
RAIL2 = PERFTEST / "dgx-spark-cx7-rail2-rocep2p1s0f0-ib-write-bw-report-gbits.txt"


def test_real_runs_parse():
    one = parse_ib_write_bw(RAIL1.read_text())
    assert (one.device, one.link_type, one.unit) == ("rocep1s0f0", "Ethernet", "Gb/sec")
    assert one.largest == 65536 and one.lowest_at_largest == 92.56
    assert all(row.peak_gbps == 0.0 for row in one.rows)  # --run_infinitely: no peak
    two = parse_ib_write_bw(RAIL2.read_text())
    # The banner prints the device as "roceP2p1s0f0" although the command named rocep2p1s0f0:
    # the run is named as the banner prints it.
    assert (two.device, two.lowest_at_largest) == ("roceP2p1s0f0", 97.28)


def test_megabytes_are_read_as_perftest_writes_them():
    # DERIVED: the rail-2 run as perftest prints it without --report_gbits (MB = 2^20 bytes).
    text = RAIL2.read_text().replace("[Gb/sec]", "[MB/sec]").replace("97.28 ", "11596.68 ", 1)
    run = parse_ib_write_bw(text)
    assert run.unit == "MB/sec" and run.rows[0].average_gbps == 97.28


def test_mebibytes_of_perftest_24_07_and_later_are_read():
    # DERIVED: the rail-2 run as perftest >= 24.07.0 prints it without --report_gbits
    # ("BW peak[MiB/sec]", linux-rdma/perftest commit 1d202bb).
    text = RAIL2.read_text().replace("[Gb/sec]", "[MiB/sec]").replace("97.28 ", "11596.68 ", 1)
    run = parse_ib_write_bw(text)
    assert run.unit == "MiB/sec" and run.rows[0].average_gbps == 97.28


def test_a_400g_nic_at_365_passes_as_azures_gb200_check_does():
    # DERIVED: the rail-1 run scaled to 365 Gb/s, between Azure's GB200 floor (360) and the
    # ND H100 v5 one (375): healthy on Azure's own lowest floor for the rate.
    text = RAIL1.read_text()
    for rate in set(re.findall(r"\b(9[0-9]\.[0-9]{2})\b", text)):
        text = text.replace(f" {rate} ", " 365.00 ")
    run = parse_ib_write_bw(text)
    assert run.lowest_at_largest == 365.0
    assert [f.severity for f in judge_ib_write_bw(run, 400)] == ["ok"]


def test_floors_per_rate():
    # Azure's GB200 conf (@215c644): check_ib_bw_gdr 360 on its 400 Gb/s NDR NICs, the lowest
    # value Azure uses for the rate (ND H100 v5: 375, 380).
    assert nic_floor(400).gbps == 360.0 and "nd128isr_ndr_gb200_v6" in nic_floor(400).source
    assert nic_floor(200).gbps == 180.0 and nic_floor(100).gbps == 78.0
    assert nic_floor(800).gbps == 720.0 and "inferred" in nic_floor(800).source


def test_real_runs_pass_at_their_usable_rate_and_fail_at_the_port_rate():
    run = parse_ib_write_bw(RAIL1.read_text())
    assert [f.severity for f in judge_ib_write_bw(run, 100)] == ["ok"]
    failed = judge_ib_write_bw(run, 200)[0]
    assert failed.failed and failed.subject == "rocep1s0f0"
    assert failed.observed == "92.56 Gb/s at 65536 B (Ethernet)"
    assert failed.expected.startswith(">= 180 Gb/s for a 200 Gb/s NIC")
    assert "ibstat" in failed.fix and "PCIe" in failed.cause


def test_a_degraded_row_fails():
    # DERIVED: one second of the rail-1 run at half rate.
    text = RAIL1.read_text().replace("92.56 ", "46.20 ", 1)
    finding = judge_ib_write_bw(parse_ib_write_bw(text), 100)[0]
    assert finding.failed and finding.observed.startswith("46.2 Gb/s")


def test_small_messages_are_not_judged_as_bandwidth():
    text = RAIL1.read_text().replace(" 65536      ", " 4096       ")  # DERIVED: 4 KiB rows
    finding = judge_ib_write_bw(parse_ib_write_bw(text), 100)[0]
    assert finding.failed and "too small" in finding.cause and "-s 8388608" in finding.fix


@pytest.mark.parametrize(("edit", "words"), [
    (("RDMA_Write BW Test", "RDMA_Write Bidirectional BW Test"), "bidirectional"),
    (("RDMA_Write BW Test", "RDMA_Read BW Test"), "RDMA_Read BW Test, not"),
    (("RDMA_Write BW Test", "RDMA_Write Latency"), "no 'RDMA_Write BW Test' banner"),
])
def test_other_perftest_outputs_are_refused(edit, words):
    text = RAIL1.read_text().replace(*edit)  # DERIVED: the banner of another test
    with pytest.raises(ParseError, match=words):
        parse_ib_write_bw(text)


def test_a_run_without_results_is_refused():
    text = RAIL1.read_text()
    cut = text[:text.index(" #bytes")]  # DERIVED: the client stopped before any result
    with pytest.raises(ParseError, match="no result rows"):
        parse_ib_write_bw(cut)


@pytest.mark.parametrize("path", sorted(p for p in REAL.rglob("*.txt")))
def test_real_outputs_of_other_commands_are_refused(path):
    with pytest.raises(ParseError):
        parse_ib_write_bw(path.read_text(encoding="utf-8", errors="replace"))


def test_cli_judges_each_nic(capsys):
    assert main(["perftest", "check", str(RAIL1), str(RAIL2), "--nic-gbps", "100"]) == 0
    out = capsys.readouterr().out
    assert "rocep1s0f0" in out and "roceP2p1s0f0" in out
    assert main(["perftest", "check", str(RAIL1), str(RAIL2), "--nic-gbps", "200",
                 "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [f["severity"] for f in findings] == ["fail", "fail"]


@pytest.mark.parametrize(("args", "words"), [
    (["--nic-gbps", "0"], "must be a positive rate"),
    (["--nic-gbps", "100", "--", "missing.txt"], "cannot be read"),
])
def test_cli_bad_input_exits_2(capsys, args, words):
    logs = [] if "missing.txt" in args else [str(RAIL1)]
    assert main(["perftest", "check", *logs, *args]) == 2
    assert words in capsys.readouterr().err


def test_cli_names_the_log_it_cannot_read(capsys):
    other = REAL / "ibstat"
    log = sorted(other.iterdir())[0]
    assert main(["perftest", "check", str(log), "--nic-gbps", "100"]) == 2
    assert log.name in capsys.readouterr().err


def test_a_100g_floor_is_the_rate_s_for_large_messages(tmp_path, capsys):
    """Issue 47 (DERIVED from RAIL1: its first row made an 8 MiB row at 81.02 Gb/s): 81 Gb/s
    at 8 MiB on a 100 Gb/s NIC passed Azure's 78 Gb/s floor, which is for 64 KiB messages; with
    larger messages the floor is 0.90 of the rate (90), as the 200/400 Gb/s floors are."""
    assert nic_floor(100, 65536).gbps == 78.0 and nic_floor(100, 8388608).gbps == 90.0
    assert nic_floor(400, 8388608).gbps == 360.0  # the measured floors stay
    slow = tmp_path / "slow.txt"
    slow.write_text(RAIL1.read_text().replace(
        " 65536      882805           0.00               92.57",
        " 8388608    6000             0.00               81.02"))
    assert main(["perftest", "check", str(slow), "--nic-gbps", "100"]) == 1
    assert ">= 90 Gb/s" in capsys.readouterr().out

