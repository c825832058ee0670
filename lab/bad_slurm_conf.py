"""Lab proof: a deploy with a broken slurm.conf is refused, and the controller keeps running.

    .venv/bin/python -m lab.bad_slurm_conf [inventory/lab.py]

On a converged lab: records slurmctld's PID and the live slurm.conf's SHA-256 on the head,
deploys with a misspelt key (``--data slurm_conf_extra='{"SelectTypeParameter": ...}'``),
and then requires: the deploy failed, its output carries Slurm's own error and gpuinfra's
refusal, slurmctld is active with the same PID (never restarted), the live slurm.conf is
unchanged, and sinfo still answers. Exit 0 when all hold, 1 listing what did not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BAD_DATA = 'slurm_conf_extra={"SelectTypeParameter": "CR_Core_Memory"}'
MUST_SAY = ("unrecognized key: SelectTypeParameter", "gpuinfra: Slurm refused the new "
            "configuration")


def _head() -> str:
    lab = json.loads((REPO / ".lab" / "hosts.json").read_text())
    return next(h["name"] for h in lab["hosts"] if "head" in h["groups"])


def _on_head(head: str, command: str) -> str:
    run = subprocess.run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), head, command],
                         capture_output=True, text=True, check=False, timeout=60)
    return run.stdout.strip()


def _controller(head: str) -> dict[str, str]:
    return {
        "active": _on_head(head, "systemctl is-active slurmctld"),
        "pid": _on_head(head, "systemctl show -p MainPID --value slurmctld"),
        "conf": _on_head(head, "sha256sum /etc/slurm/slurm.conf | cut -c1-16"),
        "sinfo": _on_head(head, "sinfo -h -o %P >/dev/null && echo answers"),
    }


def main(argv: list[str]) -> int:
    inventory = argv[0] if argv else "inventory/lab.py"
    head = _head()
    before = _controller(head)
    deploy = subprocess.run([str(REPO / ".venv" / "bin" / "pyinfra"), "-y", inventory,
                             "deploy.py", "--data", BAD_DATA], cwd=REPO, capture_output=True,
                            text=True, check=False, timeout=600)
    output = deploy.stdout + deploy.stderr
    after = _controller(head)
    problems = []
    if deploy.returncode == 0:
        problems.append("the deploy with a broken slurm.conf succeeded")
    problems += [f"the deploy output does not say {words!r}" for words in MUST_SAY
                 if words not in output]
    if before["active"] != "active":
        problems.append(f"slurmctld was {before['active']!r} before the test: converge first")
    for key, what in (("active", "slurmctld state"), ("pid", "slurmctld PID"),
                      ("conf", "live slurm.conf")):
        if after[key] != before[key]:
            problems.append(f"{what} changed: {before[key]!r} -> {after[key]!r}")
    if after["sinfo"] != "answers":
        problems.append("sinfo does not answer after the refused deploy")
    for line in problems:
        print(f"bad-slurm-conf: {line}")
    if problems:
        print("\n".join(output.splitlines()[-30:]))
        return 1
    refused = next(line.strip() for line in output.splitlines() if MUST_SAY[0] in line)
    print(f"bad-slurm-conf: refused ({refused}); slurmctld {after['active']}, PID "
          f"{after['pid']} unchanged, slurm.conf {after['conf']} unchanged, sinfo answers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
