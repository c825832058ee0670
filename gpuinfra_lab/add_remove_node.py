"""Lab proof: a worker joins a running cluster with one command and leaves it the same way,
while a job runs on another worker (docs/day2.md).

    .venv/bin/python -m gpuinfra_lab.add_remove_node [inventory/lab.py]

On a deployed lab with N workers and a one-GPU job running on the first, each step prints one
line; exit 0 when every step held, 1 listing what did not:

1. add: ``gpuinfra lab up --workers N+1`` starts a new worker (its replayed hardware), and
   ``pyinfra ... --limit <head> --limit <new>`` brings it into Slurm idle with its GPUs; a
   one-GPU job runs there; every worker runs the head's files; the first job still runs;
2. remove, refused: with the worker gone from the inventory (``lab up --workers N``) but not
   drained, ``--limit <head>`` is refused with the drain command, and the head's slurm.conf
   still has the node;
3. remove: drained (``scontrol update ... state=drain``), the same command removes it from
   slurm.conf, ``sinfo`` and Prometheus' targets; the first job still runs.

The job is cancelled and a full run converges the lab again, whatever happened.
"""

from __future__ import annotations

import subprocess
import sys
import time

from gpuinfra_lab.limited_run import deploy, sums, workers
from gpuinfra_lab.refusal import REPO, on_head
from gpuinfra_lab.steps import Steps

TAG = "add-remove-node"
WAIT_S = 60
REFUSED = "left the inventory but Slurm still schedules on it: drain it first"


def lab_up(count: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "gpuinfra"), "lab", "up", "--workers",
                           str(count)], cwd=REPO, capture_output=True, text=True, check=False,
                          timeout=900)


class AddRemoveNodeProof(Steps):
    def __init__(self, inventory: str) -> None:
        super().__init__(TAG, inventory)

    def state(self, node: str) -> str:
        return on_head(self.head, f"sinfo -h -N -n {node} -o '%T %G'")

    def wait_state(self, node: str, words: tuple[str, ...]) -> str:
        deadline = time.monotonic() + WAIT_S
        while True:
            seen = self.state(node)
            if seen.startswith(words) or time.monotonic() > deadline:
                return seen
            time.sleep(2)

    def run(self) -> int:
        before = workers()
        count = len(before)
        job = self.job(before[0], 900)
        try:
            self.steps(job, before[0], count)
        finally:
            on_head(self.head, f"scancel {job}")
            if len(workers()) != count:
                lab_up(count)
            back = deploy(self.inventory)
            self.say(back.returncode == 0, "the lab converged again (full run)",
                     f"the full run after the proof failed: exit {back.returncode}")
        return self.end()

    def steps(self, job: str, first: str, count: int) -> None:
        self.say(self.job_state(job).startswith("RUNNING"), f"job {job} runs on {first}",
                 f"job {job} did not start on {first}: {self.job_state(job)!r}")

        up = lab_up(count + 1)
        new = [w for w in workers() if w not in workers()[:count]]
        if up.returncode != 0 or len(new) != 1:
            self.say(False, "", f"lab up --workers {count + 1} gave no new worker: "
                                f"{(up.stderr or up.stdout)[-300:]}")
            return
        node = new[0]
        out = deploy(self.inventory, "--limit", self.head, "--limit", node)
        seen = self.wait_state(node, ("idle",))
        self.say(out.returncode == 0 and seen.startswith("idle") and "gpu:" in seen,
                 f"add: --limit {self.head} --limit {node}: {node} is {seen}",
                 f"add: exit {out.returncode}, {node} is {seen!r}; "
                 f"{(out.stderr or out.stdout)[-300:]}")
        ran = on_head(self.head, f"timeout 60 srun -w {node} --gres=gpu:1 --mem=64 hostname")
        self.say(ran == node, f"a one-GPU job ran on {node}",
                 f"a one-GPU job on {node} did not run: {ran!r}")
        want = sums(self.head, "/etc/slurm")
        off = [w for w in workers() if sums(w, "/run/slurm/conf") != want]
        self.say(not off, "every worker runs the head's files",
                 f"workers whose slurmd runs other files than the head's: {off}")
        self.say(self.job_state(job).startswith("RUNNING"), f"job {job} still running on {first}",
                 f"job {job} is no longer running: {self.job_state(job)!r}")

        lab_up(count)
        out = deploy(self.inventory, "--limit", self.head)
        kept = on_head(self.head, f"grep -c '^NodeName={node} ' /etc/slurm/slurm.conf")
        self.say(out.returncode != 0 and REFUSED in out.stdout + out.stderr and kept == "1",
                 f"remove, not drained: refused with the drain command; {node} kept",
                 f"remove, not drained: exit {out.returncode}, refused: "
                 f"{REFUSED in out.stdout + out.stderr}, node lines left: {kept}")

        on_head(self.head, f"scontrol update nodename={node} state=drain "
                           "reason='leaving the cluster (lab proof)'")
        out = deploy(self.inventory, "--limit", self.head)
        listed = on_head(self.head, f"sinfo -h -N -o %N | grep -cx {node}")
        targets = on_head(self.head, f"grep -c {node} /etc/prometheus/prometheus.yml")
        conf = on_head(self.head, f"grep -c '^NodeName={node} ' /etc/slurm/slurm.conf")
        self.say(out.returncode == 0 and listed == "0" and targets == "0" and conf == "0",
                 f"remove, drained: {node} gone from slurm.conf, sinfo and Prometheus' targets",
                 f"remove, drained: exit {out.returncode}; still in slurm.conf: {conf}, sinfo: "
                 f"{listed}, prometheus.yml: {targets}")
        self.say(self.job_state(job).startswith("RUNNING"), f"job {job} still running on {first}",
                 f"job {job} is no longer running after the removal: {self.job_state(job)!r}")


def main(argv: list[str]) -> int:
    return AddRemoveNodeProof(argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
