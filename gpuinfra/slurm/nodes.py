"""Slurm's nodes and partitions: each node's hardware as ``slurmd -C`` reports it (from lscpu
and MemTotal), its ``NodeName=`` line, the partition lines, and the per-GPU defaults
(``DefMemPerGPU``/``DefCpuPerGPU``) computed from the nodes of each partition.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuinfra.parsers.cpus import CpuTopology
from gpuinfra.slurm.extra import SlurmConfigError
from gpuinfra.slurm.features import node_features, node_weight
from gpuinfra.slurm.gres import check_gres_type, node_gres
from gpuinfra.spec.model import ClusterSpec, NodeSpec


@dataclass(frozen=True)
class NodeHardware:
    """A node as slurm.conf describes it (the fields ``slurmd -C`` prints)."""

    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mb: int

    def slurm_fields(self) -> str:
        return (f"CPUs={self.cpus} Sockets={self.sockets} CoresPerSocket={self.cores_per_socket} "
                f"ThreadsPerCore={self.threads_per_core} RealMemory={self.real_memory_mb}")


def node_hardware(layout: CpuTopology, mem_total_mb: int,
                  reserve_percent: int = 0) -> NodeHardware:
    """The node's slurm.conf hardware; ``reserve_percent`` of memory is kept from jobs.

    Slurm drains a node that registers *less* than its configured RealMemory, so configuring
    a little less than MemTotal keeps a node up when the kernel reserves a bit more memory
    after an update, and leaves room for the OS.
    """
    if not layout.uniform:
        raise SlurmConfigError("the node's sockets do not all have the same cores and threads: "
                               "describe it by hand (slurm_node_overrides)")
    if not 0 <= reserve_percent < 50:
        raise SlurmConfigError(f"slurm_memory_reserve_percent = {reserve_percent!r}: use 0..49")
    memory = mem_total_mb * (100 - reserve_percent) // 100
    return NodeHardware(layout.cpu_count, layout.sockets, layout.cores_per_socket,
                        layout.threads_per_core, memory)


@dataclass(frozen=True)
class SlurmNodeLine:
    name: str
    text: str
    notes: tuple[str, ...] = ()


def node_line(node: NodeSpec, address: str | None, hardware: NodeHardware | None,
              gres_type: str, kept: str | None = None) -> SlurmNodeLine:
    """The ``NodeName=`` line of a compute node: its address, hardware, GPUs, ``Features`` and
    ``Weight`` (gpuinfra.slurm.features). A node whose hardware this run could not read
    (not reached: ``--limit``, down) keeps ``kept``, its line in the head's running slurm.conf
    (:func:`running_config`), when it has one: never a placeholder over a known node."""
    if hardware is None and kept:
        return SlurmNodeLine(node.short_name, kept, ("not reached in this run: its line is kept "
                                                     "from the head's running slurm.conf",))
    parts = [f"NodeName={node.short_name}"]
    if address:
        parts.append(f"NodeAddr={address}")
    notes = []
    if hardware is not None:
        parts.append(hardware.slurm_fields())
        notes += spec_differences(node, hardware)
    else:
        notes.append("hardware unknown (no lscpu or MemTotal from the node: not read, "
                     "unreadable, or a preview without recorded facts or node_hardware in the "
                     "spec): CPUs=1 until a deploy reads it")
        parts.append("CPUs=1")
    gres = node_gres(node, check_gres_type(gres_type))
    if gres:
        parts.append("Gres=" + ",".join(gres))
    features = node_features(node)
    if features:
        parts.append("Features=" + ",".join(features))
    parts.append(f"Weight={node_weight(node)}")
    parts.append("State=UNKNOWN")
    return SlurmNodeLine(node.short_name, " ".join(parts), tuple(notes))


# MemTotal is below the installed memory (the kernel and firmware keep some): a node whose
# MemTotal is within this share of the spec's memory_gb agrees with it.
MEMORY_SLACK = 0.10


def spec_differences(node: NodeSpec, hardware: NodeHardware) -> list[str]:
    """Where the node's own hardware (its facts: what slurm.conf gets) differs from its spec's
    ``node_hardware``: said, so that the spec (and every preview made from it) is corrected."""
    spec = node.hardware
    if spec is None:
        return []
    out = []
    said = (spec.cpus, spec.sockets, spec.cores_per_socket, spec.threads_per_core)
    read = (hardware.cpus, hardware.sockets, hardware.cores_per_socket,
            hardware.threads_per_core)
    if said != read:
        out.append(f"the node reports CPUs={read[0]} ({read[1]} sockets x {read[2]} cores x "
                   f"{read[3]} threads), its node_hardware says CPUs={said[0]} ({said[1]} x "
                   f"{said[2]} x {said[3]}): slurm.conf has the node's; correct the spec")
    reserve = int(node.settings.get("slurm_memory_reserve_percent", 0) or 0)
    wanted = spec.memory_gb * 1024 * (100 - reserve) // 100
    if not wanted * (1 - MEMORY_SLACK) <= hardware.real_memory_mb <= wanted:
        out.append(f"the node has RealMemory={hardware.real_memory_mb} MiB (MemTotal less "
                   f"{reserve} %), its node_hardware says {spec.memory_gb} GB: slurm.conf has "
                   "the node's; correct the spec")
    return out


def partition_lines(spec: ClusterSpec, max_time: str = "INFINITE",
                    per_gpu: Mapping[str, PerGpu] | None = None) -> list[str]:
    """``PartitionName=`` lines from the spec's partitions (short node names): MaxTime (the
    partition's, else ``max_time``), DefaultTime, State (UP unless the partition says), Default,
    the partition's other Slurm settings (gpuinfra/spec/partitions.py), then DefMemPerGPU and
    DefCpuPerGPU from ``per_gpu`` (:func:`per_gpu_defaults`)."""
    short = {n.name: n.short_name for n in spec.nodes}
    lines = []
    for part in spec.partitions:
        nodes = ",".join(short[n] for n in part.nodes)
        parts = [f"PartitionName={part.name}", f"Nodes={nodes}",
                 f"MaxTime={part.setting('MaxTime', max_time)}"]
        if part.setting("DefaultTime"):
            parts.append(f"DefaultTime={part.setting('DefaultTime')}")
        parts.append(f"State={part.setting('State', 'UP')}")
        if part.default:
            parts.append("Default=YES")
        parts += [f"{k}={v}" for k, v in part.settings
                  if k not in ("MaxTime", "DefaultTime", "State")]
        defaults = (per_gpu or {}).get(part.name)
        if defaults is not None:
            if defaults.mem_mb:
                parts.append(f"DefMemPerGPU={defaults.mem_mb}")
            if defaults.cpus:
                parts.append(f"DefCpuPerGPU={defaults.cpus}")
        lines.append(" ".join(parts))
    return lines


# --------------------------------------------------------------------------- per-GPU defaults
# slurm.conf(5) (22.05.8; also in 21.08 and 23.11, global or per partition since 19.05):
# "DefMemPerGPU: Default real memory size available per allocated GPU in megabytes" and
# "DefCpuPerGPU: Default count of CPUs allocated per allocated GPU. This value is used only if
# the job didn't specify --cpus-per-task and --cpus-per-gpu". Without them a job asking for
# one GPU and no --mem gets DefMemPerNode, unlimited by default: the whole node's memory, and
# the node's other GPUs sit idle. "DefMemPerCPU, DefMemPerGPU and DefMemPerNode are mutually
# exclusive": a site that sets DefMemPerCPU or DefMemPerNode (slurm_conf_extra) keeps it, and
# only a partition's own def_mem_per_gpu is written then.
_CPUS = re.compile(r"\bCPUs=(\d+)\b")


_MEMORY = re.compile(r"\bRealMemory=(\d+)\b")


_GRES_GPU = re.compile(r"^gpu:(?:[^:,]+:)?(\d+)$")


_OTHER_DEF_MEM = ("defmempercpu", "defmempernode")


@dataclass(frozen=True)
class PerGpu:
    """A partition's DefMemPerGPU (MiB) and DefCpuPerGPU (None or 0: not written), and why."""

    mem_mb: int | None
    cpus: int | None
    notes: tuple[str, ...] = ()


def node_gpu_count(line: str) -> int:
    """GPUs (MIG instances on a MIG node) a ``NodeName=`` line gives Slurm (its ``Gres=gpu``)."""
    gres = next((p.partition("=")[2] for p in line.split() if p.startswith("Gres=")), "")
    return sum(int(m.group(1)) for item in gres.split(",") if (m := _GRES_GPU.match(item)))


def per_gpu_defaults(spec: ClusterSpec, node_lines: Sequence[SlurmNodeLine],
                     site_mem: int | None = None, site_cpu: int | None = None,
                     extra: Any = None) -> dict[str, PerGpu]:
    """Each partition's DefMemPerGPU/DefCpuPerGPU: the partition's own value, else the site's
    (``slurm_def_mem_per_gpu``/``slurm_def_cpu_per_gpu``), else computed from its GPU nodes'
    lines as slurm.conf has them (RealMemory, already less the memory reserve, and CPUs, each
    divided by the node's GPUs): the smallest over the partition, so that a job gets the same
    default on any of its nodes and every GPU of every node can still be given out. 0 anywhere
    leaves the key out. A partition without GPU nodes gets neither."""
    lines = {n.name: n.text for n in node_lines}
    other_mem = [k for k in (extra or {}) if str(k).lower() in _OTHER_DEF_MEM]
    out: dict[str, PerGpu] = {}
    for part in spec.partitions:
        notes: list[str] = []
        sized: list[tuple[str, int, int | None, int | None]] = []
        for name in part.nodes:
            node = spec.node(name)
            text_ = lines.get(node.short_name, "")
            gpus = node_gpu_count(text_)
            if not gpus:
                continue
            cpus, memory = _CPUS.search(text_), _MEMORY.search(text_)
            sized.append((node.short_name, gpus, int(memory.group(1)) if memory else None,
                          int(cpus.group(1)) if cpus and memory else None))
        if not sized:
            continue
        mem = _choose(part.def_mem_per_gpu, None if other_mem else site_mem,
                      [(n, m // g) for n, g, m, _ in sized if m is not None],
                      [n for n, _, m, _ in sized if m is None], "DefMemPerGPU", notes)
        if other_mem and part.def_mem_per_gpu is None:
            mem = None
            notes.append(f"DefMemPerGPU left out: slurm_conf_extra sets {other_mem[0]} (Slurm "
                         "takes only one of DefMemPerCPU, DefMemPerGPU and DefMemPerNode)")
        cpu = _choose(part.def_cpu_per_gpu, site_cpu,
                      [(n, c // g) for n, g, _, c in sized if c is not None],
                      [n for n, _, _, c in sized if c is None], "DefCpuPerGPU", notes)
        out[part.name] = PerGpu(mem or None, cpu or None,
                                tuple(f"partition {part.name}: {n}" for n in notes))
    return out


def _choose(own: int | None, site: int | None, computed: list[tuple[str, int]],
            unknown: list[str], key: str, notes: list[str]) -> int | None:
    if own is not None:
        return own
    if site is not None:
        return site
    if unknown:
        notes.append(f"{key} left out: the hardware of {', '.join(unknown)} is unknown in this "
                     "run (deploy with every node reachable)")
        return None
    if not computed:
        return None
    node, value = min(computed, key=lambda c: c[1])
    if value < 1:
        what = "CPUs" if key == "DefCpuPerGPU" else "MiB of memory"
        notes.append(f"{key} left out: {node} has fewer {what} than GPUs (a job on all its "
                     "GPUs could not get one per GPU); set it per partition if you want one")
        return None
    return value
