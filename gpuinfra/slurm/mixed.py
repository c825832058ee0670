"""Slurm nodes on different distributions, hence different Slurm releases: which mixes Slurm
runs, by SchedMD's version rules (issue 49, item 3).

The roles install each distribution's own Slurm (:data:`gpuinfra.slurm.versions.SLURM_VERSIONS`),
so a site whose head is on one release and whose workers are on another runs two Slurm
versions side by side. Slurm allows that only in one direction and within a window:

- SchedMD's Upgrade Guide (https://slurm.schedmd.com/upgrades.html): "Slurm has long supported
  in-place upgrades from the previous two major releases. With the change to a 6-month cycle in
  2024, Slurm 24.11 introduced compatibility with the previous three major releases. For
  example, slurmdbd 25.11.x is capable of accepting messages from slurmctld daemons and
  commands with a version of 25.11.x, 25.05.x, 24.11.x, or 24.05.x";
- RELEASE_NOTES of 24.11: "If using the slurmdbd (Slurm DataBase Daemon) you must update this
  first ... Slurm can be upgraded from version 23.02, 23.11 or 24.05 to version 24.11 without
  loss of jobs or other state information";
- RELEASE_NOTES of 22.05: "The 22.05 slurmdbd will work with Slurm daemons of version 20.11 and
  above ... Slurm can be upgraded from version 20.11 or 21.08 to version 22.05".

So every slurmdbd >= every slurmctld >= every slurmd and every host of client commands (the
commands talk to slurmctld and slurmdbd), the controllers on one version (a backup takes over
the head's saved state), and each older one within the newer daemon's window:
:func:`accepts`. The deploy judges the hosts it reaches (:func:`mixed_release_problem`);
`gpuinfra roll` judges each worker it will roll against the Slurm the head runs
(:func:`roll_problem`), before it drains anything. Sites without Slurm may mix releases freely:
each host gets its own distribution's tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuinfra.slurm.versions import SLURM_VERSIONS

# Slurm's major releases, in order (SchedMD's release series).
RELEASES: tuple[tuple[int, int], ...] = (
    (20, 11), (21, 8), (22, 5), (23, 2), (23, 11), (24, 5), (24, 11), (25, 5), (25, 11))
# From 24.11 a daemon accepts the previous three majors; before it, the previous two
# (the Upgrade Guide above).
THREE_BACK_FROM = (24, 11)

SOURCE = ("SchedMD's Upgrade Guide, https://slurm.schedmd.com/upgrades.html, and the "
          "RELEASE_NOTES of 22.05 and 24.11")
RULE = ("slurmdbd >= slurmctld >= slurmd and the client commands, the controllers on one "
        "version, and each older one at most two major releases behind the newer daemon "
        "(three from Slurm 24.11)")
FIX = ("keep every Slurm node on one release, or move the whole Slurm site to the new "
       "release in one maintenance window (docs/upgrade-debian-13.md, 'Mixed releases')")
ROLL_FIX = ("put the node back on a release whose Slurm the head's accepts, or move the whole "
            "Slurm site in one maintenance window, head first: slurmdbd, slurmctld, then the "
            "workers (docs/upgrade-debian-13.md, 'A Slurm site')")

SLURMDBD, SLURMCTLD, SLURMD, COMMANDS = "slurmdbd", "slurmctld", "slurmd", "commands"
# (the newer side, the side it accepts), checked in this order: one line per pair of hosts,
# the first broken rule (a backup controller on another release is the controllers' mismatch,
# not also the head's slurmdbd's).
_EDGES = ((SLURMCTLD, SLURMCTLD), (SLURMDBD, SLURMCTLD), (SLURMCTLD, SLURMD),
          (SLURMCTLD, COMMANDS), (SLURMDBD, COMMANDS))
_WORDS = {SLURMDBD: "slurmdbd", SLURMCTLD: "slurmctld", SLURMD: "slurmd",
          COMMANDS: "the client commands"}


@dataclass(frozen=True)
class SlurmHost:
    """A Slurm node of the site: its name, distribution key (``debian-12``) and what of Slurm
    runs there: a subset of slurmdbd, slurmctld, slurmd, commands (:func:`daemons`)."""

    name: str
    distro: str
    runs: frozenset[str]


def daemons(controller: bool, worker: bool, slurmdbd: bool = False) -> frozenset[str]:
    """What of Slurm a node runs: slurmctld on a controller (the head, a backup), slurmdbd where
    accounting runs, slurmd on a worker; a node with neither daemon (a login node) runs the
    client commands. The commands beside a daemon are the same release as it: judged with it."""
    runs = {SLURMCTLD} if controller else set()
    runs |= {SLURMDBD} if slurmdbd else set()
    runs |= {SLURMD} if worker else set()
    return frozenset(runs or {COMMANDS})


def text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]:02d}"


def window(version: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    """The older majors a daemon of ``version`` accepts (besides its own)."""
    at = RELEASES.index(version)
    back = 3 if version >= THREE_BACK_FROM else 2
    return RELEASES[max(0, at - back):at][::-1]


def accepts(newer: tuple[int, int], older: tuple[int, int]) -> bool:
    """Whether a daemon of Slurm ``newer`` accepts one (or commands) of ``older``: the same
    major, or one in its :func:`window`."""
    return older == newer or older in window(newer)


def _group(hosts: Sequence[SlurmHost], role: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for h in hosts:  # a distribution with no known Slurm is refused by the roles' tables
        if role in h.runs and h.distro in SLURM_VERSIONS:
            found.setdefault(h.distro, []).append(h.name)
    return found


def _side(role: str, names: list[str], distro: str) -> str:
    return (f"{_WORDS[role]} on {', '.join(names)} ({distro}, Slurm "
            f"{text(SLURM_VERSIONS[distro])})")


def _cause(upper: str, up: tuple[str, list[str]], lower: str,
           low: tuple[str, list[str]]) -> str | None:
    """Why ``lower``'s hosts ``low`` (distro, names) cannot work under ``upper``'s ``up``; None
    when they can."""
    newer, older = SLURM_VERSIONS[up[0]], SLURM_VERSIONS[low[0]]
    if upper == lower == SLURMCTLD:
        return None if newer == older else (
            f"the controllers run different Slurm: {_side(upper, up[1], up[0])}, "
            f"{_side(lower, low[1], low[0])}: a backup takes over the head's saved state")
    if accepts(newer, older):
        return None
    verb = "are" if lower == COMMANDS else "is"
    if older > newer:
        return (f"{_side(lower, low[1], low[0])} {verb} newer than "
                f"{_side(upper, up[1], up[0])}, which accepts no newer release")
    kept = ", ".join(text(v) for v in window(newer))
    return (f"{_side(lower, low[1], low[0])} {verb} too old for {_side(upper, up[1], up[0])}, "
            f"which accepts {kept} besides its own")


def mixed_release_causes(hosts: Sequence[SlurmHost]) -> list[str]:
    """Why the Slurm nodes ``hosts`` cannot run together, one line per pair of host groups
    (each group: the hosts of one role on one distribution); [] when Slurm runs them."""
    causes: dict[frozenset[str], str] = {}
    for upper, lower in _EDGES:
        for up in _group(hosts, upper).items():
            for low in _group(hosts, lower).items():
                key = frozenset(up[1]) | frozenset(low[1])
                if up[0] == low[0] or key in causes:
                    continue
                cause = _cause(upper, up, lower, low)
                if cause:
                    causes[key] = cause
    return list(causes.values())


def mixed_release_problem(hosts: Sequence[SlurmHost]) -> str | None:
    """The operator's message for ``hosts`` (:func:`mixed_release_causes`): the causes, the
    rule with its source and the fix, once; None when Slurm runs them together."""
    causes = mixed_release_causes(hosts)
    if not causes:
        return None
    return (f"the Slurm nodes run Slurm releases that cannot work together: {'; '.join(causes)}. "
            f"Slurm's rule ({SOURCE}): {RULE}. Fix: {FIX}. No host was changed")


def _under_head(node: str, distro: str, head: str, controller: tuple[int, int]) -> str | None:
    """Why ``node``'s slurmd (the Slurm of ``distro``) cannot register with the slurmctld of
    Slurm ``controller`` on ``head``; None when it can."""
    theirs = f"the head {head}'s slurmctld {text(controller)}"
    version = SLURM_VERSIONS.get(distro)
    if version is None:
        return (f"{node} runs {distro!r}, a release whose Slurm gpuinfra does not know "
                f"(gpuinfra/slurm/versions.py: {', '.join(SLURM_VERSIONS)}): whether "
                f"{theirs} accepts its slurmd cannot be told")
    mine = f"{node} ({distro}) runs slurmd {text(version)}"
    if version == controller:
        return None
    if controller not in RELEASES:
        return (f"{mine} and {theirs} is a release gpuinfra/slurm/mixed.py has no window for "
                f"(it knows {', '.join(text(v) for v in RELEASES)})")
    if accepts(controller, version):
        return None
    if version > controller:
        return f"{mine}, newer than {theirs}, which accepts no newer release"
    kept = ", ".join(text(v) for v in window(controller))
    return f"{mine}, too old for {theirs}, which accepts {kept} besides its own"


def roll_problem(nodes: Mapping[str, str], head: str,
                 controller: tuple[int, int]) -> str | None:
    """Why a roll of the Slurm workers ``nodes`` ({name: distribution key, as
    ``/etc/os-release``'s ID-VERSION_ID}) must not start under ``head``, whose Slurm is
    ``controller`` (``sinfo --version`` there): each node whose slurmd its slurmctld would not
    accept (:func:`accepts`; a release of unknown Slurm is refused too), then the rule with
    its source and the fix, once; None when every node may be rolled. Such a node, once
    deployed, could not register: drained and out of service."""
    causes = [c for name, distro in nodes.items()
              if (c := _under_head(name, distro, head, controller))]
    if not causes:
        return None
    return (f"the roll would leave Slurm nodes out of service: {'; '.join(causes)}. Slurm's rule "
            f"({SOURCE}): {RULE}. Fix: {ROLL_FIX}. No node was drained or changed")
