"""GPUs as Slurm GRES: the GRES type of a GPU model, each node's gres.conf lines from its GPU
facts (gres.conf(5): ``File=``, ``Cores=`` from the CPU affinity of ``nvidia-smi topo -m``,
``Links=`` from its NVLink counts in Slurm's device order), MPS and shard counts, and the
``Gres=`` of each node's slurm.conf line. Rendered by
roles/slurm/templates/etc/slurm/gres.conf.j2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuinfra.parsers.cpus import CpuTopology, format_ranges, parse_cpu_list
from gpuinfra.parsers.topo import TopoMatrix
from gpuinfra.slurm.extra import SlurmConfigError
from gpuinfra.spec.model import NodeSpec
from gpuinfra.spec.rules import clip, text

MPS_COUNT_PER_GPU = 100  # gres/mps counts in percent of a GPU (gres.conf(5), mps)


# The knobs' rules (roles/slurm/defaults.py) and the checks below are the same rules.
GRES_TYPE = text(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", "a GRES type: letters, digits, '.', '_' "
                 "or '-' (no ':' or ','), at most 64 characters", "a GRES type")


def gpu_type(model_key: str) -> str:
    """The GRES type of a GPU model: its spec key as a lower-case slug (``h100-sxm5-80gb``).

    One rule for gres.conf ``Type=``, slurm.conf ``Gres=gpu:<type>:N`` and ``--gres`` (the NCCL
    job too): unambiguous across SKUs (an H100 SXM and an H100 PCIe are different types).
    Characters other than letters, digits, '.', '_' and '-' become '-' (``:`` and ``,``
    separate GRES fields).
    """
    slug = re.sub(r"[^a-z0-9._-]+", "-", model_key.strip().lower()).strip("-")
    if not slug:
        raise SlurmConfigError(f"gpu_model = {model_key!r}: no letters or digits to make a "
                               "GRES type")
    return slug


def node_gres_type(node: NodeSpec, override: Any = None) -> str:
    """A GPU node's GRES type: its ``slurm_gpu_type`` data (checked) when set, else
    :func:`gpu_type` of its model."""
    if override:
        return check_gres_type(override)
    assert node.gpus is not None, f"{node.name} has no GPUs"
    return gpu_type(node.gpus.model.key)


def check_gres_type(value: Any, field_name: str = "slurm_gpu_type") -> str:
    problem = GRES_TYPE.problem(value)
    if problem:
        raise SlurmConfigError(f"{field_name} = {clip(value)}: {problem}: {GRES_TYPE.allowed}")
    return value


@dataclass(frozen=True)
class GpuDevice:
    """A GPU as Slurm sees it: nvidia-smi index (PCI bus order) and its /dev/nvidia minor."""

    index: int
    minor: int
    bus_id: str | None = None

    @property
    def file(self) -> str:
        return f"/dev/nvidia{self.minor}"


def gpu_devices(gpus: Sequence[Mapping[str, Any]], minors: Mapping[str, int]
                ) -> tuple[list[GpuDevice], list[str]]:
    """GPUs of the NvidiaGpus fact with their device minor numbers.

    ``minors`` maps PCI bus ids to the ``Device Minor`` the driver reports in
    /proc/driver/nvidia/gpus/*/information. Where the driver does not say (not loaded, or the
    lab's replayed GPUs), the minor is taken to be the nvidia-smi index, and a note says so.
    """
    norm = {_bus(k): v for k, v in minors.items()}
    devices, guessed = [], []
    for gpu in sorted(gpus, key=lambda g: int(g["index"])):
        bus = gpu.get("pci.bus_id")
        minor = norm.get(_bus(bus)) if bus else None
        if minor is None:
            guessed.append(int(gpu["index"]))
            minor = int(gpu["index"])
        devices.append(GpuDevice(int(gpu["index"]), minor, bus))
    notes = []
    if guessed:
        notes.append(f"device minors of GPU {format_ranges(guessed)} not reported by the driver "
                     "(/proc/driver/nvidia/gpus): assumed equal to the nvidia-smi index")
    return devices, notes


def _bus(bus_id: str | None) -> str:
    """``00000000:19:00.0`` and ``0000:19:00.0`` both as ``0000:19:00.0`` (lower case)."""
    text = (bus_id or "").lower()
    return text[-12:] if len(text) >= 12 else text


@dataclass(frozen=True)
class GresPlan:
    """gres.conf lines for one node, and notes for the operator (what was left out and why)."""

    lines: tuple[str, ...]
    notes: tuple[str, ...] = ()
    nvml_needed: bool = False


def gres_plan(node: NodeSpec, gres_type: str, devices: Sequence[GpuDevice],
              topo: TopoMatrix | None, layout: CpuTopology | None) -> GresPlan:
    """The node's gres.conf: explicit GPU lines from its facts, plus MPS/shard lines.

    With no GPU facts (driver not loaded yet), the lines come from the spec: File for GPUs
    0..n-1 and no Cores/Links, with a note to deploy again once the driver is loaded.
    """
    if node.gpus is None:
        return GresPlan(())
    check_gres_type(gres_type)
    if node.sharing.mode == "mig":
        return GresPlan(("AutoDetect=nvml",), ("MIG: Slurm reads the MIG devices through "
                                               "NVML (AutoDetect=nvml)",), nvml_needed=True)
    notes: list[str] = []
    if not devices:
        devices = [GpuDevice(i, i) for i in range(node.gpus.count)]
        notes.append("no GPU facts (driver not loaded?): gres.conf from the spec, without "
                     "Cores= and Links=; deploy again after the driver is loaded")
        topo = None
    elif len(devices) != node.gpus.count:
        notes.append(f"the spec says {node.gpus.count} GPUs, the node shows {len(devices)}: "
                     "slurmctld will drain it (GRES count lower than configured)")
    links = _links(devices, topo, notes)
    cores = _cores(devices, topo, layout, notes)
    lines = []
    for dev in devices:
        parts = [f"Name=gpu Type={gres_type} File={dev.file}"]
        if cores.get(dev.index):
            parts.append(f"Cores={cores[dev.index]}")
        if dev.index in links:
            parts.append(f"Links={links[dev.index]}")
        lines.append(" ".join(parts))
    for dev in devices:
        if node.sharing.mode == "mps":
            lines.append(f"Name=mps Count={MPS_COUNT_PER_GPU} File={dev.file}")
        elif node.sharing.mode == "time-slicing":
            lines.append(f"Name=shard Count={node.sharing.replicas} File={dev.file}")
    return GresPlan(tuple(lines), tuple(notes))


def _links(devices: Sequence[GpuDevice], topo: TopoMatrix | None,
           notes: list[str]) -> dict[int, str]:
    if topo is None:
        return {}
    indices = [d.index for d in devices]
    if sorted(int(g.removeprefix("GPU")) for g in topo.gpus) != sorted(indices):
        notes.append(f"nvidia-smi topo -m shows {topo.gpu_count} GPUs, the GPU list "
                     f"{len(devices)}: Links= left out")
        return {}
    return {i: ",".join("-1" if i == j else str(topo.nvlink_count(i, j)) for j in indices)
            for i in indices}


def _cores(devices: Sequence[GpuDevice], topo: TopoMatrix | None,
           layout: CpuTopology | None, notes: list[str]) -> dict[int, str]:
    """Slurm core indices per GPU from its CPU affinity; {} (with a note) when unsure."""
    if topo is None or layout is None:
        return {}
    out: dict[int, str] = {}
    for dev in devices:
        affinity = topo.cpu_affinity.get(f"GPU{dev.index}")
        if not affinity:
            continue
        try:
            cpus = parse_cpu_list(affinity)
        except ValueError:
            notes.append(f"GPU{dev.index}'s CPU affinity {affinity!r} is unreadable: "
                         "Cores= left out")
            return {}
        indices = [layout.core_index(cpu) for cpu in sorted(cpus)]
        if None in indices:
            online = format_ranges([c.cpu for c in layout.cpus])
            notes.append(f"GPU{dev.index}'s CPU affinity ({affinity}) names CPUs this node does "
                         f"not have (online: {online}): Cores= left out for every GPU, so Slurm "
                         "may pair any core with them")
            return {}
        out[dev.index] = format_ranges([i for i in indices if i is not None])
    return out


def node_gres(node: NodeSpec, gres_type: str) -> list[str]:
    """``Gres=`` items of a node from its spec: ``gpu:<type>:<n>``, ``mps:<100n>``,
    ``shard:<replicas x n>``; MIG nodes count their instances per profile."""
    if node.gpus is None:
        return []
    count = node.gpus.count
    if node.sharing.mode == "mig":
        totals: dict[str, int] = {}
        for layout in node.sharing.mig_layout:
            for profile, n in layout.items():
                totals[profile] = totals.get(profile, 0) + n
        return [f"gpu:{profile}:{n}" for profile, n in sorted(totals.items())]
    items = [f"gpu:{gres_type}:{count}"]
    if node.sharing.mode == "mps":
        items.append(f"mps:{MPS_COUNT_PER_GPU * count}")
    elif node.sharing.mode == "time-slicing" and node.sharing.replicas:
        items.append(f"shard:{node.sharing.replicas * count}")
    return items


def gres_types(nodes: Sequence[NodeSpec]) -> list[str]:
    """``GresTypes``: gpu, plus mps/shard when any node shares GPUs that way (same on all)."""
    if not any(n.gpus for n in nodes):
        return []
    types = ["gpu"]
    modes = {n.sharing.mode for n in nodes if n.gpus}
    types += [t for mode, t in (("mps", "mps"), ("time-slicing", "shard")) if mode in modes]
    return types
