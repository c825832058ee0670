"""The site's NVLink blocks (``fabric_blocks``): which Slurm nodes share one rack-scale NVLink
domain (a GB200 NVL72 rack: 18 compute trays of 4 GPUs), for Slurm's topology/block plugin
(topology.conf ``BlockName=`` lines, written by gpuinfra.slurm.topology).

The format, in group_data/<site>.py::

    fabric_blocks = {
        "nvl72-rack1": ["gb001", "gb002", ...],   # the nodes of one NVLink domain
        "nvl72-rack2": ["gb019", ...],
    }

topology/block is Slurm's from 23.11 (SchedMD/slurm commit 71c4762ed9 "Add topology_block
plugin", 2023-08-22, first tagged slurm-23-11-0-0rc1): Debian 12's 22.05 and Ubuntu 22.04's
21.08 have no such plugin (Debian 12's slurm-wlm-basic-plugins has no topology_block.so;
Debian 13's 24.11 has it), so the role refuses blocks there (gpuinfra/slurm/versions.py).
What slurmctld 24.11 refuses (src/plugins/topology/block/block_record.c at slurm-24-11-5-1),
refused here before any host is touched: a block defined twice, a block without nodes
("lacks children"), a node name it does not know ("Invalid node name"); a block with fewer
nodes than the first one read ("children count lower than bblock_node_cnt": the role writes
the smallest block first, so the base block size is the smallest rack); nodes on no block
("blocks lack access to N nodes": refused here, as a node on no switch is for topology/tree).
One topology plugin per cluster (slurm.conf TopologyPlugin): ``fabric_blocks`` and
``fabric_switches`` together are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuinfra.spec.checks import CLUSTER, WHERE_ALL, Collector
from gpuinfra.spec.fabric import _SWITCH, MAX_SWITCHES, SWITCH_ALLOWED, outside_slurm
from gpuinfra.spec.model import NodeSpec, NvlinkBlock
from gpuinfra.spec.rules import clip

FIELD = "fabric_blocks"
EXAMPLE = "fabric_blocks = {'nvl72-rack1': ['gb001', 'gb002'], 'nvl72-rack2': ['gb019']}"


def blocks(raw: Any, switches: Any, schedulers: Sequence[str], nodes: Sequence[NodeSpec],
           errs: Collector) -> tuple[NvlinkBlock, ...] | None:
    """The site's blocks (None: not given, or refused: each problem is in ``errs``)."""
    if raw is None:
        return None
    if "slurm" not in schedulers:
        errs.add(CLUSTER, FIELD, raw, "only Slurm reads the blocks (topology.conf), and this "
                 "site runs no Slurm", "fabric_blocks on a site whose schedulers include "
                 "'slurm'", f"remove fabric_blocks {WHERE_ALL}, or add 'slurm' to schedulers")
        return None
    if switches is not None:
        errs.add(CLUSTER, FIELD, raw, "fabric_switches is given too: Slurm runs one topology "
                 "plugin per cluster (TopologyPlugin=topology/tree or topology/block)",
                 "fabric_blocks or fabric_switches", "keep fabric_blocks for NVLink-domain "
                 "racks (GB200 NVL72), or fabric_switches for an InfiniBand tree, "
                 f"{WHERE_ALL}")
        return None
    if not isinstance(raw, dict) or not raw or len(raw) > MAX_SWITCHES:
        errs.add(CLUSTER, FIELD, raw, "must be a non-empty dict: block name -> the nodes of "
                 "one NVLink domain", f"a dict of lists of host names (at most "
                 f"{MAX_SWITCHES} blocks)", f"write {EXAMPLE} {WHERE_ALL}")
        return None
    before = len(errs.errors)
    slurm = {n.name for n in nodes if n.is_worker and "slurm" in n.schedulers}
    by_name = {n.name: n for n in nodes} | {n.short_name: n for n in nodes}

    def bad(block: str, value: Any, problem: str, allowed: str, fix: str) -> None:
        errs.add(CLUSTER, f"{FIELD}[{clip(block)}]", value, problem, allowed,
                 f"{fix} {WHERE_ALL}")

    found: list[NvlinkBlock] = []
    home: dict[str, str] = {}
    for name, members in raw.items():
        if not isinstance(name, str) or not _SWITCH.fullmatch(name):
            bad(str(name), name, "not a block name", SWITCH_ALLOWED, "rename the block")
            continue
        if not isinstance(members, (list, tuple)) or not members \
                or not all(isinstance(m, str) for m in members):
            bad(name, members, "must be a non-empty list of host names: the nodes of this "
                "NVLink domain (slurmctld: 'Block configuration lacks children')",
                "a list of host names", f"write '{name}': ['gb001', 'gb002']")
            continue
        unknown = [m for m in members if m not in by_name]
        if unknown:
            bad(name, unknown[0], f"{unknown[0]!r} is no host of the inventory (slurmctld: "
                "'Invalid node name in block config')", "host names (inventory or short)",
                "fix the name, or add the host to inventory/<site>.py")
            continue
        if outside_slurm(name, members, by_name, slurm, bad, "block"):
            continue
        full = [by_name[m].name for m in members]
        twice = sorted({m for m in full if full.count(m) > 1 or m in home})
        if twice:
            where = home.get(twice[0], name)
            bad(name, twice[0], f"{twice[0]} is listed twice (in {where!r}"
                f"{'' if where == name else f' and {name!r}'}): a node is in one NVLink "
                "domain", "each node in one block", f"keep {twice[0]} in the rack it is in")
            continue
        home.update(dict.fromkeys(full, name))
        found.append(NvlinkBlock(name, tuple(full)))
    if len(errs.errors) > before:
        return None
    missing = sorted(slurm - set(home))
    if missing:
        errs.add(CLUSTER, FIELD, missing, f"{len(missing)} Slurm node(s) in no block while "
                 f"others are: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''} "
                 "(slurmctld: 'blocks lack access to N nodes': no block-placed job gets them)",
                 "every Slurm worker in one block", f"add each to its rack's block {WHERE_ALL}")
        return None
    return tuple(found)
