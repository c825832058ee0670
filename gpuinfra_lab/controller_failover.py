"""Lab proof: Slurm's backup controller takes over and gives back (issue 45, item 3).

    .venv/bin/python -m gpuinfra_lab.controller_failover [inventory/lab.py]

On a lab deployed with `gpuinfra lab up --backup` (lab-head2 in 'slurm_backup', both
controllers mounting one folder of this machine as StateSaveLocation, SlurmctldTimeout=10:
group_data/lab.py), each step prints one line; exit 0 when every step held, 1 listing what did
not:

1. ``scontrol ping`` answers the primary (lab-head) and the backup (lab-head2), both UP;
2. with the primary's slurmctld stopped, the backup takes over within SlurmctldTimeout and a
   margin: a job submitted then runs and completes, and a longer one is left running;
3. with the primary started again, it takes control back (``scontrol ping``: primary UP,
   backup UP in standby) from the shared state: the job started under the backup is still
   known to it (running or completed), and a new job's id follows the backup's.
Without a shared state folder the primary would come back without the backup's jobs: step 3
fails.
"""

from __future__ import annotations

import sys
import time

from gpuinfra.parsers.slurm import parse_scontrol_ping
from gpuinfra_lab.profiles import BACKUP_NAME
from gpuinfra_lab.refusal import lab_ssh
from gpuinfra_lab.steps import Steps

TAG = "failover"
TAKEOVER_S = 90  # SlurmctldTimeout is 10 s in the lab; the backup also waits for its own ping
JOB_S = 60


def ping_states(text: str) -> dict[str, str]:
    """``scontrol ping`` -> {"primary": "UP", "backup": "DOWN"}."""
    return {role: state for role, state in parse_scontrol_ping(text).values()}


class FailoverProof(Steps):
    def __init__(self, inventory: str) -> None:
        super().__init__(TAG, inventory)
        self.jobs: list[str] = []

    def run(self) -> int:
        try:
            self.both_up()
            left = self.takeover()
            self.give_back(left)
        finally:
            lab_ssh(self.head, "systemctl start slurmctld")
            if self.jobs:
                self.sh(f"scancel {' '.join(self.jobs)} 2>/dev/null")
        return self.end()

    def ping(self) -> dict[str, str]:
        return ping_states(self.sh("scontrol ping"))

    def wait(self, what, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if what():
                return True
            time.sleep(1)
        return bool(what())

    def both_up(self) -> None:
        states = self.ping()
        self.say(states == {"primary": "UP", "backup": "UP"},
                 f"scontrol ping: primary {self.head} UP, backup {BACKUP_NAME} UP",
                 f"scontrol ping before the failover: {states} (want both UP)")
        mounted = lab_ssh(BACKUP_NAME, "cat /srv/slurm/state/gpuinfra-controllers").stdout
        self.say(f"primary={self.head}" in mounted,
                 f"{BACKUP_NAME} reads the head's state folder (its mark: {mounted.split()[:2]})",
                 f"{BACKUP_NAME} does not see the head's mark in /srv/slurm/state: {mounted!r}")

    def submit(self, seconds: int) -> str:
        job = self.sh(f"sbatch --parsable -N1 --mem=64 --wrap 'sleep {seconds}'")
        if job.isdigit():
            self.jobs.append(job)
        return job

    def state(self, job: str) -> str:
        return self.sh(f"scontrol show job {job} -o 2>/dev/null | grep -o 'JobState=[A-Z]*' "
                       "| cut -d= -f2")

    def takeover(self) -> str:
        lab_ssh(self.head, "systemctl stop slurmctld")
        started = time.monotonic()
        took = self.wait(lambda: self.ping().get("backup") == "UP"
                         and self.sh("scontrol show config >/dev/null 2>&1 && echo yes")
                         == "yes" and self.sh("squeue -h >/dev/null 2>&1 && echo yes") == "yes",
                         TAKEOVER_S)
        states = self.ping()
        self.say(took and states.get("primary") == "DOWN",
                 f"primary's slurmctld stopped: {BACKUP_NAME} answers in "
                 f"{time.monotonic() - started:.0f} s (scontrol ping {states})",
                 f"{BACKUP_NAME} did not take over within {TAKEOVER_S} s: {states}")
        short = self.submit(2)
        done = bool(short.isdigit()) and self.wait(lambda: self.state(short) == "COMPLETED",
                                                   JOB_S)
        self.say(done, f"a job submitted under the backup (job {short}) ran and completed",
                 f"job {short!r} under the backup: {self.state(short) if short else 'refused'}")
        long = self.submit(300)
        running = bool(long.isdigit()) and self.wait(lambda: self.state(long) == "RUNNING",
                                                     JOB_S)
        self.say(running, f"a longer job (job {long}) runs under the backup",
                 f"job {long!r} under the backup: {self.state(long) if long else 'refused'}")
        return long

    def give_back(self, left: str) -> None:
        lab_ssh(self.head, "systemctl start slurmctld")
        started = time.monotonic()
        back = self.wait(lambda: self.ping() == {"primary": "UP", "backup": "UP"}, TAKEOVER_S)
        self.say(back, f"primary started again: it answers and {BACKUP_NAME} is back in standby "
                 f"after {time.monotonic() - started:.0f} s",
                 f"after the primary's start: scontrol ping {self.ping()} after {TAKEOVER_S} s")
        kept = self.state(left) if left else ""
        self.say(kept in ("RUNNING", "COMPLETED"),
                 f"the primary took the backup's state: job {left} is {kept}",
                 f"the primary does not know job {left} started under the backup ({kept!r}): "
                 "the controllers do not share StateSaveLocation")
        new = self.submit(1)
        follows = new.isdigit() and left.isdigit() and int(new) > int(left)
        self.say(follows, f"a new job's id ({new}) follows the backup's ({left})",
                 f"a new job got id {new!r} after the backup's {left!r}")


def main(argv: list[str]) -> int:
    return FailoverProof(argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
