"""The ``rdma_nics`` and ``soft_roce`` keys of a host: checked, and typed as :class:`RdmaNic`.

Refused here, before any host is touched, each with host, field, value, what is allowed and
the fix: a malformed or duplicate name or PCI address, a rate the link layer (or the NIC
model) cannot have, ATS where the NIC model has none, a RoCE GID index on InfiniBand or two
different GID indexes on one host (NCCL takes one), a Soft-RoCE NIC that is not one (a PCI
address, no netdev), and RDMA NICs on a hypervisor that keeps no GPU (its GPUs all go to VMs:
GPUDirect RDMA happens in the VMs, and the host's ACS stays as VFIO isolation needs it).
Site-wide: ``rdma_stack = 'doca-ofed'`` needs the pinned fingerprint of its repository's key.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.knowledge.nics import (
    NIC_MODELS,
    SOFT_ROCE,
    format_rate,
    nic_model,
    rates_for,
)
from gpuinfra.spec.checks import WHERE_ALL, WHERE_HOST, Collector, check_nested_keys
from gpuinfra.spec.model import HYPERVISOR_GROUP, LINK_LAYERS, HostInput, NodeSpec, RdmaNic

NIC_KEYS = ("name", "pci", "ats", "link_layer", "rate_gbps", "model", "gid_index", "netdev")
_NIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # never "-x" (an option) or ".."
_NETDEV = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}")  # IFNAMSIZ - 1; no "-x", ".."
_PCI_BDF = re.compile(r"([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_EXAMPLE = ("{'name': 'mlx5_0', 'pci': '0000:17:00.0', 'link_layer': 'infiniband', "
            "'rate_gbps': 400, 'model': 'ConnectX-7'}")


def soft_roce(host: HostInput, errs: Collector) -> bool:
    value = host.data.get("soft_roce")
    if value is None:
        return False
    if not isinstance(value, bool):
        errs.add(host.name, "soft_roce", value, "must be True or False", "True, False",
                 "set soft_roce = True only in the lab's group data (Soft-RoCE devices)")
        return False
    return value


def rdma_nics(host: HostInput, on_soft_roce: bool, errs: Collector) -> tuple[RdmaNic, ...]:
    raw = host.data.get("rdma_nics")
    if raw is None:
        if on_soft_roce:
            errs.add(host.name, "soft_roce", True, "Soft-RoCE on a host without rdma_nics",
                     "soft_roce with rdma_nics naming the rxe devices and their netdevs",
                     "add rdma_nics = [{'name': 'rxe0', 'netdev': 'enp0s3', ...}] or remove "
                     "soft_roce")
        return ()
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        errs.add(host.name, "rdma_nics", raw, "must be a list", f"[{_EXAMPLE}]",
                 f"fix rdma_nics {WHERE_HOST}")
        return ()
    nics = [n for n in (_nic(host.name, i, item, on_soft_roce, errs)
                        for i, item in enumerate(raw)) if n]
    # Duplicates are judged on every entry, not only the valid ones: a copied address must
    # show in the same round as the entries' other problems, not after they are fixed.
    _check_unique(host.name, [_identity(item) for item in raw], errs)
    _check_gid_index(host.name, nics, errs)
    _check_hypervisor(host, nics, errs)
    return tuple(nics)


def _nic(host: str, index: int, item: Any, on_soft_roce: bool,
         errs: Collector) -> RdmaNic | None:
    field = f"rdma_nics[{index}]"
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, Mapping):
        errs.add(host, field, item, "must be a NIC name or a dict", f"'mlx5_0' or {_EXAMPLE}",
                 "fix the entry")
        return None
    ok = check_nested_keys(host, field, item, NIC_KEYS, "unknown NIC setting", errs)
    name, pci, netdev = item.get("name"), item.get("pci"), item.get("netdev")
    model_key = item.get("model", SOFT_ROCE if on_soft_roce else None)
    model = nic_model(model_key) if isinstance(model_key, str) else None
    ats = item.get("ats", model.ats if model is not None else True)
    layer = item.get("link_layer", "ethernet" if on_soft_roce else "infiniband")
    # ibv_devinfo prints "InfiniBand" / "Ethernet": accepted as it prints them, in any case.
    layer = layer.lower() if isinstance(layer, str) else layer
    if not isinstance(name, str) or not _NIC_NAME.fullmatch(name):
        errs.add(host, f"{field}['name']", name, "missing or malformed RDMA device name",
                 "an ibv device name such as 'mlx5_0'", "set the name `ibv_devices` shows")
        ok = False
    if pci is not None and not (isinstance(pci, str) and _PCI_BDF.fullmatch(pci)):
        errs.add(host, f"{field}['pci']", pci, "malformed PCI address",
                 "DDDD:BB:SS.F or BB:SS.F, as `lspci -D` prints", "copy the address from lspci")
        ok, pci = False, None
    if netdev is not None and not (isinstance(netdev, str) and _NETDEV.fullmatch(netdev)):
        errs.add(host, f"{field}['netdev']", netdev, "malformed network interface name",
                 "an interface name of 1-15 characters, as `ip link` prints", "fix netdev")
        ok = False
    if not isinstance(ats, bool):
        errs.add(host, f"{field}['ats']", ats, "must be True or False", "True, False",
                 "write ats=True to enable ATS in firmware")
        ok = False
    if layer not in LINK_LAYERS:
        errs.add(host, f"{field}['link_layer']", item.get("link_layer"), "unknown link layer",
                 ", ".join(LINK_LAYERS) + " (in any case)",
                 "set link_layer as `ibv_devinfo` reports it")
        ok = False
    if model_key is not None and model is None:
        errs.add(host, f"{field}['model']", model_key, "unknown NIC model",
                 ", ".join(NIC_MODELS), "set the model `ibv_devinfo` vendor_part_id names, or "
                 "remove model")
        ok = False
    rate = _rate(host, field, item.get("rate_gbps"), layer, on_soft_roce, errs)
    gid = _gid_index(host, field, item.get("gid_index"), layer, errs)
    ok = ok and rate is not False and gid is not False
    if ok:
        ok = _fits_stack(host, field, pci, netdev, model_key, on_soft_roce, errs)
    if ok and model is not None:
        ok = _fits_model(host, field, model, ats, layer, rate, errs)
    if not ok:
        return None
    return RdmaNic(name, _normal_pci(pci), ats, layer, rate, model_key, gid, netdev)


def _normal_pci(pci: str | None) -> str | None:
    if pci is None:
        return None
    pci = pci.lower()
    return pci if pci.count(":") == 2 else f"0000:{pci}"


def _rate(host: str, field: str, value: Any, layer: Any, on_soft_roce: bool,
          errs: Collector) -> float | None | bool:
    """The checked rate; None when not given; False when refused."""
    if value is None:
        return None
    allowed = rates_for(layer, on_soft_roce) if isinstance(layer, str) else ()
    what = "a Soft-RoCE device" if on_soft_roce else f"{layer} (link_layer)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        errs.add(host, f"{field}['rate_gbps']", value, "must be a number (Gb/s)",
                 ", ".join(format_rate(r) for r in allowed) or "a number",
                 "write the rate without quotes, e.g. rate_gbps=400")
        return False
    if allowed and value not in allowed:
        errs.add(host, f"{field}['rate_gbps']", value, f"not a rate {what} can have",
                 ", ".join(format_rate(r) for r in allowed),
                 "set the rate `ibstat` shows on a healthy port of this NIC (or fix link_layer)"
                 + (": rxe reports 2.5 on a netdev whose speed is unknown" if on_soft_roce
                    else ""))
        return False
    return float(value)


def _gid_index(host: str, field: str, value: Any, layer: Any, errs: Collector) -> int | None | bool:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
        errs.add(host, f"{field}['gid_index']", value, "not a GID index", "an integer 0..255",
                 "set the index `show_gids` lists for RoCE v2 (often 3 on mlx5, 1 on rxe)")
        return False
    if layer == "infiniband":
        errs.add(host, f"{field}['gid_index']", value, "a GID index on an InfiniBand NIC: "
                 "NCCL_IB_GID_INDEX is for RoCE (Ethernet) only", "only with link_layer "
                 "'ethernet'", "remove gid_index, or set link_layer='ethernet' for RoCE")
        return False
    return value


def _fits_model(host: str, field: str, model: Any, ats: bool, layer: str,
                rate: float | None, errs: Collector) -> bool:
    ok = True
    if ats and not model.ats:
        errs.add(host, f"{field}['ats']", True, f"ATS requested on a {model.key}, which has "
                 "no ATS_ENABLED firmware setting", "ats=False on this model",
                 "set ats=False (or fix model)")
        ok = False
    if layer not in model.link_layers:
        errs.add(host, f"{field}['link_layer']", layer, f"a {model.key} has no {layer} ports",
                 ", ".join(model.link_layers), "fix link_layer or model")
        ok = False
    if rate is not None and rate > model.max_gbps:
        errs.add(host, f"{field}['rate_gbps']", rate, f"faster than a {model.key} port "
                 f"({format_rate(model.max_gbps)} Gb/s)",
                 f"at most {format_rate(model.max_gbps)}", "fix rate_gbps or model")
        ok = False
    return ok


def _fits_stack(host: str, field: str, pci: str | None, netdev: str | None,
                model_key: str | None, on_soft_roce: bool, errs: Collector) -> bool:
    """Soft-RoCE NICs are rxe devices on a netdev (no PCI function, no firmware); rxe is for
    the lab only. (A real NIC without ``pci`` is found by the role through sysfs.)"""
    if on_soft_roce:
        problems = []
        if pci is not None:
            problems.append(("pci", pci, "a Soft-RoCE device has no PCI function",
                             "remove pci (rxe runs on the netdev)"))
        if netdev is None:
            problems.append(("netdev", None, "a Soft-RoCE device is made on a netdev",
                             "set netdev to the interface on the lab's segment"))
        if model_key != SOFT_ROCE:
            problems.append(("model", model_key, "soft_roce hosts have only Soft-RoCE NICs",
                             f"remove model (or set {SOFT_ROCE!r})"))
        for key, value, problem, fix in problems:
            errs.add(host, f"{field}['{key}']", value, problem, "see roles/rdma/README.md",
                     fix)
        return not problems
    if model_key == SOFT_ROCE:
        errs.add(host, f"{field}['model']", model_key, "a Soft-RoCE NIC on a host without "
                 "soft_roce (rxe is for the lab; a real site never gets it)",
                 "a ConnectX model", "remove model, or set soft_roce = True (lab only)")
        return False
    return True


def _identity(item: Any) -> tuple[str, str | None]:
    """The name and PCI address of a raw ``rdma_nics`` entry (for the duplicate check; what
    is malformed there is reported by :func:`_nic`)."""
    if isinstance(item, str):
        item = {"name": item}
    item = item if isinstance(item, Mapping) else {}
    name, pci = item.get("name"), item.get("pci")
    pci = _normal_pci(pci) if isinstance(pci, str) and _PCI_BDF.fullmatch(pci) else None
    return (name if isinstance(name, str) else "", pci)


def _check_unique(host: str, nics: Sequence[tuple[str, str | None]], errs: Collector) -> None:
    for name, count in Counter(name for name, _ in nics if name).items():
        if count > 1:
            errs.add(host, "rdma_nics", name, "NIC listed twice", "each NIC once",
                     "remove the duplicate")
    for pci, count in Counter(address for _, address in nics if address).items():
        if count > 1:
            names = ", ".join(name for name, address in nics if address == pci)
            errs.add(host, "rdma_nics", pci, f"one PCI address for several NICs ({names})",
                     "each NIC's own address (`lspci -D`; a dual-port card's ports are "
                     "functions .0 and .1)", "fix the copied address")


def _check_gid_index(host: str, nics: Sequence[RdmaNic], errs: Collector) -> None:
    indexes = {n.gid_index for n in nics if n.gid_index is not None}
    if len(indexes) > 1:
        errs.add(host, "rdma_nics", sorted(indexes), "different RoCE GID indexes on one host: "
                 "NCCL_IB_GID_INDEX is one value for every NIC", "one gid_index per host",
                 "use the same GID type (RoCE v2, IPv4) on every NIC")


def _check_hypervisor(host: HostInput, nics: Sequence[RdmaNic], errs: Collector) -> None:
    """A hypervisor keeping no GPU (all go to VMs) has no GPU for its NICs to pair with; the
    rdma role would weaken ACS that VFIO isolation needs: refused unless VFIO agrees, i.e.
    the host keeps GPUs (gpu_model) whose paths are not passed through."""
    if HYPERVISOR_GROUP not in host.groups or not nics or host.data.get("gpu_model"):
        return
    if not host.data.get("vfio_devices"):
        return
    errs.add(host.name, "rdma_nics", [n.name for n in nics], "RDMA NICs on a hypervisor whose "
             "GPUs all go to VMs (no gpu_model): GPUDirect RDMA belongs in the VMs, and ACS "
             "on the host stays as VFIO isolation needs it", "rdma_nics on hosts that keep "
             "GPUs", "pass the NIC (or a VF) to the VM with its GPUs in vfio_devices and "
             "remove it from rdma_nics, or keep GPUs on the host (gpu_model, gpu_count)")


def check_stack(nodes: Sequence[NodeSpec], stack: str, errs: Collector) -> None:
    """DOCA-OFED comes from NVIDIA's repository: its signing key must be pinned (the
    fingerprint the operator checked), as every other repository's is."""
    if stack != "doca-ofed":
        return
    for node in nodes:
        if node.rdma_nics and not node.settings.get("rdma_doca_key_fingerprint"):
            errs.add(node.name, "rdma_doca_key_fingerprint", None, "rdma_stack = 'doca-ofed' "
                     "without the fingerprint of the repository's signing key",
                     "the 40 hex digits of GPG-KEY-Mellanox.pub (long key id "
                     "A024F6F0E6D6A281), as `gpg --show-keys` prints them",
                     f"set rdma_doca_key_fingerprint {WHERE_ALL}, or rdma_stack = 'inbox'")
            return
