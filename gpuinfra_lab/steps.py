"""What the Day-2 lab proofs share (gpuinfra_lab/limited_run.py, add_remove_node.py,
rolling.py): one line per step, the list of what did not hold, and a job on a worker."""

from __future__ import annotations

import sys
import time

from gpuinfra_lab.refusal import head, on_head


class Steps:
    """A proof's steps: ``say`` prints ``TAG: ok|FAIL: ...``; ``end`` lists the failures
    again (on stderr too) and gives the exit code (0 when every step held)."""

    def __init__(self, tag: str, inventory: str) -> None:
        self.tag = tag
        self.inventory = inventory
        self.head = head()["name"]
        self.problems: list[str] = []

    def say(self, ok: bool, good: str, bad: str) -> None:
        print(f"{self.tag}: {'ok' if ok else 'FAIL'}: {good if ok else bad}", flush=True)
        if not ok:
            self.problems.append(bad)

    def end(self) -> int:
        """The failures again, on stdout and on stderr: Ansible's report of a failed command
        (molecule's verify) shows stderr before the long stdout, so CI's excerpt of the log
        (.ci/run) names what did not hold."""
        for line in self.problems:
            print(f"{self.tag}: {line}")
            print(f"{self.tag}: FAIL: {line}", file=sys.stderr)
        return 1 if self.problems else 0

    def two_workers(self, names: list[str]) -> list[str]:
        """The lab's workers (``names``) when there are exactly two (what the roll proofs
        need); else [] and the proof says so."""
        if len(names) != 2:
            print(f"{self.tag}: the proof needs exactly two workers, the lab has {len(names)}")
            return []
        return names

    def sh(self, command: str) -> str:
        """``command``'s output on the lab's head (stripped)."""
        return on_head(self.head, command)

    def job_state(self, job: str) -> str:
        """``RUNNING lab-worker1`` (state and nodes), or "" once the job left the queue."""
        return on_head(self.head, f"squeue -h -j {job} -o '%T %N'")

    def job(self, node: str, seconds: int, wait_s: float = 60) -> str:
        """A one-GPU job sleeping ``seconds`` on ``node`` (64 MiB: the lab's jobs fit side by
        side), once it runs (or ``wait_s`` passed)."""
        job = on_head(self.head, f"sbatch --parsable -w {node} --gres=gpu:1 --mem=64 "
                                 f"--wrap 'sleep {seconds}'")
        deadline = time.monotonic() + wait_s
        while not self.job_state(job).startswith("RUNNING") and time.monotonic() < deadline:
            time.sleep(1)
        return job
