"""`gpuinfra report` on a junit XML of the verify suite (no lab needed)."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_read_junit_keeps_every_testcase_with_outcomes_and_properties() -> None:
    cases = report.read_junit(JUNIT)
    assert [(c.node, c.test, c.outcome) for c in cases] == [
        ("head1", "test_chrony", "passed"), ("head1", "test_sshd", "passed"),
        ("gpu1", "test_sysctls", "failed"), ("gpu1", "test_gpu_count", "passed"),
        ("gpu1", "test_p2p", "failed"), ("gpu1", "test_nvlink_links", "skipped"),
        ("", "test_plain", "passed"),  # not per node: counted, said apart
    ]
    assert cases[0].module == "test_common" and cases[0].props == {"chrony": "running, enabled"}


def test_render_gives_each_node_its_verdicts() -> None:
    text, code = report.render(_spec(), report.read_junit(JUNIT), "gpuinfra_verify.xml")
    assert code == 1
    assert text.splitlines() == [
        "gpuinfra report: 3 nodes, 7 checks: 4 passed, 2 failed, 1 skipped (gpuinfra_verify.xml)",
        "  6 per node, 1 not per node (1 cluster-wide: 1 passed)",
        "head1  pass  2 checks: 2 passed",
        "gpu1   FAIL  4 checks: 1 passed, 2 failed, 1 skipped",
        "  GPUs       expected 2x H100-PCIE-80GB (bridged-pairs), seen 2x NVIDIA H100 PCIe",
        "  topology   FAIL test_p2p (cause 2)",
        "  base role  FAIL test_sysctls (cause 1)",
        "gpu2   not checked (no test results for this node)",
        "failures by cause (2 causes, 2 failed checks):",
        "[1] test_sysctls: sysctls differ:",
        "    on: gpu1 test_sysctls",
        "[2] test_p2p: gpu1: 2 failed check(s)",
        "    on: gpu1 test_p2p",
        "verdict: FAILED (nodes: 1 passed, 1 failed, 1 not checked)",
    ]
    assert "?" not in text and "NOTSET" not in text


def test_render_passes_when_nothing_failed() -> None:
    cases = [c for c in report.read_junit(JUNIT) if c.outcome != "failed"]
    text, code = report.render(_spec(), cases, "x")
    assert code == 0 and text.endswith("verdict: all checks passed (nodes: 2 passed, "
                                       "1 not checked)")


def test_a_node_whose_checks_all_skipped_is_not_checked_never_pass() -> None:
    skipped = """<testsuites><testsuite>
 <testcase classname="gpuinfra_verify.test_driver" name="test_driver_branch[gpu1]">
  <skipped type="pytest.skip" message="reboot pending: driver 550 installed">x</skipped>
 </testcase></testsuite></testsuites>"""
    text, code = report.render(_spec(), report.read_junit(skipped), "x")
    assert "gpu1   not checked (reboot pending: driver 550 installed)" in text.splitlines()
    assert "pass" not in text.split("verdict:")[0].replace("passed", "")
    assert text.endswith("NOT CHECKED (nothing ran) (nodes: 3 not checked)") and code == 0


def test_the_lab_runs_counts_agree_with_pytest_and_lines_fit() -> None:
    """The real broken-lab run (tests/report_fixtures.py): pytest said 134 passed, 7 failed,
    47 skipped (the testsuite's own counts); the report says the same, every line <= 100."""
    import xml.etree.ElementTree as ET

    from tests.report_fixtures import lab_junit, lab_spec

    for healthy in (False, True):
        xml = lab_junit(healthy)
        suite = ET.fromstring(xml).find("testsuite")
        assert suite is not None
        tests, failed, skipped = (int(suite.get(k, "0")) for k in ("tests", "failures",
                                                                    "skipped"))
        text, code = report.render(lab_spec(healthy), report.read_junit(xml), "run.xml")
        first = text.splitlines()[0]
        said = f"{tests} checks: {tests - failed - skipped} passed" + \
            (f", {failed} failed" if failed else "") + f", {skipped} skipped"
        assert said in first, first
        assert all(len(line) <= report.WIDTH for line in text.splitlines())
        assert code == (0 if healthy else 1)
        assert "?" not in text and "NOTSET" not in text
    assert (tests, failed, skipped) == (141, 0, 38)
    broken = report.render(lab_spec(), report.read_junit(lab_junit()), "x")[0]
    assert broken.count("NVLink bridge not detected") == 1  # each cause once
    for healthy_node in ("lab-head", "lab-worker1", "lab-worker2"):
        assert sum(line.startswith(healthy_node) for line in broken.splitlines()) == 1


def _fabric_down_junit() -> str:
    """test_gpu on an HGX H100 node whose topo -m is all SYS (a real 8-GPU PCIe capture): the
    properties test_gpu records, made by its own functions."""
    from gpuinfra.parsers.topo import parse_topo
    from gpuinfra.verdicts import check_system
    from gpuinfra_verify import matrices
    from tests.conftest import REPO

    topo = parse_topo((REPO / "tests/fixtures/real/nvidia-smi-topo-m/"
                       "8x-pcie-gpu-all-sys-2-numa-no-nics.txt").read_text())
    findings = check_system("nvswitch-all-to-all", 8, "H100-SXM5-80GB", topo=topo)
    seen = matrices.nvlink_seen(topo)
    props = {matrices.NVLINK_SEEN: matrices.dump(seen),
             matrices.NVLINK_EXPECTED: matrices.dump(matrices.nvlink_expected(findings,
                                                                              seen["gpus"])),
             matrices.FAILED: matrices.dump(matrices.failed_findings(
                 f for f in findings if f.check == "nvlink-topology"))}
    xml = "".join(f'<property name="{k}" value="{html.escape(v)}"/>' for k, v in props.items())
    return (f'<testsuites><testsuite><testcase classname="gpuinfra_verify.test_gpu" '
            f'name="test_nvlink_topology[hgx1]"><properties>{xml}</properties>'
            f'<failure message="hgx1: 28 failed check(s)">x</failure></testcase>'
            f'</testsuite></testsuites>')


def _hgx_spec():
    return build_cluster([HostInput("head1", ("head",), {}), HostInput("hgx1", ("workers",), {
        "gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"})])


def test_a_whole_fabric_failure_is_one_finding_not_28() -> None:
    built = report.build(_hgx_spec(), report.read_junit(_fabric_down_junit()), "x")
    (group,) = built.causes
    assert group.cause.startswith("NVSwitch fabric not up")
    assert group.subjects == ("hgx1 all 28 pairs",)
    text = report.render_report(built)
    assert "on: hgx1 all 28 pairs" in text and "bridge" not in text
    # the matrix still has every pair, each red with the cause
    assert len(built.nodes[1].nvlink["causes"]) == 28


def test_json_is_the_envelope_with_nodes() -> None:
    from gpuinfra.envelope import SCHEMA
    from tests.report_fixtures import lab_junit, lab_spec

    built = report.build(lab_spec(), report.read_junit(lab_junit()), "run.xml")
    body = report.to_json(built, ["run.xml"])
    assert body["schema"] == SCHEMA and body["kind"] == "report" and body["verdict"] == "fail"
    assert body["tests"] == {"passed": 134, "failed": 7, "error": 0, "skipped": 47,
                             "total": 188, "not_per_node": 31}
    assert body["inputs"] == ["run.xml"] and body["summary"]["skipped"] == 47
    nodes = {n["node"]: n for n in body["nodes"]}
    assert nodes["lab-worker3"]["verdict"] == "fail" and nodes["lab-worker1"]["verdict"] == "pass"
    assert nodes["lab-worker3"]["nvlink"]["seen"] == [["X", "PIX"], ["PIX", "X"]]
    assert nodes["lab-worker3"]["nvlink"]["expected"] == [["X", "NV>=12"], ["NV>=12", "X"]]
    assert len(nodes["lab-worker1"]["p2p"]["r"]) == 8
    assert [c["cause"][:12] for c in body["causes"]].count("NVLink bridg") == 1
    json.dumps(body)  # plain data


def test_html_escapes_every_value() -> None:
    from gpuinfra_verify.report_html import render_html

    evil = """<testsuites><testsuite>
 <testcase classname="gpuinfra_verify.test_common" name="test_chrony[head1]">
  <properties><property name="chrony" value="&lt;script&gt;alert(1)&lt;/script&gt;"/>
  </properties><failure message="x">head1: &lt;img src=x onerror=alert(1)&gt;
  cause: &lt;b&gt;bold&lt;/b&gt; &amp; "quoted"
  fix: run `a &lt; b`</failure></testcase></testsuite></testsuites>"""
    page = render_html(report.build(_spec(), report.read_junit(evil), "<x>.xml"))
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;x&gt;.xml" in page
    assert "http" not in page.replace("gpuinfra", "")  # no external asset


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
    assert "0 checks: none run" in out.stdout and "not checked (no test results" in out.stdout


def test_cli_rejects_a_file_that_is_not_junit(tmp_path: Path) -> None:
    junit = tmp_path / "gpuinfra_verify.xml"
    junit.write_text("not xml")
    out = _cli("--inventory", "inventory/lab.py", "--junit", str(junit))
    assert out.returncode == 2 and "not a junit XML file" in out.stderr


# ---------------------------------------------------------------------------- jobs (--smoke)


def _smoke_envelope(tmp_path: Path, log: str, name: str) -> Path:
    """What `gpuinfra smoke check LOG --json` prints for ``log``, in a file."""
    out = subprocess.run([sys.executable, "-m", "gpuinfra_cli.main", "smoke", "check", "-",
                          "--json"], cwd=REPO, input=log, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode in (0, 1), out.stderr
    path = tmp_path / name
    path.write_text(out.stdout)
    return path


def test_a_passed_smoke_job_is_said_and_a_failed_one_fails_the_report(tmp_path: Path) -> None:
    from gpuinfra_verify.report_html import render_html
    from tests.report_fixtures import lab_spec
    from tests.unit.test_smoke import CRASHED, GOOD

    passing = """<testsuites><testsuite>
 <testcase classname="gpuinfra_verify.test_common" name="test_chrony[lab-head]"/>
 </testsuite></testsuites>"""
    cases = report.read_junit(passing)
    good = report.job_result(json.loads(_smoke_envelope(tmp_path, GOOD, "good.json")
                                        .read_text()), "good.json")
    assert (good.verdict, good.ranks, good.world_size, good.hosts) == (
        "pass", 2, 2, ("lab-worker1", "lab-worker2"))
    assert good.busbw_gbytes_per_s == 0.9 and good.step_ms == 4.2
    built = report.build(lab_spec(), cases, "run.xml", [good])
    assert built.verdict == "pass"
    text = report.render_report(built)
    assert "smoke job: PASS: 2 of 2 ranks on lab-worker1, lab-worker2 (gloo), all-reduce " \
        "0.9 GB/s" in text and text.endswith("(nodes: 1 passed, 3 not checked; jobs: 1 pass)")
    assert report.to_json(built)["jobs"][0]["verdict"] == "pass"

    bad = report.job_result(json.loads(_smoke_envelope(tmp_path, CRASHED, "bad.json")
                                       .read_text()), "bad.json")
    built = report.build(lab_spec(), cases, "run.xml", [bad])
    assert bad.verdict == "fail" and built.verdict == "fail"
    body = report.to_json(built)
    assert body["verdict"] == "fail" and body["jobs"][0]["ranks"] == 1
    assert any("lab-worker2" in " ".join(g["subjects"]) for g in body["causes"])
    text = report.render_report(built)
    assert "smoke job: FAIL: 1 of 2 ranks" in text and text.endswith(
        "FAILED (nodes: 1 passed, 3 not checked; jobs: 1 fail)")
    page = render_html(built)
    assert 'id="jobs"' in page and 'data-verdict="fail"' in page and "lab-worker2" in page


def test_cli_refuses_a_smoke_file_that_is_no_smoke_result(tmp_path: Path) -> None:
    junit = tmp_path / "v.xml"
    junit.write_text("<testsuites/>")
    other = tmp_path / "check.json"
    other.write_text(json.dumps({"schema": "gpuinfra/v1", "kind": "check", "verdict": "pass"}))
    out = _cli("--inventory", "inventory/lab.py", "--junit", str(junit), "--smoke", str(other))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{other}: not a smoke job's result (kind 'check'" in out.stderr
    (tmp_path / "cut.json").write_text('{"kind": "smoke"')
    out = _cli("--inventory", "inventory/lab.py", "--junit", str(junit),
               "--smoke", str(tmp_path / "cut.json"))
    assert out.returncode == 2 and "cut.json: not JSON" in out.stderr
    out = _cli("--inventory", "inventory/lab.py", "--junit", str(junit),
               "--smoke", str(tmp_path / "none.json"))
    assert out.returncode == 2 and "none.json: cannot be read" in out.stderr


def test_the_report_shows_the_fabric_with_each_nodes_verdict() -> None:
    """Issue 45 item 8: which nodes hang on which switch, in the text and on the page."""
    from gpuinfra_verify.report_html import render_html

    hosts = [HostInput("head1", ("head",), {}),
             HostInput("gpu1", ("workers",), {}), HostInput("gpu2", ("workers",), {})]
    fabric = {"fabric_switches": {"leaf1": ["gpu1"], "leaf2": ["gpu2"],
                                  "spine": ["leaf1", "leaf2"]}}
    spec = build_cluster([HostInput(h.name, h.groups, {**h.data, **fabric}) for h in hosts])
    built = report.build(spec, report.read_junit(JUNIT), "verify.xml")
    assert built.fabric == [("leaf1", "nodes", ["gpu1"]), ("leaf2", "nodes", ["gpu2"]),
                            ("spine", "switches", ["leaf1", "leaf2"])]
    text = report.render_report(built)
    assert "fabric (3 switches" in text and "leaf2 (nodes): gpu2" in text
    page = render_html(built)
    assert 'id="fabric"' in page and "spine" in page
    assert report.build(_spec(), report.read_junit(JUNIT), "verify.xml").fabric == []
    assert 'id="fabric"' not in render_html(report.build(_spec(), report.read_junit(JUNIT),
                                                         "verify.xml"))
    # NVLink blocks (fabric_blocks, topology/block): each block and its nodes.
    blocks = {"fabric_blocks": {"rack1": ["gpu1"], "rack2": ["gpu2"]}}
    racks = report.build(build_cluster([HostInput(h.name, h.groups, {**h.data, **blocks})
                                        for h in hosts]), report.read_junit(JUNIT), "verify.xml")
    assert racks.fabric == [("rack1", "nodes", ["gpu1"]), ("rack2", "nodes", ["gpu2"])]
    assert "fabric (2 NVLink blocks" in report.render_report(racks)
    assert "Fabric (2 NVLink blocks)" in render_html(racks)


@pytest.mark.parametrize("sudo", [False, True])
def test_the_suite_runs_through_sudo_when_asked(tmp_path: Path, monkeypatch, sudo) -> None:
    """Issue 48 item 4: `report --sudo` hands testinfra's --sudo to the suite (every command
    through sudo, gpuinfra_verify/ssh.testinfra_host); without it, none."""
    from gpuinfra_cli import report as cli

    ran: list[list[str]] = []
    monkeypatch.setattr(cli.subprocess, "run",
                        lambda command, **kw: ran.append(command) or
                        subprocess.CompletedProcess(command, 5))
    rc = cli._run_suite("inventory/lab.py", tmp_path / "v.xml", "0", sudo=sudo)
    assert rc == 5 and ("--sudo" in ran[0]) is sudo


def test_a_non_root_user_without_sudo_is_one_cause_naming_sudo() -> None:
    """The suite as a non-root SSH user without --sudo would fail root-only checks under wrong
    causes (seen in the lab: 23 failures under 10, "the key was changed by hand" among them):
    each of that host's checks fails on one cause naming --sudo instead, which the report
    reads as its cause and fix; root, or commands through sudo, pass."""
    from types import SimpleNamespace as NS

    from gpuinfra_verify import conftest

    def host(uid: str, user: str):
        answers = {"id -u": NS(rc=0, stdout=uid + "\n"), "id -un": NS(rc=0, stdout=user)}
        return NS(run=lambda command: answers[command])

    conftest._ROOT.clear()
    said = conftest._not_root(host("1001", "deploy"), "lab-worker1")
    assert said.startswith("lab-worker1: the SSH user deploy is not root and the suite runs "
                           "without --sudo\n  cause: ")
    case = report.JunitCase(node="lab-worker1", module="test_common", test="test_sysctls",
                            outcome="failed", message=said.splitlines()[0], detail=said)
    [finding] = report.failure_findings(case)
    assert finding["cause"].startswith("the checks read what only root may")
    assert finding["fix"].startswith("run `gpuinfra report --inventory <site> --sudo`")
    assert conftest._not_root(host("0", "root"), "lab-head") == ""
