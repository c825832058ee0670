"""`gpuinfra roll`'s check before it drains anything (issue 49): each Slurm worker it will roll
is on a release whose Slurm the head's slurmctld accepts. A worker reinstalled on Debian 13
(Slurm 24.11) under a head on Debian 12 (22.05) would otherwise be drained, deployed, and left
out of service: its slurmd cannot register with an older slurmctld.

What it sends, read-only: on the head, ``sinfo --version`` (the roll's head channel); on each
Slurm worker the roll will take, ``. /etc/os-release && echo "$ID-$VERSION_ID"`` (the roll's
channel to that node, through ``sudo -n`` with ``--sudo``). Workers outside Slurm (Kubernetes
only) are not read, and a roll with no Slurm worker asks the head nothing. The judgement is
the library's (:func:`gpuinfra.slurm.mixed.roll_problem`); a refusal is exit 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.slurm import SLURM_VERSION, parse_slurm_version
from gpuinfra.platforms import RELEASE_COMMAND
from gpuinfra.slurm.mixed import roll_problem

UNTOUCHED = "No node was drained or changed"


def node_release(roller: Any, name: str) -> str:
    """``name``'s distribution key (``debian-13``), read over the roll's channel to it."""
    why = (f"the roll reads each Slurm worker's release before it drains anything; reach "
           f"{name}, or leave it out of this roll (--limit). {UNTOUCHED}")
    try:
        rc, out, err = roller.host(name).run(RELEASE_COMMAND, timeout=30)
    except Exception as exc:  # unreachable, refused key: said, not a traceback
        raise GpuinfraError(f"{name}: cannot read its release over SSH ({exc}): {why}") from None
    if rc != 0:
        words = ((err or out).strip().splitlines() or [f"exit {rc}"])[-1][:200]
        raise GpuinfraError(f"{name}: `{RELEASE_COMMAND}` failed (exit {rc}): {words}: {why}")
    return out.strip().lower()


def refuse_mixed_slurm(roller: Any, names: Sequence[str]) -> None:
    """GpuinfraError when a Slurm worker of ``names`` runs a Slurm the head's would not accept
    (:func:`gpuinfra.slurm.mixed.roll_problem`); ``roller`` is the command's Roll."""
    workers = [n for n in names if roller.in_slurm(n)]
    if not workers:
        return
    head = roller.site.spec.head[0].name
    said = roller.on_head(SLURM_VERSION, f"cannot read the Slurm of the head {head} "
                                         f"(`{SLURM_VERSION}`). {UNTOUCHED}")
    try:
        controller = parse_slurm_version(said)
    except GpuinfraError as exc:
        raise GpuinfraError(f"the head {head}: {exc}. {UNTOUCHED}") from None
    problem = roll_problem({n: node_release(roller, n) for n in workers}, head, controller)
    if problem:
        raise GpuinfraError(problem)
