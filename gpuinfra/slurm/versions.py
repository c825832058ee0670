"""What each Slurm version reads, for what the roles write (knowledge audit e4dd2f2, rows 1-2).

The distributions' Slurm (the roles install the distribution's own): Debian 12 22.05.8,
Ubuntu 22.04 21.08.5, Ubuntu 24.04 23.11.4 (roles/slurm DISTRO). A feature a site asks for that
its Slurm predates is refused before any change, naming the node, its version and the fix:
Slurm would not start on such a file, or would silently ignore the setting.
"""

from __future__ import annotations

from collections.abc import Iterable

# (major, minor) per distribution key (gpuinfra_deploy.facts.system.distro_key).
SLURM_VERSIONS: dict[str, tuple[int, int]] = {
    "debian-12": (22, 5),  # slurm-wlm 22.05.8-4 (bookworm)
    "ubuntu-22.04": (21, 8),  # slurm-wlm 21.08.5-2ubuntu1 (jammy)
    "ubuntu-24.04": (23, 11),  # slurm-wlm 23.11.4-1.2build1 (noble)
}

# The shard GRES (GPU sharing without MPS: the time-slicing mode's GRES): SchedMD's
# CHANGELOG/slurm-22.05.md, "Add new shard plugin for sharing gpus but not with mps".
SHARD_SINCE = (22, 5)
# HealthCheckNodeState=NONDRAINED_IDLE: CHANGELOG/slurm-23.02.md, "Add
# HealthCheckNodeState=NONDRAINED_IDLE option".
NONDRAINED_IDLE_SINCE = (23, 2)


def _text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]:02d}"


def shard_problem(node: str, distro: str) -> str | None:
    """A time-slicing (shard GRES) node whose Slurm predates shards."""
    version = SLURM_VERSIONS.get(distro)
    if version is None or version >= SHARD_SINCE:
        return None
    return (f"{node} ({distro}, Slurm {_text(version)}): gpu_sharing mode 'time-slicing' is "
            f"Slurm's shard GRES, added in Slurm {_text(SHARD_SINCE)} (SchedMD CHANGELOG "
            "slurm-22.05: 'Add new shard plugin'): its slurmd would not start. Fix: 'mps' or "
            "no sharing on this node, or a distribution with Slurm 22.05 or newer")


def node_state_problem(states: str, head: str, distro: str) -> str | None:
    """HealthCheckNodeState naming NONDRAINED_IDLE on a controller whose Slurm predates it."""
    version = SLURM_VERSIONS.get(distro)
    wanted: Iterable[str] = states.split(",")
    if version is None or version >= NONDRAINED_IDLE_SINCE or "NONDRAINED_IDLE" not in wanted:
        return None
    return (f"health_check_node_state {states!r}: NONDRAINED_IDLE was added in Slurm "
            f"{_text(NONDRAINED_IDLE_SINCE)} (SchedMD CHANGELOG slurm-23.02) and the head "
            f"{head} ({distro}) runs Slurm {_text(version)}, which does not read it. Fix: IDLE "
            "(or ANY,CYCLE, the default) on this Slurm")


# topology/block (fabric_blocks): SchedMD/slurm commit 71c4762ed9 "Add topology_block
# plugin" (2023-08-22), first tagged slurm-23-11-0-0rc1; Debian 12's 22.05.8 ships no
# topology_block.so (its slurm-wlm-basic-plugins: topology_3d_torus, _hypercube, _none, _tree),
# Debian 13's 24.11.5 does (both measured in gpuinfra_lab/slurm_versions.py's images).
BLOCK_SINCE = (23, 11)


def block_problem(controller: str, distro: str) -> str | None:
    """fabric_blocks (TopologyPlugin=topology/block) on a controller whose Slurm predates it."""
    version = SLURM_VERSIONS.get(distro)
    if version is None or version >= BLOCK_SINCE:
        return None
    return (f"fabric_blocks is Slurm's topology/block plugin, added in Slurm "
            f"{_text(BLOCK_SINCE)} (SchedMD/slurm 71c4762ed9 'Add topology_block plugin'), and "
            f"the controller {controller} ({distro}) runs Slurm {_text(version)}, which has no "
            "such plugin: slurmctld would not start. Fix: Ubuntu 24.04 (23.11) on the "
            "controllers, or describe the fabric with fabric_switches (topology/tree)")
