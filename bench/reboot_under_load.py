"""Drill: reboot the deployed lab with every CPU kept busy, and check that it all comes back.

    flock /work/heavy.lock .venv/bin/python -m bench.reboot_under_load [--rounds 3] [--fresh]

Each round starts CPU burners (``--burners``, default four per CPU), runs `gpuinfra lab reboot`
(which waits until each host is `running` or has only its profile's expected failures), then
checks every managed service on every host (`systemctl is-active`) and that Slurm reports
every worker idle, and stops the burners. ``--fresh`` first removes the lab, starts a new
one and deploys it (the first reboot after the first deploy is where the fault was seen).

``--lost-state`` makes each round the first boot whose controller saved no state: before the
reboot, slurmctld is killed (no "Saving all slurm state") and the state it would have saved
(assoc_mgr_state, assoc_usage, last_tres, qos_usage) is removed, as when a first shutdown is
cut short under load. slurmctld then needs slurmdbd answering when it starts: without a boot
order it races slurmdbd (and MariaDB), and loses when the machine is busy.
Exit 0 when every round came back whole; 1 otherwise, naming what did not come back.

Not part of `make test` (minutes of wall time); its results are quoted in gpuinfra_lab/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gpuinfra_lab.profiles import HEAD_NAME

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
# What the roles run, per kind of host (slurmdbd and MariaDB: the lab has accounting on).
HEAD_SERVICES = ("munge", "mariadb", "slurmdbd", "slurmctld", "chrony", "ssh")
WORKER_SERVICES = ("munge", "slurmd", "chrony", "ssh")
IDLE_WAIT_S = 90
LOSE_STATE = ("systemctl kill -s KILL slurmctld; sleep 1; cd /var/lib/slurm/slurmctld && "
              "rm -f assoc_mgr_state* assoc_usage* last_tres* qos_usage*")


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n"
                         f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc


def ssh(host: str, command: str) -> str:
    return run("ssh", "-F", ".lab/ssh_config", host, command, check=False).stdout


def burners(count: int) -> list[subprocess.Popen]:
    spin = "import itertools\nfor _ in itertools.count(): pass\n"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]


def services_down(hosts: list[dict]) -> list[str]:
    down = []
    for host in hosts:
        wanted = HEAD_SERVICES if host["name"] == HEAD_NAME else WORKER_SERVICES
        states = ssh(host["name"], "systemctl is-active " + " ".join(wanted)).split()
        down += [f"{host['name']}: {unit} {state}"
                 for unit, state in zip(wanted, states + ["?"] * len(wanted), strict=False)
                 if state != "active"]
    return down


def workers_not_idle(workers: list[str]) -> list[str]:
    """Workers Slurm does not report idle, after waiting up to IDLE_WAIT_S."""
    deadline = time.monotonic() + IDLE_WAIT_S
    while True:
        out = ssh(HEAD_NAME, "sinfo -h -N -o '%N %t'")
        states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
        bad = [f"{w}: slurm {states.get(w, 'unknown')}" for w in workers
               if states.get(w) != "idle"]
        if not bad or time.monotonic() > deadline:
            return bad
        time.sleep(2)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.reboot_under_load",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burners", type=int, default=4 * (os.cpu_count() or 1))
    parser.add_argument("--fresh", action="store_true",
                        help="lab down, lab up and a first deploy before the rounds")
    parser.add_argument("--lost-state", action="store_true",
                        help="kill slurmctld and remove its saved state before each reboot")
    args = parser.parse_args(argv)
    if args.fresh:
        run(str(BIN / "gpuinfra"), "lab", "down")
        run(str(BIN / "gpuinfra"), "lab", "up")
        start = time.monotonic()
        run(str(BIN / "pyinfra"), "-y", "inventory/lab.py", "deploy.py")
        print(f"fresh lab deployed in {time.monotonic() - start:.0f} s", flush=True)
    hosts = json.loads((REPO / ".lab" / "hosts.json").read_text())["hosts"]
    workers = [h["name"] for h in hosts if "workers" in h["groups"]]
    failed = 0
    for round_no in range(1, args.rounds + 1):
        if args.lost_state:
            ssh(HEAD_NAME, LOSE_STATE)
        load = burners(args.burners)
        start = time.monotonic()
        try:
            reboot = run(str(BIN / "gpuinfra"), "lab", "reboot", check=False)
            took = time.monotonic() - start
            problems = services_down(hosts) + workers_not_idle(workers)
        finally:
            for proc in load:
                proc.kill()
                proc.wait()
        verdict = "ok" if reboot.returncode == 0 and not problems else "FAILED"
        failed += verdict != "ok"
        print(f"round {round_no}: {args.burners} burners, lab reboot exit {reboot.returncode} "
              f"in {took:.0f} s: {verdict}", flush=True)
        for line in (reboot.stdout + reboot.stderr).splitlines():
            print(f"    {line}")
        for problem in problems:
            print(f"    not back: {problem}")
    print(f"{args.rounds - failed}/{args.rounds} rounds came back whole under load")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
