"""The site's fabric (``fabric_switches``): which Slurm nodes hang on which leaf switch, and which
switches hang on which, checked into a tree that Slurm's topology/tree plugin reads
(topology.conf, written by gpuinfra.slurm.topology).

The format, in group_data/<site>.py::

    fabric_switches = {
        "leaf1": ["gpu01", "gpu02"],      # a leaf: the nodes cabled to it
        "leaf2": ["gpu03", "gpu04"],
        "spine": ["leaf1", "leaf2"],      # above the leaves: switch names
    }

What topology.conf(5) (Slurm 22.05.8, Debian 12's slurm-wlm-doc; the same text in 23.11 and
24.11) asks, refused here before any host is touched: "All nodes in the network must be
connected to at least one switch" (a Slurm node on no leaf, while others are on one); each
switch defined once and a tree (slurmctld 22.05.8, measured in a lab container: "fatal: Switch
configuration is not a tree", "fatal: Switch configuration spine has invalid child (leaf3)",
"error: WARNING: Multiple leaf switches contain nodes", "error: _find_node_record: lookup
failure for node"). A leaf names nodes, a switch above names switches, never both ("Nodes:
Child Nodes of the named leaf switch"). Several roots are allowed, with a warning: "Jobs can only
span nodes connected by the same switch fabric, even if there are available idle nodes in other
areas of the cluster".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.spec.checks import CLUSTER, WHERE_ALL, Collector
from gpuinfra.spec.model import Fabric, NodeSpec, SpecWarning, Switch
from gpuinfra.spec.rules import clip

FIELD = "fabric_switches"
# A switch name as topology.conf reads it: Slurm's hostlist parser splits on ',' and expands
# '[...]', so neither may be in a name; matched whole.
_SWITCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SWITCH_ALLOWED = ("up to 64 letters, digits, '_', '.' and '-', starting with a letter or "
                  "digit (no commas or brackets: Slurm reads lists of names)")
MAX_SWITCHES = 10000
EXAMPLE = ("fabric_switches = {'leaf1': ['gpu01', 'gpu02'], 'leaf2': ['gpu03'], "
           "'spine': ['leaf1', 'leaf2']}")


def fabric(raw: Any, schedulers: Sequence[str], nodes: Sequence[NodeSpec],
           errs: Collector) -> tuple[Fabric | None, list[SpecWarning]]:
    """The site's fabric (None: not given, or refused: each problem is in ``errs``) and its
    warnings."""
    if raw is None:
        return None, []
    if "slurm" not in schedulers:
        errs.add(CLUSTER, FIELD, raw, "only Slurm reads the fabric (topology.conf), and this "
                 "site runs no Slurm", "fabric_switches on a site whose schedulers include "
                 "'slurm'", f"remove fabric_switches {WHERE_ALL}, or add 'slurm' to schedulers")
        return None, []
    if not isinstance(raw, Mapping) or not raw:
        errs.add(CLUSTER, FIELD, raw, "must be a non-empty dict: switch name -> the nodes (a "
                 "leaf) or the switches under it", "a dict of lists of names", f"write "
                 f"{EXAMPLE} {WHERE_ALL}")
        return None, []
    if len(raw) > MAX_SWITCHES:
        errs.add(CLUSTER, FIELD, f"{len(raw)} switches", "too many switches",
                 f"at most {MAX_SWITCHES}", "describe the fabric's leaves and the switches "
                 "above them, not every port")
        return None, []
    before = len(errs.errors)
    slurm_nodes = [n for n in nodes if n.is_worker and "slurm" in n.schedulers]
    by_name = {n.name: n for n in nodes} | {n.short_name: n for n in nodes}
    slurm_names = {n.name for n in slurm_nodes}

    def bad(switch: str, value: Any, problem: str, allowed: str, fix: str) -> None:
        errs.add(CLUSTER, f"{FIELD}[{clip(switch)}]", value, problem, allowed,
                 f"{fix} {WHERE_ALL}")

    switches: list[Switch] = []
    for name, children in raw.items():
        if not isinstance(name, str) or not _SWITCH.fullmatch(name):
            bad(str(name), name, "not a switch name", SWITCH_ALLOWED, "rename the switch")
            continue
        if name in by_name:
            bad(name, name, f"{name!r} is also a host of the inventory: a child named so "
                "could be either", "switch names that are no host's name",
                f"rename the switch (e.g. '{name}-sw')")
            continue
        if not isinstance(children, (list, tuple)) or not children \
                or not all(isinstance(c, str) for c in children):
            bad(name, children, "must be a non-empty list of names: the nodes cabled to this "
                "leaf, or the switches under it", "a list of host or switch names",
                f"write '{name}': ['gpu01', 'gpu02']")
            continue
        kids = [c for c in children if c in raw]
        hosts = [c for c in children if c not in raw]
        unknown = [c for c in hosts if c not in by_name]
        if unknown:
            bad(name, unknown[0], f"{unknown[0]!r} is neither a host of the inventory nor a "
                "switch of fabric_switches", "host names (inventory or short) and switch names",
                "fix the name, or add the host to inventory/<site>.py")
            continue
        if kids and hosts:
            bad(name, children, "names both nodes and switches: Slurm's leaf switches hold "
                "nodes, the switches above them hold switches", "only nodes (a leaf) or only "
                "switches", f"put the nodes {hosts} on a leaf of their own under {name!r}")
            continue
        if outside_slurm(name, hosts, by_name, slurm_names, bad, "switch"):
            continue
        dupes = sorted({c for c in children if children.count(c) > 1})
        if dupes:
            bad(name, dupes[0], f"{dupes[0]!r} is listed twice on this switch",
                "each child once", f"remove the second {dupes[0]!r}")
            continue
        switches.append(Switch(name, nodes=tuple(by_name[h].name for h in hosts),
                               switches=tuple(kids)))
    if len(errs.errors) > before:
        return None, []
    _check_tree(switches, bad)
    leaves = _above(switches, "nodes")
    for node, on in leaves.items():
        if len(on) > 1:
            bad(on[1], node, f"{node} is on {len(on)} leaf switches ({', '.join(on)}): Slurm "
                "places a node under one leaf", "each node on one leaf",
                f"keep {node} on the leaf it is cabled to")
    missing = [n.name for n in slurm_nodes if n.name not in leaves]
    if missing:
        errs.add(CLUSTER, FIELD, missing, f"{len(missing)} Slurm node(s) on no switch while "
                 f"others are: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''} "
                 "(topology.conf(5): 'All nodes in the network must be connected to at least "
                 "one switch'; slurmctld would leave them out of every multi-node job)",
                 "every Slurm worker on one leaf switch",
                 f"add each to the leaf it is cabled to {WHERE_ALL}")
    if len(errs.errors) > before:
        return None, []
    result = Fabric(tuple(switches))
    warnings = []
    if len(result.roots) > 1:
        warnings.append(SpecWarning(
            CLUSTER, FIELD, f"{len(result.roots)} switches have no switch above them "
            f"({', '.join(result.roots)}): Slurm never gives one job nodes under two of them "
            "(topology.conf(5): 'Jobs can only span nodes connected by the same switch fabric')."
            " If they are cabled together, add the switch that joins them"))
    return result, warnings


def outside_slurm(group: str, members: Sequence[str], by_name: Mapping[str, NodeSpec],
                  slurm_names: set[str], bad: Any, what: str) -> bool:
    """A member of switch or block ``group`` (``what``) that is no Slurm worker, said through
    ``bad``: topology.conf names only the nodes of slurm.conf. True when there is one."""
    outside = [m for m in members if by_name[m].name not in slurm_names]
    if outside:
        bad(group, outside[0], f"{outside[0]!r} is not a Slurm compute node (not in "
            "'workers', or its node_schedulers leave Slurm out): topology.conf names only the "
            f"nodes of slurm.conf", "Slurm workers", f"remove {outside[0]!r} from the {what}")
    return bool(outside)


def _above(switches: Sequence[Switch], kind: str) -> dict[str, list[str]]:
    """Each child (``kind``: "nodes" or "switches") -> the switches it is listed under."""
    out: dict[str, list[str]] = {}
    for s in switches:
        for child in getattr(s, kind):
            out.setdefault(child, []).append(s.name)
    return out


def _check_tree(switches: Sequence[Switch], bad: Any) -> None:
    """Each switch under one parent at most, and no loop (slurmctld: 'not a tree')."""
    parents = _above(switches, "switches")
    for child, above in parents.items():
        if len(above) > 1:
            bad(above[1], child, f"switch {child!r} is under {len(above)} switches "
                f"({', '.join(above)}): Slurm reads the fabric as a tree, each switch under "
                "one", "each switch under one switch at most", f"keep {child!r} under one "
                "of them (a fat tree's spines are described as one switch)")
            return
    under = {s.name: s.switches for s in switches}
    for start in under:
        seen, name = [start], start
        while True:
            above = parents.get(name)
            if not above:
                break
            name = above[0]
            if name in seen:
                loop = seen[seen.index(name):] + [name]
                bad(name, " -> ".join(reversed(loop)), "the switches form a loop: Slurm "
                    "reads the fabric as a tree (slurmctld: 'Switch configuration is not a "
                    "tree')", "a tree: leaves under switches, one top switch per fabric",
                    "remove one switch of the loop from its parent's list")
                return
            seen.append(name)
