"""topology.conf from the spec's fabric (gpuinfra/spec/fabric.py), for Slurm's topology/tree
plugin: one ``SwitchName=`` line per switch, leaves first (``Nodes=``, slurm.conf's short
names), then each switch after every switch under it (``Switches=``). Rendered by
roles/slurm/templates/etc/slurm/topology.conf.j2; slurm.conf then says
``TopologyPlugin=topology/tree`` (slurm.conf(5) of 22.05.8: "used for a hierarchical network as
described in a topology.conf file"; the same plugin in 21.08, 23.11 and 24.11).

Before it goes live, slurmctld itself reads the staged file (roles/slurm/operations.py
``topology_check_command``): slurmd -G, the check of slurm.conf and gres.conf, does not read
topology.conf (measured: Slurm 22.05.8 accepts a topology.conf with an unknown key through it).
"""

from __future__ import annotations

from gpuinfra.spec.model import ClusterSpec, Fabric, Switch

TOPOLOGY_PLUGIN = "topology/tree"
# NVLink blocks (fabric_blocks, gpuinfra/spec/blocks.py): Slurm 23.11 and later.
BLOCK_PLUGIN = "topology/block"


def topology_plugin(spec: ClusterSpec) -> str | None:
    """slurm.conf's TopologyPlugin for the site (None: Slurm's default, no topology.conf)."""
    if spec.fabric is not None:
        return TOPOLOGY_PLUGIN
    return BLOCK_PLUGIN if spec.blocks else None


def topology_lines(spec: ClusterSpec) -> list[str]:
    """topology.conf's lines: the switches (topology/tree) or the blocks (topology/block)."""
    return switch_lines(spec) if spec.fabric is not None else block_lines(spec)


def block_lines(spec: ClusterSpec) -> list[str]:
    """One ``BlockName=`` line per block, the smallest first: slurmctld takes the first
    block's node count as the base block size and refuses a smaller block after it
    (block_record.c of 24.11: "children count lower than bblock_node_cnt"); equal blocks in
    the site's order."""
    if not spec.blocks:
        return []
    short = {n.name: n.short_name for n in spec.nodes}
    ordered = sorted(spec.blocks, key=lambda b: len(b.nodes))
    return [f"BlockName={b.name} Nodes={','.join(short[n] for n in b.nodes)}" for b in ordered]


def switch_lines(spec: ClusterSpec) -> list[str]:
    """The ``SwitchName=`` lines of the site's fabric (none without one)."""
    if spec.fabric is None:
        return []
    short = {n.name: n.short_name for n in spec.nodes}
    lines = []
    for switch in _children_first(spec.fabric):
        if switch.nodes:
            lines.append(f"SwitchName={switch.name} "
                         f"Nodes={','.join(short[n] for n in switch.nodes)}")
        else:
            lines.append(f"SwitchName={switch.name} Switches={','.join(switch.switches)}")
    return lines


def _children_first(fabric: Fabric) -> list[Switch]:
    """The switches, each after every switch under it, else in the site's order (the spec is
    a checked tree: every switch is reached)."""
    waiting = {s.name: len(s.switches) for s in fabric.switches}
    parent = {child: s.name for s in fabric.switches for child in s.switches}
    by_name = {s.name: s for s in fabric.switches}
    ready = [s.name for s in fabric.switches if not s.switches]
    out: list[Switch] = []
    while ready:
        name = ready.pop(0)
        out.append(by_name[name])
        above = parent.get(name)
        if above is not None:
            waiting[above] -= 1
            if not waiting[above]:
                ready.append(above)
    return out
