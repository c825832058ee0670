"""Slurm's configuration for a GPU cluster, computed from the spec and each node's facts.

Pure functions; the slurm role renders their results with
roles/slurm/templates/etc/slurm/*.j2.
Formats follow slurm.conf(5), gres.conf(5) and cgroup.conf(5) of Slurm 22.05 (Debian 12), also
valid for 21.08 (Ubuntu 22.04) and 23.11 (Ubuntu 24.04); docs/hardware-reference.md section 5.

- ``slurm.conf`` (the head's; every slurmd fetches it, see "configless" below): ``Gres=`` per
  node from the *spec* (what was asked), CPUs/sockets/cores/threads/memory from the node's
  *own hardware* (``lscpu``, MemTotal, as ``slurmd -C`` reports them). A node whose hardware
  has fewer GPUs than its spec registers fewer than configured and slurmctld drains it: the
  verify suite names it with the cause.
- ``gres.conf`` (one for the cluster, each node's lines with ``NodeName=``): one line per GPU
  from the node's *GPU facts*: ``Name=gpu
  Type=<model> File=/dev/nvidia<minor>``, ``Cores=`` from the GPU's CPU affinity (``nvidia-smi
  topo -m``) as Slurm's logical core indices, ``Links=`` from the NVLink counts between GPUs
  (``NV18`` -> 18, ``-1`` self, ``0`` no NVLink) in Slurm's device order (PCI bus order, which is
  nvidia-smi's index order, gres.conf(5) ``Links``). MPS (``Name=mps Count=100`` per GPU) and
  shards (``Name=shard Count=<replicas>`` per GPU) when the node's spec shares GPUs that way;
  MIG nodes use ``AutoDetect=nvml`` (Slurm only schedules MIG devices through NVML).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.cpus import CpuLayout, format_ranges, parse_cpu_list
from gpuinfra.parsers.topo import TopoMatrix
from gpuinfra.spec.model import ClusterSpec, NodeSpec
from gpuinfra.spec.rules import Rule, clip, text
from gpuinfra.units import unit_file

MPS_COUNT_PER_GPU = 100  # gres/mps counts in percent of a GPU (gres.conf(5), mps)
# The knobs' rules (roles/slurm/defaults.py) and the checks below are the same rules.
GRES_TYPE = text(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", "a GRES type: letters, digits, '.', '_' "
                 "or '-' (no ':' or ','), at most 64 characters", "a GRES type")
_SLURM_KEY = text(r"[A-Za-z][A-Za-z0-9]{0,63}", "a slurm.conf key: letters and digits")
_SLURM_VALUE = re.compile(r"[A-Za-z0-9_./:,=@+-]{1,512}")


def _extra_value(value: Any) -> str | None:
    text_ = str(value).lower() if isinstance(value, bool) else str(value)
    if not isinstance(value, (str, int, bool)) or not _SLURM_VALUE.fullmatch(text_):
        return "a value has no spaces, quotes or '#' (letters, digits and _./:,=@+-)"
    return None


# The slurm.conf keys the role writes itself (roles/slurm/templates/etc/slurm/
# slurm.conf.j2; a test holds this list to the template), and the node and partition lines:
# an extra setting may not override them (Slurm takes the last value of a key, so
# slurm_conf_extra = {"AuthType": "auth/none"} would quietly replace MUNGE). Compared without
# case, as Slurm reads keys.
MANAGED_KEYS = frozenset(k.lower() for k in (
    "AccountingStorageHost", "AccountingStorageTRES", "AccountingStorageType", "AuthType",
    "ClusterName", "CryptoType", "GresTypes", "JobAcctGatherType", "JobCompType", "MpiDefault",
    "ProctrackType", "ReturnToService", "SchedulerType", "SelectType", "SelectTypeParameters",
    "SlurmUser", "SlurmctldHost", "SlurmctldLogFile", "SlurmctldPidFile", "SlurmctldPort",
    "SlurmdLogFile", "SlurmdPidFile", "SlurmdPort", "SlurmdSpoolDir", "SlurmdTimeout",
    "StateSaveLocation", "TaskPlugin", "NodeName", "PartitionName", "Include",
    "ControlMachine", "BackupController", "AccountingStorageUser", "AuthAltTypes",
    "SlurmctldParameters", "PrologFlags", "DefMemPerGPU", "DefCpuPerGPU",
))
# Written by the role and open to the site too: slurm_conf_extra's values are added to the
# role's (SlurmctldParameters=enable_configless,<the site's>; PrologFlags=Contain,<the
# site's>), never replacing them.
MERGED_KEYS = frozenset({"slurmctldparameters", "prologflags"})
# Where a site sets what the role writes itself (the message of a refused extra setting).
_INSTEAD = {
    "defmempergpu": "set slurm_def_mem_per_gpu (or 'def_mem_per_gpu' on a partition)",
    "defcpupergpu": "set slurm_def_cpu_per_gpu (or 'def_cpu_per_gpu' on a partition)",
}
# PrologFlags the role does not allow (slurm.conf(5) PrologFlags): X11 turns on Slurm's X11
# forwarding (off: no X11 on GPU nodes here); NoHold "cannot be combined with the Contain or
# X11 flags", and the role always sets Contain.
_REFUSED_PROLOG_FLAGS = {"x11": "X11 forwarding stays off (issue 28)",
                         "nohold": "NoHold cannot be combined with Contain (slurm.conf(5)), "
                                   "which the role sets"}
# Programs slurmctld/slurmd run as root (slurm.conf(5)): only from root-owned system folders,
# never a path a user could write (the spec cannot see owners; these folders are root's on
# every distribution the roles support).
_ROOT_PROGRAMS = frozenset(k.lower() for k in (
    "Prolog", "Epilog", "PrologSlurmctld", "EpilogSlurmctld", "TaskProlog", "TaskEpilog",
    "SrunProlog", "SrunEpilog", "HealthCheckProgram", "RebootProgram", "ResumeProgram",
    "SuspendProgram", "ResvProlog", "ResvEpilog", "MailProg"))
_ROOT_FOLDERS = ("/etc/slurm/", "/usr/sbin/", "/usr/bin/", "/usr/lib/", "/usr/libexec/",
                 "/usr/local/sbin/", "/usr/local/lib/")


def extra_problem(key: Any, value: Any) -> str | None:
    """What is wrong with one ``slurm_conf_extra`` entry (None: fine)."""
    problem = _SLURM_KEY.problem(key) or _extra_value(value)
    if problem:
        return problem
    if key.lower() in _INSTEAD:
        return f"{key} is written by the slurm role per partition: {_INSTEAD[key.lower()]}"
    if key.lower() in MANAGED_KEYS and key.lower() not in MERGED_KEYS:
        return (f"{key} is written by the slurm role from the spec (cluster_name, the head, "
                "MUNGE, the nodes and partitions): an extra setting may not override it")
    if key.lower() == "prologflags":
        for flag in str(value).split(","):
            if flag.strip().lower() in _REFUSED_PROLOG_FLAGS:
                return f"PrologFlags {flag.strip()}: {_REFUSED_PROLOG_FLAGS[flag.strip().lower()]}"
    if key.lower() in _ROOT_PROGRAMS and not (str(value).startswith(_ROOT_FOLDERS)
                                              and ".." not in str(value)):
        return (f"{key} runs as root: a program in a root-owned folder "
                f"({', '.join(_ROOT_FOLDERS)})")
    return None


def _extra_check(extra: Any) -> str | None:
    if not isinstance(extra, Mapping):
        return "must be a dict"
    for key, value in extra.items():
        problem = extra_problem(key, value)
        if problem:
            return f"key {clip(key)}: {problem}"
    return None


CONF_EXTRA = Rule("{'Key': 'value'}, e.g. {'MaxJobCount': 20000}; not the keys the role "
                  "writes; Prolog/Epilog programs in root-owned folders", _extra_check)


class SlurmConfigError(GpuinfraError):
    """A value that would make an invalid or unsafe Slurm configuration."""


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


# --------------------------------------------------------------------------- node hardware

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


def node_hardware(layout: CpuLayout, mem_total_mb: int, reserve_percent: int = 0) -> NodeHardware:
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


# --------------------------------------------------------------------------- gres.conf

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
              topo: TopoMatrix | None, layout: CpuLayout | None) -> GresPlan:
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


def _cores(devices: Sequence[GpuDevice], topo: TopoMatrix | None, layout: CpuLayout | None,
           notes: list[str]) -> dict[int, str]:
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


# --------------------------------------------------------------------------- slurm.conf

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


@dataclass(frozen=True)
class SlurmNodeLine:
    name: str
    text: str
    notes: tuple[str, ...] = ()


def node_line(node: NodeSpec, address: str | None, hardware: NodeHardware | None,
              gres_type: str, weight: int | None = None,
              kept: str | None = None) -> SlurmNodeLine:
    """The ``NodeName=`` line of a compute node. A node whose hardware this run could not read
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
    else:
        notes.append("hardware unknown (lscpu unreadable): CPUs=1 until the next deploy")
        parts.append("CPUs=1")
    gres = node_gres(node, check_gres_type(gres_type))
    if gres:
        parts.append("Gres=" + ",".join(gres))
    if weight is not None:
        parts.append(f"Weight={weight}")
    parts.append("State=UNKNOWN")
    return SlurmNodeLine(node.short_name, " ".join(parts), tuple(notes))


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


def extra_lines(extra: Any) -> list[str]:
    """Site settings added to slurm.conf as ``Key=Value`` lines (``slurm_conf_extra``).

    Only the shape is checked here; Slurm itself (``slurmd -G`` on the staged file) judges
    the keys and values before any daemon sees them.
    """
    if extra is None:
        return []
    if not isinstance(extra, Mapping):
        raise SlurmConfigError(f"slurm_conf_extra = {clip(extra)}: must be a dict of "
                               f"{CONF_EXTRA.allowed}")
    for key, value in extra.items():
        problem = extra_problem(key, value)
        if problem:
            raise SlurmConfigError(f"slurm_conf_extra[{clip(key)}] = {clip(value)}: {problem} "
                                   "(a key is letters and digits)")
    return [f"{key}={str(value).lower() if isinstance(value, bool) else value}"
            for key, value in extra.items() if key.lower() not in MERGED_KEYS]


def merged_values(key: str, first: Sequence[str], extra: Any) -> list[str]:
    """A merged key's values: the role's ``first``, then the site's own (``slurm_conf_extra``),
    each once (compared without case, as Slurm reads flags)."""
    values = list(first)
    for name, value in (extra or {}).items():
        if name.lower() == key.lower():
            values += [v.strip() for v in str(value).split(",") if v.strip()]
    seen: dict[str, str] = {}
    for value in values:
        seen.setdefault(value.lower(), value)
    return list(seen.values())


def ctld_parameters(extra: Any) -> list[str]:
    """SlurmctldParameters: enable_configless (the configuration is the head's alone, see the
    configless section below), then the site's own (``slurm_conf_extra``), each once."""
    return merged_values("SlurmctldParameters", ["enable_configless"], extra)


def prolog_flags(extra: Any) -> list[str]:
    """PrologFlags: Contain (slurm.conf(5): "At job allocation time, use the ProcTrack plugin
    to create a job container on all allocated compute nodes"; it "implicitly sets the Alloc
    flag"), then the site's own; X11 and NoHold are refused (:func:`extra_problem`)."""
    return merged_values("PrologFlags", ["Contain"], extra)


@dataclass
class SlurmConf:
    """Everything roles/slurm/templates/etc/slurm/slurm.conf.j2 needs."""

    cluster_name: str
    controller: str
    controller_address: str | None
    gres_types: list[str]
    nodes: list[SlurmNodeLine]
    partitions: list[str]
    accounting: bool
    extra: list[str] = field(default_factory=list)
    # The node health check's lines (HealthCheckProgram..., Prolog, Epilog): health_lines().
    health: list[str] = field(default_factory=list)
    ctld_parameters: list[str] = field(default_factory=lambda: ["enable_configless"])
    prolog_flags: list[str] = field(default_factory=lambda: ["Contain"])
    per_gpu_notes: list[str] = field(default_factory=list)

    @property
    def controller_host(self) -> str:
        """``SlurmctldHost`` value: ``name(address)`` when the address is known."""
        if self.controller_address:
            return f"{self.controller}({self.controller_address})"
        return self.controller

    @property
    def notes(self) -> list[str]:
        return [f"{n.name}: {note}" for n in self.nodes for note in n.notes] + self.per_gpu_notes


# The health role's programs (roles/health: slurm.conf names a program, no arguments).
HEALTH_PROGRAMS = {"slurm": "/usr/local/sbin/gpuinfra-health-slurm",
                   "prolog": "/usr/local/sbin/gpuinfra-health-prolog",
                   "epilog": "/usr/local/sbin/gpuinfra-health-epilog"}
# The monitoring role's GPU job mapping hooks (roles/monitoring/gpujobs.py, on Slurm GPU
# nodes: which job holds each GPU, for dcgm-exporter and the GPU collector).
JOB_MAPPING_PROGRAMS = {"prolog": "/usr/local/sbin/gpuinfra-gpujobs-prolog",
                        "epilog": "/usr/local/sbin/gpuinfra-gpujobs-epilog"}
# Both at once: one glob naming every gpuinfra hook. slurm.conf(5) of 22.05 (Debian 12's
# 22.05.8, read in its man page) and of 23.11: Prolog "A glob pattern (See glob (7)) may also be
# used to specify more than one program to run (e.g. "/etc/slurm/prolog.d/*")", and the same
# for Epilog; a list with commas is newer (not in 22.05's page). A node where one of them is
# not installed (the monitoring role not yet run, a node without GPUs) runs the others: a
# glob names only what exists, where a missing named program would fail the Prolog and drain
# the node. The order between them is not promised, and nothing here depends on it.
HOOK_GLOBS = {"prolog": "/usr/local/sbin/gpuinfra-*-prolog",
              "epilog": "/usr/local/sbin/gpuinfra-*-epilog"}


def _hook(kind: str, health: bool, job_mapping: bool) -> str | None:
    """The Prolog or Epilog value: the one program, the glob of both, or none."""
    if health and job_mapping:
        return HOOK_GLOBS[kind]
    if health:
        return HEALTH_PROGRAMS[kind]
    return JOB_MAPPING_PROGRAMS[kind] if job_mapping else None


def health_lines(settings: Mapping[str, Any], job_mapping: bool = False) -> list[str]:
    """slurm.conf's health check keys from the health role's knobs (slurm.conf(5)):
    HealthCheckProgram/-Interval/-NodeState; Prolog (PrologFlags=Contain implies Alloc: run at
    allocation, before the batch script, so a bad GPU requeues the job before it starts);
    Epilog. ``job_mapping``: the monitoring role's GPU job hooks run too
    (:data:`JOB_MAPPING_PROGRAMS`, monitoring_job_mapping)."""
    health = bool(settings.get("health_enabled"))
    lines = []
    if health:
        lines += [f"HealthCheckProgram={HEALTH_PROGRAMS['slurm']}",
                  f"HealthCheckInterval={int(settings['health_check_interval'])}",
                  f"HealthCheckNodeState={settings['health_check_node_state']}"]
    # At allocation: PrologFlags=Contain, which the role always sets, "implicitly sets the
    # Alloc flag" (slurm.conf(5)).
    prolog = _hook("prolog", health and bool(settings.get("health_slurm_prolog")), job_mapping)
    epilog = _hook("epilog", health and bool(settings.get("health_slurm_epilog")), job_mapping)
    if prolog:
        lines.append(f"Prolog={prolog}")
    if epilog:
        lines.append(f"Epilog={epilog}")
    return lines


def slurm_conf(spec: ClusterSpec, addresses: Mapping[str, str | None],
               hardware: Mapping[str, NodeHardware | None], gres_type_of: Mapping[str, str],
               accounting: bool = False, extra: Any = None,
               health: Mapping[str, Any] | None = None,
               running: RunningConfig | None = None,
               def_mem_per_gpu: int | None = None,
               def_cpu_per_gpu: int | None = None,
               job_mapping: bool = False) -> SlurmConf:
    """The cluster's slurm.conf content (host names are the inventory's); ``running``: the
    head's files as they are, whose lines a node not reached in this run keeps;
    ``def_mem_per_gpu``/``def_cpu_per_gpu``: the site's per-GPU defaults (None: computed,
    :func:`per_gpu_defaults`); ``job_mapping``: the GPU job hooks in Prolog/Epilog
    (:func:`health_lines`)."""
    kept = running.node_lines if running is not None else {}
    if len(spec.head) != 1:
        raise SlurmConfigError(f"Slurm needs exactly one host in 'head', found {len(spec.head)}")
    head = spec.head[0]
    workers = [n for n in spec.nodes if n.is_worker and "slurm" in n.schedulers]
    nodes = [node_line(n, addresses.get(n.name), hardware.get(n.name), gres_type_of[n.name],
                       kept=kept.get(n.short_name)) for n in workers]
    extras = extra_lines(extra)  # checked before anything reads it
    per_gpu = per_gpu_defaults(spec, nodes, def_mem_per_gpu, def_cpu_per_gpu, extra)
    return SlurmConf(
        cluster_name=spec.name,
        controller=head.short_name,
        controller_address=addresses.get(head.name),
        gres_types=gres_types(workers),
        nodes=nodes,
        partitions=partition_lines(spec, per_gpu=per_gpu),
        accounting=accounting,
        extra=extras,
        health=health_lines(health or {}, job_mapping),
        ctld_parameters=ctld_parameters(extra),
        prolog_flags=prolog_flags(extra),
        per_gpu_notes=[note for p in per_gpu.values() for note in p.notes],
    )


# --------------------------------------------------------------------------- configless
# One configuration, owned by the head (configless_slurm.html, Slurm 20.02+): slurmctld runs
# with SlurmctldParameters=enable_configless and serves slurm.conf, gres.conf and cgroup.conf;
# each slurmd starts with --conf-server and caches them in /run/slurm/conf (where the node's
# client commands read them too, 21.08+). No worker carries a copy, so a run limited to some
# hosts cannot leave two nodes with different files. gres.conf is then one file for the
# cluster: each node's lines carry NodeName= (gres.conf(5)).
SLURMCTLD_PORT = 6817  # the template's SlurmctldPort, and --conf-server's default port
# Where a node's slurmd keeps the files it fetched (configless_slurm.html, 21.08+): the
# configuration the node runs, read by its client commands too.
FETCHED_CONF = "/run/slurm/conf/slurm.conf"


def conf_server(controller: str, address: str | None) -> str:
    """slurmd's ``--conf-server`` value: the controller's address (its name when unknown)."""
    return f"{address or controller}:{SLURMCTLD_PORT}"


def node_gres_lines(node: str, lines: Sequence[str]) -> list[str]:
    """A node's gres.conf lines in the cluster's one gres.conf: each with ``NodeName=``."""
    return [f"NodeName={node} {line}" for line in lines]


@dataclass(frozen=True)
class RunningConfig:
    """The head's slurm.conf and gres.conf as they are: each node's ``NodeName=`` line, its
    gres.conf lines and the ``# note:`` comments of its gres.conf section (kept for a node a
    run does not reach, so a ``--limit`` run leaves that node's part of the file byte for
    byte), and the settings (key -> value)."""

    node_lines: dict[str, str] = field(default_factory=dict)
    gres_lines: dict[str, list[str]] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()
    gres_notes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.node_lines or self.settings)


def _settings(text: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(settings, node lines by name, partition lines) of a slurm.conf text."""
    settings: dict[str, str] = {}
    nodes: dict[str, str] = {}
    partitions: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        key, _, value = line.partition("=")
        if key.lower() == "nodename":
            nodes[value.split()[0]] = line
        elif key.lower() == "partitionname":
            partitions.append(line)
        else:
            settings[key.strip()] = value.strip()
    return settings, nodes, partitions


def running_config(slurm_conf_text: str, gres_conf_text: str) -> RunningConfig:
    """:class:`RunningConfig` of the head's files (empty texts: a first deploy)."""
    settings, nodes, partitions = _settings(slurm_conf_text)
    gres: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    section = None  # the node whose "# <node>" heading the lines are under (gres.conf.j2)
    for raw in gres_conf_text.splitlines():
        heading = _GRES_SECTION.match(raw)
        if heading:
            section = heading.group(1)
            continue
        note = _GRES_NOTE.match(raw)
        if note and section is not None:
            notes.setdefault(section, []).append(note.group(1))
            continue
        line = raw.split("#", 1)[0].strip()
        if line.lower().startswith("nodename="):
            gres.setdefault(line.split()[0].partition("=")[2], []).append(line)
    return RunningConfig(nodes, gres, settings, tuple(partitions), notes)


# A node's section of the cluster's gres.conf (roles/slurm/templates/.../gres.conf.j2):
# "# <node>" then its "# note: ..." lines then its NodeName= lines.
_GRES_SECTION = re.compile(r"^# ([A-Za-z0-9][A-Za-z0-9._-]*)$")
_GRES_NOTE = re.compile(r"^# note: (.*)$")


# What a changed key asks of the daemons, from slurm.conf(5) of Slurm 22.05.8 (doc/man/man5/
# slurm.conf.5 at tag slurm-22-05-8-1): "Changes to the configuration file take effect upon
# restart of Slurm daemons, daemon receipt of the SIGHUP signal, or execution of the command
# 'scontrol reconfigure' unless otherwise noted". Noted "a restart of slurmctld is required":
CTLD_RESTART_KEYS = frozenset(k.lower() for k in (
    "AccountingStorageEnforce", "CredType", "JobContainerType", "MaxJobCount", "PowerPlugin",
    "ProctrackType", "SchedulerType", "SelectTypeParameters", "SlurmctldHost",
    "SlurmctldParameters", "SlurmctldPort", "SlurmdPort", "StateSaveLocation", "X11Parameters",
))
# Noted "a restart of slurmctld and the slurmd daemons" ("All Slurm daemons ... must be
# restarted": SwitchType; "the slurmd daemons": CoreSpecPlugin); and NODE CONFIGURATION:
# "Changes in node configuration (e.g. adding nodes, changing their processor count, etc.)
# require restarting both the slurmctld daemon and the slurmd daemons".
ALL_RESTART_KEYS = frozenset(k.lower() for k in (
    "GresTypes", "PluginDir", "SelectType", "SwitchType", "CoreSpecPlugin",
))


@dataclass(frozen=True)
class ConfChange:
    """What a new slurm.conf/gres.conf asks of the daemons: ``none``; ``reconfigure``
    (`scontrol reconfigure`: slurmctld re-reads, each slurmd fetches the new files);
    ``restart`` (slurmctld restarted, then reconfigure); with ``slurmd`` also every slurmd
    restarted (it fetches the files at its start). ``why``: what changed."""

    kind: str
    why: str = ""
    slurmd: bool = False


def conf_change(running: RunningConfig, slurm_conf_text: str,
                gres_conf_text: str) -> ConfChange:
    """How the daemons must take the new files, from the running ones (the key lists above).
    A first deploy (no running files) is ``restart``: the daemons start on the new files."""
    if running.empty:
        return ConfChange("restart", "no configuration yet", slurmd=True)
    new = running_config(slurm_conf_text, gres_conf_text)
    keys = sorted({k.lower() for k in (*running.settings, *new.settings)
                   if running.settings.get(k) != new.settings.get(k)})
    nodes = sorted(set(running.node_lines) ^ set(new.node_lines))
    if nodes:
        return ConfChange("restart", f"nodes added or removed: {', '.join(nodes)}", slurmd=True)
    changed = sorted(n for n in new.node_lines if new.node_lines[n] != running.node_lines[n])
    if changed:
        return ConfChange("restart", f"node definitions changed: {', '.join(changed)}",
                          slurmd=True)
    if new.gres_lines != running.gres_lines:
        return ConfChange("restart", "gres.conf changed", slurmd=True)
    every = [k for k in keys if k in ALL_RESTART_KEYS]
    if every:
        return ConfChange("restart", f"{', '.join(every)} changed", slurmd=True)
    ctld = [k for k in keys if k in CTLD_RESTART_KEYS]
    if ctld:
        return ConfChange("restart", f"{', '.join(ctld)} changed")
    if keys or new.partitions != running.partitions:
        return ConfChange("reconfigure", ", ".join(keys) or "partitions changed")
    return ConfChange("none")


# Debian's and Ubuntu's slurmd.service (Debian 12 22.05.8, measured in the lab; Ubuntu's 21.08
# and 23.11 units have the same lines): it starts only where a local slurm.conf exists, and
# runs `/usr/sbin/slurmd -D -s $SLURMD_OPTIONS`.
SLURMD_EXEC = "/usr/sbin/slurmd -D -s"
CONFIGLESS_DROPIN = "/etc/systemd/system/slurmd.service.d/gpuinfra-configless.conf"


def configless_dropin(server: str) -> str:
    """slurmd's drop-in: no local slurm.conf needed, the files fetched from ``server``
    (:func:`conf_server`)."""
    return unit_file({
        "Unit": [("#", "No local slurm.conf: slurmd fetches it from slurmctld."),
                 ("ConditionPathExists", "")],
        "Service": [("ExecStart", ""),
                    ("ExecStart", f"{SLURMD_EXEC} --conf-server {server} $SLURMD_OPTIONS")],
    }, about="The node's Slurm configuration is the controller's (configless_slurm.html): "
             "gpuinfra_roles/slurm.")
