"""The rules of a rolling change (`gpuinfra roll`): how many nodes are out at once, what each
node goes through, what Slurm and Kubernetes are told, and the roll's state on the head. Pure:
the command (gpuinfra_cli/roll.py) runs what these return and feeds back what the nodes answer.

A roll keeps at most ``max_unavailable`` workers out of service at once (inventory order), a
sliding window, not fixed batches: when one node is back, the next is taken. Each node:

1. **waiting**: drained (Slurm, reason ``gpuinfra-roll: <why>``; Kubernetes: cordoned and
   drained, its PodDisruptionBudgets respected), its jobs left to end: no bound unless the
   roll was given one (``--wait-jobs``);
2. deployed once nothing runs on it (a driver's libraries are never swapped under a job:
   gpuinfra/driverchange.py);
3. **rebooting**, when its change needs it (the reboot marker) or the roll was asked to: on
   Slurm ``scontrol reboot ASAP nextstate=RESUME reason=...``, so Slurm itself reboots it
   (never under a job: the node is drained and idle) and returns it to service when its
   slurmd registers, after the HealthCheckProgram ran once (scontrol(1), ``reboot``): a laptop
   that goes away no longer leaves the node out;
4. deployed again on the loaded driver (after a reboot), judged by its own health check
   (gpuinfra.health: the verify suite's rules), resumed: **done**; or **failed**: left drained
   with the cause. The roll takes no new node once more than ``max_fail`` failed.

The state (:class:`RollState`) is written on the head after every step, so a rerun of the same
command after an interrupted laptop resumes where it stopped, ``gpuinfra roll --status`` shows
it, and another roll is refused while it is live.

The reason starts ``gpuinfra-roll:``, not ``gpuinfra:``: the node health check resumes the nodes
it drained itself (``gpuinfra:``) and never one drained by anyone else, so it cannot put a node
back into service in the middle of its roll.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.health.judge import REASON_LIMIT
from gpuinfra.health.slurm import drained
from gpuinfra.parsers.slurm import SlurmNode

PREFIX = "gpuinfra-roll:"


def max_unavailable(text: str, workers: int, option: str = "--max-unavailable") -> int:
    """How many workers may be out at once: ``N`` or ``P%`` of the site's ``workers`` (rounded
    down, at least 1, as Kubernetes rounds a rolling update's maxUnavailable). A roll never
    takes every worker out at once (unless the site has one)."""
    value = str(text).strip()
    most = max(workers - 1, 1)
    fix = f"between 1 and {most}, or a share such as 25%"
    try:
        if value.endswith("%"):
            share = int(value[:-1])
            if not 0 < share <= 100:
                raise GpuinfraError(f"{option} {text}: a share above 0% and at most 100%; {fix}")
            count = max(workers * share // 100, 1)
        else:
            count = int(value)
    except ValueError:
        raise GpuinfraError(f"{option} {text!r}: a number of nodes or a share; {fix}") from None
    if count < 1:
        raise GpuinfraError(f"{option} {text}: at least one node is taken at a time; {fix}")
    if count > most:
        raise GpuinfraError(f"{option} {text}: {count} of the site's {workers} worker(s); a "
                            f"roll never takes every worker out at once: {fix}")
    return count


def max_fail(text: str, nodes: int) -> int:
    """How many nodes may fail before the roll takes no new one: ``N`` (0: stop at the first)
    or ``P%`` of the roll's ``nodes`` (rounded down), as Ansible's max_fail_percentage."""
    value = str(text).strip()
    try:
        count = (nodes * int(value[:-1]) // 100) if value.endswith("%") else int(value)
        share_ok = not value.endswith("%") or 0 <= int(value[:-1]) <= 100
    except ValueError:
        count, share_ok = -1, False
    if count < 0 or not share_ok:
        raise GpuinfraError(f"--max-fail {text!r}: a number of nodes (0: stop at the first "
                            "failure) or a share of the roll's nodes, such as 10%")
    return count


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


def reboot(nodes: Sequence[str], why: str) -> str:
    """Slurm reboots ``nodes`` once idle (``ASAP`` keeps them drained until then), then returns
    them to service (``nextstate=RESUME`` clears the drain and the reason) when slurmd
    registers after the boot, the HealthCheckProgram having run once (scontrol(1),
    ``reboot``). Run as root on the head: RebootProgram (slurm.conf) does the reboot."""
    return (f"scontrol reboot ASAP nextstate=RESUME reason={shlex.quote(reason(why))} "
            f"{shlex.quote(','.join(nodes))}")


def reboot_pending(node: SlurmNode) -> bool:
    """Slurm was asked to reboot ``node`` and has not seen it back: requested (``@``), issued
    (``^``, ``reboot``)."""
    state = node.state.lower()
    return state.endswith(("@", "^")) or state.startswith("reboot")


def rebooting(node: SlurmNode | None) -> bool:
    """Slurm still has a reboot of ``node`` to do or to see through: requested (``@``, a job
    still on it), issued (``^``, ``reboot``) or not yet registered since."""
    return node is None or reboot_pending(node) or not back(node)


# ---------------------------------------------------------------------- the roll's state

STATE_FILE = "/var/lib/gpuinfra/roll.json"
FORMAT = 1
# A roll whose command wrote nothing for this long is not being driven (a laptop killed, its
# connection lost): another command may take it over. Each step writes the state every 2 s.
STALE_S = 30
PHASES = ("pending", "waiting", "rebooting", "done", "failed")
IN_FLIGHT = ("waiting", "rebooting")


@dataclass
class NodeState:
    name: str
    phase: str = "pending"
    since: float = 0.0
    cause: str = ""          # why it failed, or why it was left drained
    kept: bool = False       # drained by someone else before the roll: changed, left drained

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "phase": self.phase, "since": self.since,
                "cause": self.cause, "kept": self.kept}


@dataclass
class RollState:
    """What the head keeps of a roll (``STATE_FILE``, root's, 0600): what was asked, each
    node's phase, and which command drives it now."""

    why: str
    data: list[str]
    reboot: bool
    max_unavailable: int
    max_fail: int
    nodes: list[NodeState]
    started: float
    by: str
    driver: str = ""          # "<pid>@<host> <token>" of the command driving it; "" when none
    finished: bool = False
    outcome: str = ""

    def fingerprint(self) -> tuple[Any, ...]:
        """What makes a rerun the same roll: the change and the nodes, not the pace."""
        return (self.why, tuple(self.data), self.reboot, tuple(n.name for n in self.nodes))

    def node(self, name: str) -> NodeState:
        return next(n for n in self.nodes if n.name == name)

    def phase(self, *phases: str) -> list[NodeState]:
        return [n for n in self.nodes if n.phase in phases]

    def failed(self) -> int:
        return len(self.phase("failed"))

    def may_start(self) -> bool:
        """A new node may be taken: fewer than ``max_unavailable`` in flight, at most
        ``max_fail`` failed, a pending node left, the roll not finished."""
        return (not self.finished and self.failed() <= self.max_fail
                and len(self.phase(*IN_FLIGHT)) < self.max_unavailable
                and bool(self.phase("pending")))

    def settled(self) -> bool:
        """Nothing in flight and nothing more to start: the roll is over."""
        return not self.phase(*IN_FLIGHT) and not self.may_start()

    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT, "why": self.why, "data": self.data, "reboot": self.reboot,
            "max_unavailable": self.max_unavailable, "max_fail": self.max_fail,
            "started": self.started, "by": self.by, "driver": self.driver,
            "finished": self.finished, "outcome": self.outcome,
            "nodes": [n.to_json() for n in self.nodes]}, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str = STATE_FILE) -> RollState:
        """The state read back; a file it cannot read is named with what to do."""
        fix = (f"{where} on the head is not a roll state this gpuinfra reads: look at it, then "
               "`gpuinfra roll --abandon` (the nodes stay as they are) and roll again")
        try:
            raw = json.loads(text)
            if raw.get("format") != FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, not {FORMAT}")
            nodes = [NodeState(str(n["name"]), str(n["phase"]), float(n["since"]),
                               str(n.get("cause", "")), bool(n.get("kept", False)))
                     for n in raw["nodes"]]
            bad = [n.phase for n in nodes if n.phase not in PHASES]
            if bad:
                raise ValueError(f"phase {bad[0]!r}")
            return cls(str(raw["why"]), [str(d) for d in raw["data"]], bool(raw["reboot"]),
                       int(raw["max_unavailable"]), int(raw["max_fail"]), nodes,
                       float(raw["started"]), str(raw["by"]), str(raw.get("driver", "")),
                       bool(raw.get("finished", False)), str(raw.get("outcome", "")))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise GpuinfraError(f"{fix} ({exc})") from None


def refusal(live: RollState, mine: RollState, age_s: float, token: str) -> str:
    """Why a new command may not drive the roll on the head ("" when it may): another roll's
    state is live, or another command drives this one now."""
    if live.finished:
        return ""
    done = len(live.phase("done"))
    what = (f"a roll is live on the head: {live.why!r}, started by {live.by}, "
            f"{done} of {len(live.nodes)} node(s) done")
    if live.fingerprint() != mine.fingerprint():
        return (f"{what}. Finish it first: run the command that started it again (same "
                "--why, --data, --reboot and nodes) to resume it, `gpuinfra roll --status` to "
                "see where it is, or `gpuinfra roll --abandon` to drop it (its nodes stay as "
                "they are)")
    if live.driver and not live.driver.endswith(f" {token}") and age_s < STALE_S:
        return (f"{what}, and another command drives it now ({live.driver.rsplit(' ', 1)[0]}, "
                f"{age_s:.0f} s ago): wait for it, or stop it; a command that stopped without "
                f"a word is taken over after {STALE_S} s")
    return ""


def jobs_by_node(jobs: Sequence[Job], names: dict[str, str]) -> dict[str, list[str]]:
    """The job ids on each node: ``names`` maps a node's Slurm name to the roll's name."""
    out: dict[str, list[str]] = {}
    for job in jobs:
        for host in sorted(_hosts(job.node)):
            if host in names:
                out.setdefault(names[host], []).append(job.job)
    return out


def status_lines(state: RollState, slurm: dict[str, SlurmNode], jobs: dict[str, list[str]],
                 now: float, driven: str) -> list[str]:
    """``gpuinfra roll --status``: the roll and each node, in words; ``slurm`` and ``jobs``
    by the roll's node names."""
    done = len(state.phase("done"))
    lines = [f"roll {state.why!r}: started {_clock(state.started)} by {state.by}; "
             f"{done} of {len(state.nodes)} done, {state.failed()} failed; at most "
             f"{state.max_unavailable} out at once, takes no new node past "
             f"{state.max_fail} failure(s)",
             f"  {state.outcome or 'finished'}" if state.finished else f"  {driven}"]
    for node in state.nodes:
        seen = slurm.get(node.name)
        slurm_says = f" [slurm: {seen.state}]" if seen else ""
        if node.phase == "waiting":
            mine = jobs.get(node.name, [])
            what = (f"drained, waiting for job(s) {', '.join(mine)}" if mine
                    else "drained, no job left: being changed")
        elif node.phase == "rebooting":
            what = "rebooting (Slurm reboots it once idle, resumes it when it is back)"
        elif node.phase == "failed":
            what = f"failed, left drained: {node.cause}"
        elif node.phase == "done":
            what = "done" + (f", left drained ({node.cause})" if node.kept else "")
        else:
            what = "not started"
        since = f" since {_clock(node.since)} ({_ago(now - node.since)})" if node.since else ""
        lines.append(f"  {node.name:<20} {what}{since}{slurm_says}")
    return lines


def _hosts(nodelist: str) -> set[str]:
    """The host names of a Slurm node list as squeue prints it (``a[1-2],b``)."""
    out: set[str] = set()
    for prefix, inner, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,]+)", nodelist):
        if plain:
            out.add(plain)
            continue
        for part in inner.split(","):
            low, _, high = part.partition("-")
            if high and low.isdigit() and high.isdigit():
                out |= {f"{prefix}{i:0{len(low)}d}" for i in range(int(low), int(high) + 1)}
            else:
                out.add(f"{prefix}{part}")
    return out


def _clock(when: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))


def _ago(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    return f"{seconds // 60} min {seconds % 60} s ago" if seconds >= 60 else f"{seconds} s ago"


# ---------------------------------------------------------------------- the roll's metrics

# Written beside the state at every step, into node_exporter's textfile directory on the head
# (where the monitoring role serves it): the RollStalled alert reads it.
METRICS_FILE = "gpuinfra-roll.prom"
STALLED_S = 3600  # a live roll no command has driven for this long: RollStalled


def metrics_text(state: RollState) -> str:
    """The roll's series; the time of its last step is the head's (``$NOW``, replaced by the
    command that writes the file)."""
    live = 0 if state.finished else 1
    lines = ["# HELP gpuinfra_roll_live 1 while a roll is not finished (its state on the head)",
             "# TYPE gpuinfra_roll_live gauge", f"gpuinfra_roll_live {live}",
             "# HELP gpuinfra_roll_last_step_timestamp_seconds when a roll command last wrote "
             "its state", "# TYPE gpuinfra_roll_last_step_timestamp_seconds gauge",
             "gpuinfra_roll_last_step_timestamp_seconds $NOW",
             "# HELP gpuinfra_roll_nodes the roll's nodes in each phase",
             "# TYPE gpuinfra_roll_nodes gauge"]
    lines += [f'gpuinfra_roll_nodes{{phase="{phase}"}} {len(state.phase(phase))}'
              for phase in PHASES]
    return "\n".join(lines) + "\n"
