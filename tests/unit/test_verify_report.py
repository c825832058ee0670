"""`gpuinfra report` on a junit XML of the verify suite (no lab needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuinfra.spec import HostInput, build_cluster
from gpuinfra_verify import report
from tests.conftest import REPO

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="6">
 <testcase classname="gpuinfra_verify.test_common" name="test_chrony[head1]" time="0.1">
  <properties><property name="chrony" value="running, enabled"/></properties></testcase>
 <testcase classname="gpuinfra_verify.test_common" name="test_sshd[head1]" time="0.1">
  <properties><property name="sshd" value="running, enabled"/></properties></testcase>
 <testcase classname="gpuinfra_verify.test_common" name="test_sysctls[gpu1]" time="0.1">
  <failure message="AssertionError: sysctls differ:&#10;  a: expected 1">...</failure></testcase>
 <testcase classname="gpuinfra_verify.test_gpu" name="test_gpu_count[gpu1]" time="0.1">
  <properties><property name="gpus_seen" value="2x NVIDIA H100 PCIe"/></properties></testcase>
 <testcase classname="gpuinfra_verify.test_gpu" name="test_p2p[gpu1]" time="0.1">
  <properties><property name="failure" value="p2p-r GPU0-GPU1: expected OK, observed NS; NS"/>
  </properties><failure message="gpu1: 2 failed check(s)">...</failure></testcase>
 <testcase classname="gpuinfra_verify.test_gpu" name="test_nvlink_links[gpu1]" time="0.1">
  <skipped type="pytest.skip" message="no checks">...</skipped></testcase>
 <testcase classname="tests.unit.test_x" name="test_plain" time="0.1"/>
</testsuite></testsuites>
"""


def _spec():
    hosts = [
        HostInput("head1", ("head",), {}),
        HostInput("gpu1", ("workers",), {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
                                         "gpu_topology": "bridged-pairs"}),
        HostInput("gpu2", ("workers",), {}),
    ]
    return build_cluster(hosts)


def test_read_junit_keeps_node_tests_with_outcomes_and_properties() -> None:
    cases = report.read_junit(JUNIT)
    assert [(c.node, c.test, c.outcome) for c in cases] == [
        ("head1", "test_chrony", "passed"), ("head1", "test_sshd", "passed"),
        ("gpu1", "test_sysctls", "failed"), ("gpu1", "test_gpu_count", "passed"),
        ("gpu1", "test_p2p", "failed"), ("gpu1", "test_nvlink_links", "skipped"),
    ]
    assert cases[0].module == "test_common" and cases[0].props == {"chrony": "running, enabled"}


def test_render_gives_each_node_its_verdicts() -> None:
    text, code = report.render(_spec(), report.read_junit(JUNIT), "gpuinfra_verify.xml")
    assert code == 1
    assert text.splitlines() == [
        "gpuinfra report: 3 nodes, 6 checks: 3 passed, 2 failed, 1 skipped (gpuinfra_verify.xml)",
        "head1 (head)",
        "  GPUs       none in the spec",
        "  base role  pass (2 checks)",
        "  services   chrony running, enabled; sshd running, enabled",
        "gpu1 (workers)",
        "  GPUs       expected 2x H100-PCIE-80GB (bridged-pairs), seen 2x NVIDIA H100 PCIe",
        "  topology   FAIL p2p-r GPU0-GPU1: expected OK, observed NS; NS",
        "  base role  FAIL test_sysctls: AssertionError: sysctls differ:",
        "  services   chrony ?; sshd ?",
        "gpu2 (workers)",
        "  GPUs       none in the spec",
        "  not verified: no test results for this node",
        "verdict: FAILED",
    ]


def test_render_passes_when_nothing_failed() -> None:
    cases = [c for c in report.read_junit(JUNIT) if c.outcome != "failed"]
    text, code = report.render(_spec(), cases, "x")
    assert code == 0 and text.endswith("verdict: all checks passed")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`gpuinfra report` in a child process (loading an inventory imports pyinfra_cli, which
    monkey-patches the interpreter with gevent: keep that out of the test process)."""
    return subprocess.run([sys.executable, "-m", "gpuinfra_cli.report", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_cli_reads_a_junit_file(tmp_path: Path) -> None:
    junit = tmp_path / "gpuinfra_verify.xml"
    junit.write_text("<testsuites/>")
    out = _cli("--inventory", "inventory/lab.py", "--junit", str(junit))
    assert out.returncode == 0, out.stderr
    assert "0 checks: none run" in out.stdout and "not verified" in out.stdout


def test_cli_rejects_a_file_that_is_not_junit(tmp_path: Path) -> None:
    junit = tmp_path / "gpuinfra_verify.xml"
    junit.write_text("not xml")
    out = _cli("--inventory", "inventory/lab.py", "--junit", str(junit))
    assert out.returncode == 2 and "not a junit XML file" in out.stderr
