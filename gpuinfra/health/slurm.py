"""What the health check does to its Slurm node: drain with the cause, resume what it drained.

The node's state and reason come from ``sinfo -h -N -n NODE -o '%N|%T|%G|%E'`` (parsed by
gpuinfra.parsers.slurm); the action is one ``scontrol update`` (:func:`scontrol`). The rules:

- a failed check drains a node that is not drained, with ``gpuinfra: <cause>`` as the reason;
- a node already drained keeps its reason: an operator's (any reason not starting with
  ``gpuinfra:``) is never touched, and a gpuinfra reason stays the first cause seen (the
  epilog's, which names the job, is not replaced by the periodic check's);
- a passing check resumes a node drained by gpuinfra, never one an operator drained;
- ``on_failure = "report"``: nothing is drained or resumed; the check only says.

The epilog drains for fatal XIDs logged during the job (``gpuinfra: job 42: ...``) over an
earlier gpuinfra reason, never over an operator's.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpuinfra.parsers.slurm import SINFO_FORMAT, SlurmNode

PREFIX = "gpuinfra:"
DRAINED = ("drained", "draining", "drain")


@dataclass(frozen=True)
class Action:
    """``kind``: "drain", "resume" or "none"; ``reason``: the drain reason; ``why``: said
    in the check's log line."""

    kind: str
    reason: str = ""
    why: str = ""


def drained(node: SlurmNode) -> bool:
    return node.base_state.lower() in DRAINED


def ours(node: SlurmNode) -> bool:
    return node.reason.startswith(PREFIX)


def drained_by_gpuinfra(node: SlurmNode) -> bool:
    """Drained, with a reason the health check gave."""
    return drained(node) and ours(node)


def decide(node: SlurmNode | None, reason: str, on_failure: str) -> Action:
    """The action of the periodic check: ``reason`` is the verdict's ("" when healthy)."""
    if node is None:
        return Action("none", why="Slurm does not answer for this node: nothing changed")
    if on_failure == "report":
        return Action("none", why="health_on_failure is report: nothing drained or resumed")
    if reason:
        if not drained(node):
            return Action("drain", reason, "the check failed")
        if ours(node):
            return Action("none", why=f"already drained by gpuinfra: {node.reason}")
        return Action("none", why=f"drained by an operator ({node.reason or 'no reason'}): "
                                  "left as it is")
    if drained(node) and ours(node):
        return Action("resume", why=f"the check passes again (was: {node.reason})")
    if drained(node):
        return Action("none", why=f"drained by an operator ({node.reason or 'no reason'}): "
                                  "gpuinfra never resumes it")
    return Action("none", why="healthy")


def decide_after_job(node: SlurmNode | None, reason: str, on_failure: str) -> Action:
    """The prolog's and epilog's action: ``reason`` names the job and what its GPUs failed
    ("" when they passed)."""
    if not reason or node is None or on_failure == "report":
        return Action("none", why="the job's GPUs passed" if not reason else
                      "health_on_failure is report, or Slurm does not answer")
    if drained(node) and not ours(node):
        return Action("none", why=f"drained by an operator ({node.reason}): left as it is")
    return Action("drain", reason, "the job's GPUs failed their check")


def scontrol(node: str, action: Action) -> list[str]:
    """The command carrying out ``action`` ([] for "none")."""
    if action.kind == "drain":
        return ["scontrol", "update", f"NodeName={node}", "State=DRAIN",
                f"Reason={action.reason}"]
    if action.kind == "resume":
        return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]
    return []


def sinfo(node: str) -> list[str]:
    return ["sinfo", "-h", "-N", "-n", node, "-o", SINFO_FORMAT]


def shown(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)
