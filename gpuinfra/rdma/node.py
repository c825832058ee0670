"""RDMA on a node, decided from data: ATS in NIC firmware, ACS on the GPU-NIC bridges, the
GPUDirect RDMA path, NCCL's NIC settings, and the files the rdma role writes.

Pure: no pyinfra, no I/O. The role hands it parsed facts (the PCI tree:
:mod:`gpuinfra.parsers.pcitree`; firmware: :mod:`gpuinfra.parsers.mlxconfig`) and the typed
spec; the verify suite and the unit tests call the same functions on captured outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuinfra.errors import GpuinfraError, clip
from gpuinfra.parsers.mlxconfig import MlxConfig
from gpuinfra.parsers.pcitree import BDF
from gpuinfra.spec.model import RdmaNic
from gpuinfra.text import FileText
from gpuinfra.units import oneshot_unit, path_unit

ACS_SCRIPT = "/usr/local/sbin/gpuinfra-acs-off"
ACS_UNIT = "/etc/systemd/system/gpuinfra-acs-off.service"
RXE_SCRIPT = "/usr/local/sbin/gpuinfra-soft-roce"
RXE_UNIT = "/etc/systemd/system/gpuinfra-soft-roce.service"
MODULES_LOAD = "/etc/modules-load.d/gpuinfra-rdma.conf"
PEERMEM = "nvidia_peermem"  # /proc/modules spells it with "_"; modprobe takes either
ATS = "ATS_ENABLED"
# GPUDirect RDMA and IOMMU: translation off for the host's own devices (NVIDIA's GPUDirect
# RDMA guide; one mechanism with the vfio role: gpuinfra.vfio.grub_dropin).
KERNEL_ARGS = ("iommu=pt",)
# The files the rdma role writes from this module's data (gpuinfra.text.FileText), each rendered
# from its template in roles/rdma/templates.
ACS_TEMPLATE = "rdma/usr/local/sbin/gpuinfra-acs-off.j2"
RXE_TEMPLATE = "rdma/usr/local/sbin/gpuinfra-soft-roce.j2"
MODULES_LOAD_TEMPLATE = "rdma/etc/modules-load.d/gpuinfra-rdma.conf.j2"

# ---------------------------------------------------------------------------- ATS in firmware


@dataclass(frozen=True)
class AtsPlan:
    """What to do about ``ATS_ENABLED`` on one NIC.

    action: "none" (as wanted, now and after boot), "set" (Next-Boot differs: set it, then a
    reboot or firmware reset applies it), "reboot" (Next-Boot is right, Current is not yet: a
    reboot is pending). current/next_boot: the values read (None: not shown).
    """

    nic: str
    action: str
    wanted: bool
    current: bool | None
    next_boot: bool | None

    @property
    def why(self) -> str:
        shown = (f"{self.nic}: {ATS} Current {_word(self.current)}, Next-Boot "
                 f"{_word(self.next_boot)}")
        if self.action == "set":
            return f"{shown}: set to {_word(self.wanted)} (applies at the next reboot)"
        if self.action == "reboot":
            return f"{shown}: set, waiting for a reboot (or mstfwreset) to take effect"
        return f"{shown}: as wanted"


def _word(value: bool | None) -> str:
    return "unknown" if value is None else ("True" if value else "False")


def ats_plan(nic: str, wanted: bool, query: MlxConfig) -> AtsPlan:
    """The plan for ``nic`` from its ``mstconfig -d <pci> -e query`` (or plain ``query``:
    Next-Boot only, Current then unknown). Raises GpuinfraError when the firmware has no
    ``ATS_ENABLED`` (old firmware or mstflint: nothing to set)."""
    param = query.params.get(ATS)
    if param is None:
        raise GpuinfraError(f"{nic}: the firmware query shows no {ATS} (firmware or mstflint "
                            "older than 4.13, or not a ConnectX-5 or later): update them, or "
                            "set ats=False for this NIC")
    next_boot = param.value if isinstance(param.value, bool) else None
    current = param.current if isinstance(param.current, bool) else None
    if next_boot != wanted:
        action = "set"
    elif current is not None and current != wanted:
        action = "reboot"
    else:
        action = "none"
    return AtsPlan(nic, action, wanted, current, next_boot)


def ats_set_command(pci: str, wanted: bool) -> list[str]:
    """mstconfig's command setting ATS for the next boot (-y: no prompt)."""
    return ["mstconfig", "-y", "-d", pci, "set", f"{ATS}={1 if wanted else 0}"]


# ---------------------------------------------------------------------------- the PCI tree
# (paths: gpuinfra.parsers.pcitree.parse_pci_paths)

@dataclass(frozen=True)
class GpuNicPair:
    """A GPU and its nearest NIC, with the bridges peer traffic between them crosses below
    their common ancestor (``shared``: how many ancestors they share)."""

    gpu: str
    nic: str
    shared: int
    bridges: tuple[str, ...]


def nearest_pairs(gpus: Iterable[str], nics: Iterable[str],
                  paths: Mapping[str, tuple[str, ...]]) -> list[GpuNicPair]:
    """Each GPU with its nearest NIC(s) in the PCI tree: the most ancestors in common (ties:
    every one of them). A GPU sharing not even a root port with any NIC has no pair: its
    traffic to a NIC crosses the root complex, where NCCL does not use GPUDirect RDMA by
    default (NCCL_NET_GDR_LEVEL), and ACS there is the IOMMU's business."""
    pairs = []
    nics = [n for n in nics if n in paths]
    for gpu in gpus:
        if gpu not in paths:
            continue
        ranked = [(_shared(paths[gpu], paths[nic]), nic) for nic in nics]
        best = max((s for s, _ in ranked), default=0)
        if best == 0:
            continue
        for shared, nic in ranked:
            if shared == best:
                below = paths[gpu][shared:] + paths[nic][shared:]
                pairs.append(GpuNicPair(gpu, nic, shared, tuple(dict.fromkeys(below))))
    return pairs


def _shared(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def acs_bridges(pairs: Iterable[GpuNicPair], protected: Iterable[str] = ()) -> list[str]:
    """The bridges whose ACS the role turns off: on some GPU-NIC path, never one in
    ``protected`` (on a hypervisor, the bridges above a passed-through device: VFIO needs
    their ACS for isolation)."""
    keep = set(protected)
    return sorted({b for p in pairs for b in p.bridges} - keep)


def ancestors_of(devices: Iterable[str], paths: Mapping[str, tuple[str, ...]]) -> set[str]:
    return {bridge for d in devices for bridge in paths.get(d, ())}


def acs_script(bridges: Sequence[str]) -> FileText:
    """The boot script turning ACS Control off on ``bridges`` (template :data:`ACS_TEMPLATE`;
    setpci writes do not survive a reboot). Each write is read back: a bridge that kept ACS
    fails the unit. A bridge that is not a PCI address is refused (the script names it raw)."""
    for bridge in bridges:
        if not BDF.fullmatch(bridge):
            raise GpuinfraError(f"not a PCI address: {clip(bridge)}")
    return FileText(ACS_TEMPLATE, {"bridges": list(bridges)})


def acs_unit() -> FileText:
    return oneshot_unit("gpuinfra: ACS off on the GPU-NIC PCIe bridges", ACS_SCRIPT)


# ---------------------------------------------------------------------------- Soft-RoCE (lab)

def rxe_script(nics: Sequence[RdmaNic]) -> FileText:
    """The boot script making each Soft-RoCE device on its netdev (template
    :data:`RXE_TEMPLATE`; once: a device already there is kept)."""
    for nic in nics:
        if nic.netdev is None:
            raise GpuinfraError(f"Soft-RoCE NIC {nic.name} has no netdev")
    return FileText(RXE_TEMPLATE, {"nics": [{"name": n.name, "netdev": n.netdev}
                                            for n in nics]})


def rxe_unit(nics: Sequence[RdmaNic]) -> FileText:
    devices = [path_unit(f"/sys/subsystem/net/devices/{n.netdev}", "device")
               for n in nics if n.netdev]
    return oneshot_unit("gpuinfra: Soft-RoCE devices (lab)", RXE_SCRIPT,
                        after=["network-online.target", *devices],
                        wants=["network-online.target"])


# ---------------------------------------------------------------------------- GPUDirect RDMA

@dataclass(frozen=True)
class GpuDirect:
    """How GPU memory reaches the NICs: "peermem" (nvidia-peermem over PeerDirect),
    "dma-buf" (the open GPU modules' DMA-BUF export) or "none"; with the reason."""

    path: str
    reason: str


def gpudirect_path(stack: str, open_modules: bool, peermem: bool) -> GpuDirect:
    """The GPUDirect RDMA path for a GPU node (docs/hardware-reference.md 3.3)."""
    if stack == "doca-ofed" and peermem:
        return GpuDirect("peermem", "DOCA-OFED's ib_core exports PeerDirect, which "
                         "nvidia-peermem (shipped with the driver since R470) registers GPU "
                         "memory with; it works with the open and the proprietary modules")
    if open_modules:
        return GpuDirect("dma-buf", "the open GPU kernel modules export GPU memory as DMA-BUF "
                         "and the distribution's kernel (5.12+) and rdma-core (34+) import it "
                         "(ibv_reg_dmabuf_mr), NVIDIA's recommended path; the inbox ib_core "
                         "has no PeerDirect, so nvidia-peermem would not load")
    return GpuDirect("none", "the inbox ib_core has no PeerDirect (nvidia-peermem cannot "
                     "load) and the proprietary GPU modules export no DMA-BUF: GPU memory "
                     "goes through host memory. Fix: nvidia_driver_open_modules = True, or "
                     "rdma_stack = 'doca-ofed'")


def peermem_modules_load() -> FileText:
    """/etc/modules-load.d/gpuinfra-rdma.conf (template :data:`MODULES_LOAD_TEMPLATE`):
    nvidia-peermem at every boot."""
    return FileText(MODULES_LOAD_TEMPLATE)


# ---------------------------------------------------------------------------- NCCL

def gid_index(nics: Sequence[RdmaNic]) -> int | None:
    """The one RoCE GID index of a node's NICs (None: NCCL's own choice)."""
    indexes = {n.gid_index for n in nics if n.gid_index is not None}
    if len(indexes) > 1:
        raise GpuinfraError(f"NICs with different GID indexes: {sorted(indexes)}")
    return indexes.pop() if indexes else None


def nccl_env(nics: Sequence[RdmaNic]) -> dict[str, str]:
    """NCCL's NIC settings from the spec: ``NCCL_IB_HCA`` (exact names, ``=`` prefix: no
    prefix matching, so mlx5_1 does not also select mlx5_10) and, for RoCE NICs with a GID
    index, ``NCCL_IB_GID_INDEX``."""
    if not nics:
        return {}
    env = {"NCCL_IB_HCA": "=" + ",".join(n.name for n in nics)}
    index = gid_index(nics)
    if index is not None:
        env["NCCL_IB_GID_INDEX"] = str(index)
    return env
