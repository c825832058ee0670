"""Pass only when the verify suite caught the broken worker, and nothing else failed.

    .venv/bin/python molecule/broken-nvlink/check_junit.py VERIFY.xml [BROKEN_HOST]

BROKEN_HOST defaults to the worker `gpuinfra lab up --broken` adds (gpuinfra_lab/profiles.py).

The broken worker (lab-worker3, `gpuinfra lab up --broken`) is specified as NVLink-bridged
pairs but replays PCIe-only hardware with P2P "NS". Expected: its nvlink-topology test fails
naming the bridge, its p2p test fails naming NS (its nvlink-links test may fail too: all links
inactive, same bridge cause), the node health check finds the same and Slurm has drained it
with that cause (so its own one-GPU job may not run), and every test on every other host
passes or skips.
Exit 0 when so, 1 listing what differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuinfra_lab.profiles import broken_host
from gpuinfra_verify.report import JunitCase, read_junit

# Broken host's tests that must fail, with a word their message must contain.
MUST_FAIL = {"test_nvlink_topology": "bridge", "test_p2p": "NS",
             # the node health check (roles/health) judged it the same way, and
             # Slurm drained it with that cause: no job lands there
             "test_node_healthy": "nvlink-topology", "test_not_drained_by_health": "gpuinfra:",
             "test_node_takes_jobs": "gpuinfra:"}
MAY_FAIL = {"test_nvlink_links", "test_job_gets_only_its_gpu"}


def problems(cases: list[JunitCase], broken: str) -> list[str]:
    """What differs from the expected outcome ([] when the suite diagnosed the broken host)."""
    found: list[str] = []
    if not any(c.node == broken for c in cases):
        return [f"no results for {broken}: was the lab started with --broken?"]
    ran = {c.test for c in cases if c.node == broken}
    found += [f"{test}[{broken}] did not run" for test in MUST_FAIL if test not in ran]
    others = {c.node for c in cases} - {broken}
    if not others:
        found.append("no results for any other host")
    for case in cases:
        failed = case.outcome == "failed"
        where = f"{case.test}[{case.node}]"
        if case.node != broken:
            if failed:
                found.append(f"{where} failed on a healthy host: {case.message[:200]}")
        elif case.test in MUST_FAIL:
            word = MUST_FAIL[case.test]
            if not failed:
                found.append(f"{where} {case.outcome}, expected it to fail")
            elif word not in case.message:
                found.append(f"{where} failed without naming {word!r}: {case.message[:200]}")
        elif failed and case.test not in MAY_FAIL:
            found.append(f"{where} failed unexpectedly: {case.message[:200]}")
    return found


def main(argv: list[str]) -> int:
    broken = argv[1] if len(argv) > 1 else broken_host()
    cases = read_junit(Path(argv[0]).read_text())
    found = problems(cases, broken)
    for line in found:
        print(f"broken-nvlink: {line}")
    if found:
        return 1
    failed = sorted(c.test for c in cases if c.outcome == "failed")
    print(f"broken-nvlink: {broken} diagnosed ({', '.join(failed)}); "
          f"the other {len(cases) - len(failed)} checks passed or skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
