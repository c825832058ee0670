"""Lab proof that a port below its spec's rate goes red on that node only.

    .venv/bin/python molecule/rdma/slow_port.py

On the converged RDMA guests (their checks green): the verify suite runs against a copy of
the lab's inventory in which lab-rdma2's NIC is said to run at 10 Gb/s (rxe reports 2.5 on
the guests' virtio NICs). Exactly test_port_rate[lab-rdma2] must fail, naming the rate seen,
the rate the spec says and the causes of a degraded link; every other check stays as it was
(the port is ACTIVE: a slow link is its own failure, not a down one). Nothing on the guests
changes. Exit 0 when that holds, 1 saying what did not.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from gpuinfra_verify.report import read_junit

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
SLOW = "lab-rdma2"
SAID = 10  # Gb/s: a rate rxe can report (a 10 GbE netdev), above what the guest's gives

INVENTORY = f'''"""The lab with {SLOW}'s NIC said to be faster than it is (slow_port.py)."""
import runpy

_lab = runpy.run_path({str(REPO / "inventory" / "lab.py")!r})
head, hypervisors = _lab["head"], _lab["hypervisors"]
workers = [(name, {{**data, "rdma_nics": [{{**nic, "rate_gbps": {SAID}}}
                                          for nic in data["rdma_nics"]]}})
           if name == {SLOW!r} else (name, data) for name, data in _lab["workers"]]
'''


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        inventory = Path(tmp) / "lab_slow_port.py"
        inventory.write_text(INVENTORY)
        junit = Path(tmp) / "verify.xml"
        suite = subprocess.run(
            [str(BIN / "pytest"), "gpuinfra_verify/test_rdma.py", "--inventory", str(inventory),
             "-p", "no:cacheprovider", "-k", "not ib_write_bw", f"--junitxml={junit}"],
            cwd=REPO, capture_output=True, text=True, check=False, timeout=600)
        cases = read_junit(junit.read_text()) if junit.is_file() else []
    failed = {(c.node, c.test): c.message for c in cases if c.outcome == "failed"}
    message = failed.get((SLOW, "test_port_rate"), "")
    problems = []
    if suite.returncode != 1 or set(failed) != {(SLOW, "test_port_rate")}:
        problems.append(f"expected exactly test_port_rate[{SLOW}] to fail, got "
                        f"{sorted(failed) or 'no failure'} (pytest exit {suite.returncode})")
    elif f"the spec says {SAID}" not in message or "auto-negotiated down" not in message:
        problems.append(f"test_port_rate did not name the rates and the cause: {message[:300]}")
    for line in problems:
        print(f"slow-port: {line}")
    if problems:
        print(suite.stdout[-2000:])
        return 1
    print(f"slow-port: verify failed only test_port_rate[{SLOW}]: {message.splitlines()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
