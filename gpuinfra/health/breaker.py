"""The circuit breaker of automatic drains: a health check or policy bug must never drain the
whole cluster (as NVIDIA's NVSentinel bounds its own remediation).

Automatic drains (the periodic check's and the epilog's, ``gpuinfra: ...``) never take more
than ``share`` of the GPU nodes within ``window_s``: a node whose check fails when that many
have been drained already (drained now, or drained and resumed within the window) is not
drained; the breaker **trips** instead. Tripped, no node is drained automatically, an alert
fires (HealthBreakerTripped, from the head's node states), and only a person resets it
(``gpuinfra health reset-breaker``) after looking. A failing node the breaker held is said
in the check's log and metrics all the same.

The state lives in Slurm itself, where every node's check already reads and writes, not on a
laptop or one more server: each node's ``Comment`` (scontrol(1), ``update NodeName ...
Comment=``; ``sinfo -O Comment``; Slurm 22.05 and later, measured in the lab). An automatic
drain stamps the drained node ``gpuinfra-drained: <epoch>`` (kept after the node is resumed:
the window's memory); a trip stamps the held node ``gpuinfra-breaker: tripped <epoch>:
<why>``. The reset clears the trip stamps.

Checks on many nodes fail at once (that is the case the breaker is for), so two may each see
the other not drained yet. A drain is therefore settled after it (:func:`settle`): a moment
later (:data:`SETTLE_S`, longer than a drain takes to reach slurmctld) the node reads the
cluster again and ranks the automatic drains by slurmctld's own reason time, then name; one
ranked past the share gives its drain back (resumed at once) and trips the breaker. Every
racing node reads the same drains, so they agree on who stays drained. Pure: the health
program (roles/health/program.py) runs these commands and hands in what ``sinfo`` printed.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuinfra.health.slurm import PREFIX, drained

DRAINED_MARK = "gpuinfra-drained:"
TRIPPED_MARK = "gpuinfra-breaker:"
# One line per node: name, state, GRES, reason, comment, the reason's time (slurmctld's);
# "|" ends each field (sinfo -O: "type[:[.][size][suffix]]", no size = the whole value).
SINFO_FIELDS = "NodeList:|,StateLong:|,Gres:|,Reason:|,Comment:|,Timestamp:|"
SETTLE_S = 3
SINFO = ["sinfo", "-h", "-N", "-O", SINFO_FIELDS]
SINFO_LINE = shlex.join(SINFO)  # the same, as one shell line (on the head over SSH)
COMMENT_LIMIT = 200


@dataclass(frozen=True)
class Seen:
    """One node as the breaker reads it."""

    name: str
    state: str
    gres: str
    reason: str
    comment: str
    since: str = ""  # when slurmctld took the reason (ISO 8601, its clock); "" when none

    @property
    def gpu(self) -> bool:
        return any(part.strip().startswith("gpu") for part in self.gres.split(","))

    @property
    def drained_by_check(self) -> bool:
        from gpuinfra.parsers.slurm import SlurmNode

        return drained(SlurmNode(self.name, self.state, self.gres, self.reason)) and \
            self.reason.startswith(PREFIX)

    def drained_at(self) -> float | None:
        return _stamp(self.comment, DRAINED_MARK)

    def tripped_at(self) -> float | None:
        return _stamp(self.comment, TRIPPED_MARK)


def _stamp(comment: str, mark: str) -> float | None:
    if not comment.startswith(mark):
        return None
    words = comment[len(mark):].split()
    if words[:1] == ["tripped"]:
        words = words[1:]
    try:
        return float(words[0].rstrip(":"))
    except (IndexError, ValueError):
        return None


def parse(text: str) -> list[Seen]:
    """The nodes of ``sinfo -h -N -O`` with :data:`SINFO_FIELDS` (a node listed once per
    partition is kept once)."""
    out: dict[str, Seen] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5 or not parts[0]:
            continue
        comment = "" if parts[4] in ("(null)", "none") else parts[4]
        reason = "" if parts[3] in ("(null)", "none") else parts[3]
        since = parts[5] if len(parts) > 5 and parts[5][:1].isdigit() else ""
        out.setdefault(parts[0], Seen(parts[0], parts[1], parts[2], reason, comment, since))
    return list(out.values())


@dataclass(frozen=True)
class Breaker:
    share: float = 0.1
    window_s: int = 3600

    def most(self, gpu_nodes: int) -> int:
        """How many GPU nodes automatic drains may take within the window: ``share`` of them,
        rounded down, at least one."""
        return max(math.floor(gpu_nodes * self.share + 1e-9), 1)


@dataclass(frozen=True)
class Decision:
    """``drain``: go on and drain, stamping ``comment``; else the breaker holds the node and
    ``comment`` is the trip's stamp ("" when it had tripped already). ``why``: for the log."""

    drain: bool
    why: str
    comment: str = ""


def tripped(nodes: Iterable[Seen]) -> Seen | None:
    """The node holding the trip stamp, when the breaker is tripped."""
    return next((n for n in nodes if n.tripped_at() is not None), None)


def recent(nodes: Iterable[Seen], now: float, window_s: int) -> list[str]:
    """The GPU nodes automatic drains took within the window: drained by the check now, or
    stamped drained within ``window_s``."""
    out = []
    for node in nodes:
        at = node.drained_at()
        if node.gpu and (node.drained_by_check or (at is not None and now - at <= window_s)):
            out.append(node.name)
    return sorted(out)


def decide(node: str, cause: str, nodes: Sequence[Seen], breaker: Breaker,
           now: float) -> Decision:
    """Whether the check may drain ``node`` for ``cause`` now."""
    held = tripped(nodes)
    if held is not None:
        return Decision(False, f"the breaker is tripped ({held.name}: {held.comment}): no "
                               "automatic drain until a person resets it (gpuinfra health "
                               "reset-breaker)")
    gpu_nodes = sum(1 for n in nodes if n.gpu)
    taken = [n for n in recent(nodes, now, breaker.window_s) if n != node]
    most = breaker.most(gpu_nodes)
    if len(taken) + 1 > most:
        why, stamp = _trip(f"{len(taken)} of {gpu_nodes} GPU nodes drained automatically within "
                           f"{breaker.window_s} s {_listed(taken)}", most, breaker, node, cause,
                           now)
        return Decision(False, f"the breaker trips: {why}", stamp)
    return Decision(True, f"{len(taken) + 1} of at most {most} automatic drains in the window",
                    f"{DRAINED_MARK} {int(now)}")


def settle(node: str, cause: str, nodes: Sequence[Seen], breaker: Breaker,
           now: float) -> Decision:
    """After ``node`` was drained and :data:`SETTLE_S` passed: keep the drain, or give it back
    (``drain`` False: resume it) when racing drains on other nodes took the share first. The
    drains are ranked: resumed within the window first, then by slurmctld's reason time, then
    by name."""
    # A trip meanwhile changes nothing here: the node that tripped it counted this drain, and
    # the ranks below say the same on every node (giving it back too would drain none).
    counted = {n for n in recent(nodes, now, breaker.window_s)} | {node}
    ranked = sorted((n for n in nodes if n.name in counted),
                    key=lambda n: (n.since if n.drained_by_check else "", n.name))
    names = [n.name for n in ranked]
    most = breaker.most(sum(1 for n in nodes if n.gpu))
    if node not in names or names.index(node) < most:
        return Decision(True, f"drain kept ({len(names)} of at most {most} in the window)")
    before = names[:names.index(node)]
    why, stamp = _trip(f"{len(before)} GPU nodes were drained automatically within "
                       f"{breaker.window_s} s before it {_listed(before)}", most, breaker, node,
                       cause, now)
    return Decision(False, f"the breaker trips: {why}; drain given back", stamp)


def _listed(names: Sequence[str]) -> str:
    return f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"


def _trip(counted: str, most: int, breaker: Breaker, node: str, cause: str,
          now: float) -> tuple[str, str]:
    """Why the breaker holds ``node`` (after what ``counted`` says), and the trip's stamp."""
    why = (f"{counted}, the most allowed is {most} (health_breaker_share {breaker.share:g}); "
           f"{node} held: {cause}")
    return why, _clip(f"{TRIPPED_MARK} tripped {int(now)}: {why}")


def _clip(text: str) -> str:
    text = " ".join(text.replace('"', "'").split())
    return text if len(text) <= COMMENT_LIMIT else text[:COMMENT_LIMIT - 3] + "..."


def comment(node: str, text: str) -> list[str]:
    """The command that sets ``node``'s Comment (``""`` clears it)."""
    return ["scontrol", "update", f"NodeName={node}", f"Comment={text}"]


def reset(nodes: Iterable[Seen]) -> list[list[str]]:
    """The commands clearing every trip stamp (the drain stamps stay: the window's memory)."""
    return [comment(n.name, "") for n in nodes if n.tripped_at() is not None]
