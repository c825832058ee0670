"""Lab proof: the multi-node training smoke job, through Slurm, across both workers.

    .venv/bin/python -m gpuinfra_lab.training_smoke [inventory/lab.py] [--keep build/smoke.json]

On the deployed lab, each step prints one line; exit 0 when every step held, 1 listing what
did not (docs/smoke.md says what the job does and how its log is judged):

1. PyTorch on every worker: Debian 12's ``python3-torch`` with apt-get, lab code only. No
   role installs torch: on a real cluster the job's container or the site's environment
   brings it. The lab also needs the 535 branch's ``libgl1-...-glvnd-glx`` (Debian 12:
   ``libgl1-nvidia-glvnd-glx``; Debian 13 names its 535 build ``libgl1-nvidia-tesla-535-...``,
   and its plain name is the 550 driver's, which would pull 550 packages beside 535: the
   verify suite failed on exactly that in the trixie lab): the 535 driver packages select
   NVIDIA's GLX alternative, which leaves ``libGL.so.1`` missing, and ``import torch`` fails
   without it (on hardware the driver provides it).
2. ``gpuinfra smoke run --backend gloo --json`` (the command an operator runs, with its
   default ``--launcher auto``): it says the launcher it picked from the first worker's
   distribution (srun on Debian 12, whose torch 1.13 cannot run torchrun under Python 3.11,
   docs/smoke.md), the job runs on both workers and is judged PASS, one rank per worker,
   replicas in sync. Its envelope is kept
   (``--keep FILE``: `make demo` puts it in the report with ``gpuinfra report --smoke FILE``).
3. Red: the same job, with its rank on the last worker killed (SIGKILL) once it runs, is
   judged FAIL, with that worker named in a failed finding.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gpuinfra_lab.health_drain import lab_hosts
from gpuinfra_lab.refusal import REPO, lab_ssh
from gpuinfra_lab.steps import Steps

TAG = "training-smoke"
PACKAGES = ("python3-torch", "$gl")
# The GLX package of the 535 branch on the worker's release (VERSION_ID of /etc/os-release).
GL = ('. /etc/os-release; case "$VERSION_ID" in 13) gl=libgl1-nvidia-tesla-535-glvnd-glx;; '
      '*) gl=libgl1-nvidia-glvnd-glx;; esac; ')
# apt-get as the deploy's own apt steps do; lists refreshed once when a package is unknown.
INSTALL = ("export DEBIAN_FRONTEND=noninteractive; " + GL +
           # already there (a second `make demo` on a running lab): its version, as below
           "python3 -c 'import torch; print(torch.__version__)' 2>/dev/null && exit 0; "
           "apt-get install -y -q --no-install-recommends {p} >/dev/null 2>&1 || "
           "{{ apt-get update -q >/dev/null && "
           "apt-get install -y -q --no-install-recommends {p} >/dev/null; }}; "
           "python3 -c 'import torch; print(torch.__version__)'")
# A rank's process: `python3 -c <the training code>` (the code starts with its imports); the
# anchor keeps the shell running this loop from matching itself.
RANK = "^python3 -c import datetime"
KILL = (f"for i in $(seq 600); do pgrep -f '{RANK}' >/dev/null && break; sleep 0.2; done; "
        f"sleep 2; pkill -KILL -f '{RANK}' && echo killed")
# No --launcher: the proof runs the default (auto), which says what it picked on stderr.
SMOKE = ["-m", "gpuinfra_cli.main", "smoke", "run", "--backend", "gloo", "--wait", "300",
         "--json"]
PICKED = re.compile(r"^note: launcher (\w+): (\S+) runs (\S+);", re.MULTILINE)


def smoke_run(inventory: str) -> tuple[int, dict[str, Any] | None, str]:
    """`gpuinfra smoke run ... --json`: its exit code, its envelope (None when it printed
    none) and its standard error."""
    done = subprocess.run([sys.executable, *SMOKE, "--inventory", inventory], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=420)
    try:
        envelope = json.loads(done.stdout)
    except ValueError:
        envelope = None
    return done.returncode, envelope, done.stderr


def failed(envelope: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [f for f in (envelope or {}).get("findings", []) if f.get("severity") == "fail"]


def names(envelope: dict[str, Any] | None, node: str) -> bool:
    """A failed finding of the envelope names ``node`` (its subject or its cause)."""
    return any(node in f"{f.get('subject', '')} {f.get('cause', '')}" for f in failed(envelope))


class TrainingSmokeProof(Steps):
    def __init__(self, inventory: str, keep: str | None) -> None:
        super().__init__(TAG, inventory)
        self.keep = keep

    def run(self) -> int:
        workers = [h["name"] for h in lab_hosts() if "workers" in h["groups"]]
        if len(workers) < 2:
            print(f"{TAG}: the smoke job needs two workers; the lab has {workers}")
            return 1
        self.torch(workers)
        if self.problems:
            return self.end()
        start = time.monotonic()
        rc, envelope, err = smoke_run(self.inventory)
        took = time.monotonic() - start
        results = (envelope or {}).get("results", [])
        hosts = sorted({str(r.get("host", "")).split(".")[0] for r in results})
        picked = PICKED.search(err)
        launcher = f"{picked[1]}, {picked[2]} runs {picked[3]}" if picked else "none said"
        self.say(rc == 0 and (envelope or {}).get("verdict") == "pass" and hosts == workers
                 and picked is not None,
                 f"gpuinfra smoke run (gloo, launcher auto: {launcher}): PASS in {took:.1f} s, "
                 f"{len(results)} ranks on "
                 f"{', '.join(hosts)} ({', '.join((envelope or {}).get('inputs', []))})",
                 f"gpuinfra smoke run exit {rc}, verdict {(envelope or {}).get('verdict')}, "
                 f"ranks on {hosts} (want {workers}), launcher auto: {launcher}: "
                 f"{failed(envelope)[:2]} {err[-400:]!r}")
        if self.keep and envelope is not None:
            Path(self.keep).parent.mkdir(parents=True, exist_ok=True)
            Path(self.keep).write_text(json.dumps(envelope, indent=2) + "\n", encoding="utf-8")
        victim = workers[-1]
        killer: dict[str, str] = {}
        thread = threading.Thread(target=lambda: killer.update(
            out=lab_ssh(victim, KILL, timeout=200).stdout.strip()))
        thread.start()
        rc, envelope, err = smoke_run(self.inventory)
        thread.join()
        self.say(rc == 1 and killer.get("out") == "killed" and names(envelope, victim),
                 f"its rank on {victim} killed during the job: FAIL naming {victim} "
                 f"({failed(envelope)[0].get('cause', '') if failed(envelope) else ''})",
                 f"with its rank on {victim} killed ({killer.get('out')!r}): exit {rc}, "
                 f"verdict {(envelope or {}).get('verdict')}, failed findings "
                 f"{failed(envelope)[:3]} (none naming {victim}) {err[-300:]!r}")
        return self.end()

    def torch(self, workers: list[str]) -> None:
        out: dict[str, subprocess.CompletedProcess[str]] = {}
        start = time.monotonic()
        threads = [threading.Thread(target=lambda w=w: out.update(
            {w: lab_ssh(w, INSTALL.format(p=" ".join(PACKAGES)), timeout=600)}))
            for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for worker in workers:
            done = out[worker]
            version = done.stdout.strip().splitlines()[-1:] or [""]
            self.say(done.returncode == 0 and bool(version[0]),
                     f"{worker}: torch {version[0]} (Debian's python3-torch, lab only; "
                     f"{time.monotonic() - start:.0f} s)",
                     f"{worker}: python3-torch could not be installed or imported (exit "
                     f"{done.returncode}): {(done.stderr or done.stdout)[-400:]!r}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuinfra_lab.training_smoke")
    parser.add_argument("inventory", nargs="?", default="inventory/lab.py")
    parser.add_argument("--keep", metavar="FILE", help="write the passing job's envelope here")
    args = parser.parse_args(argv)
    return TrainingSmokeProof(args.inventory, args.keep).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
