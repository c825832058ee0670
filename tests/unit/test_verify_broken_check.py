"""molecule/broken-nvlink/check_junit.py: the scenario passes only on the expected diagnosis."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from gpuinfra_verify.report import JunitCase
from tests.conftest import REPO


def _check() -> ModuleType:
    path = REPO / "molecule" / "broken-nvlink" / "check_junit.py"
    spec = importlib.util.spec_from_file_location("check_junit", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _check()
BROKEN = "lab-worker3"


def _diagnosed() -> list[JunitCase]:
    return [
        JunitCase("lab-head", "test_common", "test_chrony", "passed"),
        JunitCase("lab-worker2", "test_gpu", "test_p2p", "passed"),
        JunitCase(BROKEN, "test_common", "test_chrony", "passed"),
        JunitCase(BROKEN, "test_gpu", "test_gpu_count", "passed"),
        JunitCase(BROKEN, "test_gpu", "test_nvlink_topology", "failed",
                  "nvlink-topology GPU0-GPU1: ... cause: NVLink bridge not detected"),
        JunitCase(BROKEN, "test_gpu", "test_p2p", "failed", "p2p-r GPU0-GPU1: observed NS"),
        JunitCase(BROKEN, "test_gpu", "test_nvlink_links", "failed", "all links inactive"),
        JunitCase(BROKEN, "test_health", "test_node_healthy", "failed",
                  "gpuinfra: GPU0-GPU1 nvlink-topology: PIX, want NV>=12 (+4 more)"),
        JunitCase(BROKEN, "test_health", "test_not_drained_by_health", "failed",
                  "drained by the health check: gpuinfra: GPU0-GPU1 nvlink-topology: PIX"),
        JunitCase(BROKEN, "test_slurm", "test_node_takes_jobs", "failed",
                  "lab-worker3 is drained: gpuinfra: GPU0-GPU1 nvlink-topology: PIX"),
    ]


def test_the_expected_diagnosis_passes() -> None:
    assert check.problems(_diagnosed(), BROKEN) == []


def test_a_healthy_broken_worker_fails_the_scenario() -> None:
    cases = [c for c in _diagnosed() if c.node != BROKEN or c.outcome == "passed"]
    cases.append(JunitCase(BROKEN, "test_gpu", "test_p2p", "passed"))
    assert check.problems(cases, BROKEN) == [
        "test_nvlink_topology[lab-worker3] did not run",
        "test_node_healthy[lab-worker3] did not run",
        "test_not_drained_by_health[lab-worker3] did not run",
        "test_node_takes_jobs[lab-worker3] did not run",
        "test_p2p[lab-worker3] passed, expected it to fail",
    ]


def test_wrong_cause_or_other_failures_fail_the_scenario() -> None:
    cases = _diagnosed()
    cases[4] = JunitCase(BROKEN, "test_gpu", "test_nvlink_topology", "failed", "links down")
    cases.append(JunitCase("lab-head", "test_common", "test_hostname", "failed", "wrong name"))
    cases.append(JunitCase(BROKEN, "test_common", "test_sysctls", "failed", "sysctls differ"))
    found = check.problems(cases, BROKEN)
    assert len(found) == 3
    assert "without naming 'bridge'" in found[0]
    assert "healthy host" in found[1] and "unexpectedly" in found[2]


def test_no_broken_worker_fails_the_scenario() -> None:
    cases = [c for c in _diagnosed() if c.node != BROKEN]
    assert check.problems(cases, BROKEN) == [
        "no results for lab-worker3: was the lab started with --broken?",
    ]
