"""Lab proof: a node whose SSH host key changed fails the verify suite; the others pass.

    .venv/bin/python -m gpuinfra_lab.changed_host_key [inventory/lab.py]

On a converged lab: gives lab-worker1 new SSH host keys (inside its container, as a
reinstalled or impersonated node would show), runs the base checks of the verify suite
(gpuinfra_verify/test_common.py), and requires: pytest exit 1, every lab-worker1 test failed naming
the CHANGED key with both fingerprints, every other host's tests passed. Then it puts the
node's own keys back (so the lab trusts it again). Exit 0 when all hold, 1 listing what did
not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuinfra_lab.podman import Podman
from gpuinfra_lab.state import Paths

REPO = Path(__file__).resolve().parents[1]
NODE = "lab-worker1"
SWAP = ("rm -rf /root/.gpuinfra-hostkeys && mkdir -m 0700 /root/.gpuinfra-hostkeys && "
        "mv /etc/ssh/ssh_host_* /root/.gpuinfra-hostkeys/ && ssh-keygen -A -q && "
        "systemctl restart ssh")
RESTORE = ("rm -f /etc/ssh/ssh_host_* && mv /root/.gpuinfra-hostkeys/* /etc/ssh/ && "
           "rmdir /root/.gpuinfra-hostkeys && systemctl restart ssh")


def main(argv: list[str]) -> int:
    inventory = argv[0] if argv else "inventory/lab.py"
    podman = Podman(Paths(REPO))
    podman.exec(NODE, SWAP)
    try:
        run = subprocess.run(
            [str(REPO / ".venv" / "bin" / "pytest"), "gpuinfra_verify/test_common.py",
             "--inventory",
             inventory, "-p", "no:cacheprovider", "-q", "-rA", "--tb=line"],
            cwd=REPO, capture_output=True, text=True, check=False, timeout=300)
    finally:
        podman.exec(NODE, RESTORE)
    output = run.stdout + run.stderr
    lines = output.splitlines()
    node_results = [line for line in lines if f"[{NODE}]" in line and
                    line.startswith(("PASSED", "FAILED", "ERROR"))]
    other_bad = [line for line in lines if line.startswith(("FAILED", "ERROR"))
                 and f"[{NODE}]" not in line]
    problems = []
    if run.returncode != 1:
        problems.append(f"pytest exited {run.returncode}, expected 1")
    if not node_results or any(line.startswith("PASSED") for line in node_results):
        problems.append(f"{NODE}'s tests did not all fail: {node_results or 'none ran'}")
    if "CHANGED" not in output or "SHA256:" not in output:
        problems.append("the failure does not name the changed key and its fingerprints")
    problems += [f"another host failed: {line}" for line in other_bad]
    for line in problems:
        print(f"changed-host-key: {line}")
    if problems:
        print("\n".join(lines[-40:]))
        return 1
    reason = next(line.strip() for line in lines if "CHANGED" in line)
    print(f"changed-host-key: {len(node_results)} test(s) of {NODE} failed ({reason[:160]}); "
          "every other host passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
