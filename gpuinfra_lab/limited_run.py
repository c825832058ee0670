"""Lab proof: a run limited to some hosts never splits the Slurm configuration, and a running
job never notices a configuration change.

    .venv/bin/python -m gpuinfra_lab.limited_run [inventory/lab.py]

On a deployed lab (Slurm configless: the head owns slurm.conf and gres.conf, every slurmd
fetches them), with a one-GPU job running on the first worker, each step prints one line;
exit 0 when every step held, 1 listing what did not:

1. ``--limit <second worker>`` with a changed Slurm setting (``MinJobAge``): the run says
   the head is not in it, and the head's slurm.conf is unchanged;
2. ``--limit <head> --limit <second worker>`` with that setting: the head's slurm.conf has
   it; slurmctld took it by ``scontrol reconfigure`` (same PID: no restart); every worker,
   the ones the run did not reach included, runs the head's files byte for byte; the job is
   still running on the first worker;
3. a full run with the setting leaves the head's files as the limited run wrote them (the
   first worker's part of gres.conf, not reached, was kept byte for byte, notes too), and
   another full run changes nothing.

Then the job is cancelled and a full run without the setting puts the lab back (checked the
same way), whatever happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from gpuinfra.slurm.running import FETCHED_CONF
from gpuinfra_lab.deploys import changed_operations
from gpuinfra_lab.health_drain import lab_hosts
from gpuinfra_lab.refusal import REPO, lab_ssh, on_head
from gpuinfra_lab.steps import Steps

TAG = "limited-run"
# A key slurm.conf(5) lets `scontrol reconfigure` change (gpuinfra.slurm.running.conf_change).
SETTING = ("MinJobAge", 600)
DATA = f"slurm_conf_extra={json.dumps({SETTING[0]: SETTING[1]})}"
FILES = "slurm.conf gres.conf cgroup.conf"
WAIT_S = 30


def deploy(inventory: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "pyinfra"), "-y", inventory,
                           "deploy.py", *args], cwd=REPO, capture_output=True, text=True,
                          check=False, timeout=900)


def sums(name: str, folder: str) -> str:
    return lab_ssh(name, f"cd {folder} && sha256sum {FILES}").stdout


def _changed_files(before: str, after: str) -> list[str]:
    """The files whose sha256sum line differs between two ``sums`` outputs."""
    return sorted({line.split()[-1] for line in set(before.splitlines()) ^ set(after.splitlines())
                   if line.strip()})


def workers() -> list[str]:
    return [h["name"] for h in lab_hosts() if "workers" in h["groups"]]


class LimitedRunProof(Steps):
    def __init__(self, inventory: str) -> None:
        super().__init__(TAG, inventory)
        self.workers = workers()

    def pid(self) -> str:
        return on_head(self.head, "systemctl show -p MainPID --value slurmctld")

    def all_fetch_the_heads(self) -> list[str]:
        """Workers whose fetched files differ from the head's (after a bounded wait)."""
        want = sums(self.head, "/etc/slurm")
        deadline = time.monotonic() + WAIT_S
        while True:
            off = [w for w in self.workers
                   if sums(w, FETCHED_CONF.rsplit("/", 1)[0]) != want]
            if not off or time.monotonic() > deadline:
                return off
            time.sleep(2)

    def run(self) -> int:
        if len(self.workers) < 2:
            print(f"{TAG}: the lab needs two workers")
            return 1
        first, second = self.workers[:2]
        job = self.job(first, 900)
        try:
            self.steps(job, first, second)
        finally:
            on_head(self.head, f"scancel {job}")
            back = deploy(self.inventory)
            off = self.all_fetch_the_heads()
            self.say(back.returncode == 0 and not off,
                     "the lab is back on its own settings (full run without the setting)",
                     f"putting the lab back failed: exit {back.returncode}, workers off the "
                     f"head's files: {off}")
        return self.end()

    def steps(self, job: str, first: str, second: str) -> None:
        running = self.job_state(job)
        self.say(running.startswith("RUNNING"), f"job {job} runs on {first}",
                 f"job {job} did not start on {first}: {running!r}")
        pid, conf = self.pid(), sums(self.head, "/etc/slurm")

        out = deploy(self.inventory, "--limit", second, "--data", DATA)
        said = f"the head ({self.head}) is not in this run"
        self.say(out.returncode == 0 and said in out.stdout + out.stderr
                 and sums(self.head, "/etc/slurm") == conf,
                 f"--limit {second}: the head's files untouched, and the run says so",
                 f"--limit {second}: exit {out.returncode}, said the head was left out: "
                 f"{said in out.stdout + out.stderr}, head's files unchanged: "
                 f"{sums(self.head, '/etc/slurm') == conf}")

        out = deploy(self.inventory, "--limit", self.head, "--limit", second, "--data", DATA)
        live = on_head(self.head, f"grep -x '{SETTING[0]}={SETTING[1]}' /etc/slurm/slurm.conf")
        self.say(out.returncode == 0 and bool(live),
                 f"--limit {self.head} --limit {second}: {SETTING[0]} in the head's slurm.conf",
                 f"--limit {self.head} --limit {second}: exit {out.returncode}, setting "
                 f"written: {bool(live)}; {(out.stderr or out.stdout)[-300:]}")
        self.say(self.pid() == pid, "slurmctld took it without a restart (scontrol reconfigure)",
                 f"slurmctld was restarted (PID {pid} -> {self.pid()}) for a reconfigurable key")
        off = self.all_fetch_the_heads()
        self.say(not off, "every worker runs the head's files, the unreached ones included",
                 f"workers whose slurmd runs other files than the head's: {off}")
        state = self.job_state(job)
        self.say(state.startswith("RUNNING"), f"job {job} still running on {first}",
                 f"job {job} is no longer running: {state!r}")

        limited = sums(self.head, "/etc/slurm")
        full = deploy(self.inventory, "--data", DATA)  # the workers left out judge it
        after = sums(self.head, "/etc/slurm")
        self.say(full.returncode == 0 and after == limited,
                 "the full run after it leaves the head's files as the limited run wrote them "
                 "(a node's part of gres.conf is kept byte for byte when it is not reached)",
                 f"the full run after the limited run: exit {full.returncode}; it rewrote the "
                 f"head's files: {_changed_files(limited, after)}")
        again = deploy(self.inventory, "--json", "--data", DATA)
        try:
            changed = changed_operations(json.loads(again.stdout)["results"])
        except (ValueError, KeyError):
            changed = [("no JSON results", [f"exit {again.returncode}"])]
        self.say(again.returncode == 0 and not changed, "a second full run changes nothing",
                 f"the second full run changed: {changed}")


def main(argv: list[str]) -> int:
    return LimitedRunProof(argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
