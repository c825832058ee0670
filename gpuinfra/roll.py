"""The rules of a rolling change (`gpuinfra roll`): which nodes go together, when a node may be
changed, when it is back, and what Slurm and Kubernetes are told. Pure: the command
(gpuinfra_cli/roll.py) runs what these return and feeds back what the nodes answer.

A roll takes the workers in batches of ``batch`` (inventory order). For each batch: drain
(Slurm, reason ``gpuinfra-roll: <why>``; Kubernetes: cordon and drain), wait for the jobs on it
to end (at most ``wait_s``: then the batch is put back as it was and the roll stops, naming the
jobs), deploy to the batch (and the head), reboot a node whose change needs it and deploy again
on the loaded driver, wait until its slurmd answers, judge it with its own health check
(gpuinfra.health, the verify suite's rules), and resume it. A node that fails is left drained
with the cause and the roll stops: no other node is touched.

The reason starts ``gpuinfra-roll:``, not ``gpuinfra:``: the node health check resumes the nodes
it drained itself (``gpuinfra:``) and never one drained by anyone else, so it cannot put a node
back into service in the middle of its roll.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from gpuinfra.health.judge import REASON_LIMIT
from gpuinfra.health.slurm import drained
from gpuinfra.parsers.slurm import SlurmNode

PREFIX = "gpuinfra-roll:"


def batches(names: Sequence[str], size: int) -> list[list[str]]:
    """``names`` in batches of ``size`` (>= 1), in order."""
    if size < 1:
        raise ValueError(f"batch size {size}: at least 1")
    return [list(names[i:i + size]) for i in range(0, len(names), size)]


def reason(why: str) -> str:
    """The drain reason: ``gpuinfra-roll: <why>`` on one line, at most 120 characters."""
    text = f"{PREFIX} {' '.join(why.split())}"
    return text if len(text) <= REASON_LIMIT else text[:REASON_LIMIT - 3].rstrip() + "..."


def ours(node: SlurmNode) -> bool:
    return node.reason.startswith(PREFIX)


def drained_by_someone_else(node: SlurmNode) -> bool:
    """Drained (or down) already, not by a roll: the roll may change it, never resumes it."""
    return (drained(node) or node.base_state.lower() == "down") and not ours(node)


def back(node: SlurmNode | None) -> bool:
    """The node's slurmd answers the controller again (after a reboot): listed, responding,
    not down and not holding an invalid registration."""
    if node is None or not node.responding:
        return False
    state = node.base_state.lower()
    return not state.startswith(("down", "inval", "unk", "fail"))


@dataclass(frozen=True)
class Job:
    job: str
    node: str


def jobs_on(squeue_text: str) -> list[Job]:
    """Jobs from ``squeue -h -o '%i %N'`` lines (job id, node list)."""
    out = []
    for line in squeue_text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.append(Job(parts[0], parts[1]))
        elif parts:
            out.append(Job(parts[0], "?"))
    return out


def squeue(nodes: Sequence[str]) -> str:
    return f"squeue -h -w {shlex.quote(','.join(nodes))} -o '%i %N'"


def drain(nodes: Sequence[str], why: str) -> str:
    return (f"scontrol update nodename={shlex.quote(','.join(nodes))} state=drain "
            f"reason={shlex.quote(reason(why))}")


def resume(nodes: Sequence[str]) -> str:
    return f"scontrol update nodename={shlex.quote(','.join(nodes))} state=resume"


def kube_drain(node: str, timeout_s: int) -> str:
    """Cordon and evict (`kubectl drain`), bounded; DaemonSet pods stay (they belong there)."""
    return (f"kubectl drain {shlex.quote(node)} --ignore-daemonsets --delete-emptydir-data "
            f"--timeout={int(timeout_s)}s")


def kube_uncordon(node: str) -> str:
    return f"kubectl uncordon {shlex.quote(node)}"


def stopped_for_jobs(jobs: Sequence[Job], wait_s: int) -> str:
    """What the roll says when the jobs on a batch outlive the wait."""
    listed = ", ".join(f"{j.job} (on {j.node})" for j in jobs)
    return (f"jobs still running after {wait_s} s: {listed}; the batch was put back as it "
            "was and nothing was changed. Wait for them (or cancel them), or give more time "
            "with --wait-jobs, and run the roll again")
