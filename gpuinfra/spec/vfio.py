"""The VFIO keys of a hypervisor (``vfio_devices``, ``vms``, ``vfio_nvlink``): checked and typed
as :class:`VfioSpec`; refused on other hosts, and where passthrough would take what the host
itself uses or split GPUs that NVLink joins."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from difflib import get_close_matches
from typing import Any

from gpuinfra.spec.checks import WHERE_HOST, Collector, int_value
from gpuinfra.spec.model import (
    HEAD_GROUP,
    HYPERVISOR_GROUP,
    NVLINK_FABRICS,
    GpuSpec,
    HostInput,
    NodeSpec,
    NvlinkGroup,
    RdmaNic,
    VfioSpec,
    VmSpec,
)
from gpuinfra.vfio import (
    LIBVIRT_IMAGES,
    PCI_ADDRESS,
    PCI_ID,
    disk_problem,
    image_dir_problem,
    normalize_address,
    slot_of,
)

_VFIO_KEYS = ("vfio_devices", "vms", "vfio_nvlink")
_VM_KEYS = ("name", "devices", "vcpus", "memory_mib", "vmid", "disk")
_VM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ADDRESS = "a PCI address such as '0000:3b:00.0' (lspci -D)"
_DEVICE = f"{_ADDRESS}, or a vendor:device ID such as '10de:2331' (lspci -nn)"
_VM_EXAMPLE = "{'name': 'train1', 'devices': ['0000:3b:00.0'], 'vcpus': 8, 'memory_mib': 65536}"


def vfio_spec(host: HostInput, gpus: GpuSpec | None, nics: Sequence[RdmaNic],
              errs: Collector, image_dir: Any = LIBVIRT_IMAGES) -> VfioSpec | None:
    """A hypervisor's passthrough: devices (addresses, IDs), VMs, NVLink groups; refused on
    other hosts, and wherever passthrough would take what the host itself uses or split
    GPUs that NVLink joins. ``image_dir``: the directory VM disks are confined to (the vfio
    role's knob ``vfio_image_dir``, judged by its own rule: a bad one confines nothing here)."""
    raw = {key: host.data.get(key) for key in _VFIO_KEYS}
    if HYPERVISOR_GROUP not in host.groups:
        for key, value in raw.items():
            if value is not None:
                errs.add(host.name, key, value, "VFIO passthrough on a host outside the "
                         f"'{HYPERVISOR_GROUP}' group", f"only on hosts in '{HYPERVISOR_GROUP}'",
                         f"add {host.name} to {HYPERVISOR_GROUP} = [...] in inventory/<site>.py,"
                         f" or remove {key}")
        return None
    if HEAD_GROUP in host.groups:
        errs.add(host.name, "groups", f"{HEAD_GROUP}, {HYPERVISOR_GROUP}", "the cluster's head "
                 "is also a hypervisor: a VM's passthrough (a device reset, an IOMMU fault, "
                 "vfio-pci taking a device at boot) would take the controller down with it",
                 "the head in 'head' only", f"move the VMs to another host, or {host.name} "
                 f"out of {HYPERVISOR_GROUP}")
        return None
    addresses, ids = _vfio_devices(host.name, raw["vfio_devices"], errs)
    vms = _vms(host.name, raw["vms"], errs,
               None if image_dir_problem(image_dir) else image_dir)
    nvlink = _nvlink_groups(host.name, raw["vfio_nvlink"], errs)
    _check_vm_devices(host.name, addresses, ids, vms, errs)
    _check_nvlink_split(host.name, vms, nvlink, errs)
    _check_host_use(host.name, addresses, ids, gpus, nics, errs)
    return VfioSpec(tuple(addresses), tuple(ids), tuple(vms), tuple(nvlink))


def _vfio_devices(host: str, raw: Any, errs: Collector) -> tuple[list[str], list[str]]:
    if raw is None or (isinstance(raw, (list, tuple)) and not raw):
        errs.add(host, "vfio_devices", raw, f"a host in '{HYPERVISOR_GROUP}' passes nothing "
                 "through", f"a list of {_DEVICE}", f"list the devices its VMs get in "
                 f"vfio_devices {WHERE_HOST}, or remove it from '{HYPERVISOR_GROUP}'")
        return [], []
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        errs.add(host, "vfio_devices", raw, "must be a list", f"a list of {_DEVICE}",
                 f"write vfio_devices = [{raw!r}]" if isinstance(raw, str) else
                 f"fix vfio_devices {WHERE_HOST}")
        return [], []
    addresses: list[str] = []
    ids: list[str] = []
    for index, item in enumerate(raw):
        if isinstance(item, str) and PCI_ADDRESS.fullmatch(item):
            addresses.append(normalize_address(item))
        elif isinstance(item, str) and PCI_ID.fullmatch(item):
            ids.append(item.lower())
        else:
            errs.add(host, f"vfio_devices[{index}]", item, "malformed PCI address or "
                     "vendor:device ID", _DEVICE, "copy the address from `lspci -D` or the "
                     "[vendor:device] from `lspci -nn`")
    for value, count in Counter(addresses + ids).items():
        if count > 1:
            errs.add(host, "vfio_devices", value, "listed twice", "each device once",
                     "remove the duplicate")
    return list(dict.fromkeys(addresses)), list(dict.fromkeys(ids))


def _vms(host: str, raw: Any, errs: Collector, image_dir: str | None) -> list[VmSpec]:
    if raw is None:
        return []
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        errs.add(host, "vms", raw, "must be a list of dicts", f"[{_VM_EXAMPLE}]",
                 f"fix vms {WHERE_HOST}")
        return []
    vms = [vm for vm in (_vm(host, i, item, errs, image_dir) for i, item in enumerate(raw))
           if vm]
    for what, values in (("name", [vm.name for vm in vms]),
                         ("vmid", [vm.vmid for vm in vms if vm.vmid is not None])):
        for value, count in Counter(values).items():
            if count > 1:
                errs.add(host, "vms", value, f"two VMs with the {what} {value!r}",
                         f"a unique {what} per VM", "rename or renumber one of them")
    owner: dict[str, str] = {}
    for vm in vms:
        for device in vm.devices:
            other = owner.setdefault(slot_of(device), vm.name)
            if other != vm.name:
                errs.add(host, "vms", device, f"the device is in two VMs: {other!r} and "
                         f"{vm.name!r}", "each device in one VM at most",
                         f"remove {device} from one of the two VMs")
    return vms


def _vm(host: str, index: int, item: Any, errs: Collector,
        image_dir: str | None) -> VmSpec | None:
    field = f"vms[{index}]"
    if not isinstance(item, Mapping):
        errs.add(host, field, item, "must be a dict", _VM_EXAMPLE, "fix the entry")
        return None
    ok = True
    for key in item:
        if key not in _VM_KEYS:
            close = get_close_matches(str(key), _VM_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            errs.add(host, f"{field}[{key!r}]", item[key], f"unknown VM setting{hint}",
                     ", ".join(_VM_KEYS), f"remove or rename {key!r}")
            ok = False
    name = item.get("name")
    if not isinstance(name, str) or not _VM_NAME.fullmatch(name):
        errs.add(host, f"{field}['name']", name, "missing or malformed VM name",
                 "letters, digits, '_', '.' and '-', a letter or digit first (max 64)",
                 "name the VM as libvirt/Proxmox should know it")
        ok = False
    devices = item.get("devices")
    if isinstance(devices, (str, bytes)) or not isinstance(devices, (list, tuple)) or not devices:
        errs.add(host, f"{field}['devices']", devices, "missing or empty device list",
                 f"a non-empty list of {_ADDRESS}", "list the PCI addresses the VM gets")
        devices, ok = [], False
    good = []
    for device in devices:
        if isinstance(device, str) and PCI_ADDRESS.fullmatch(device):
            good.append(normalize_address(device))
        else:
            problem = "a vendor:device ID: a VM gets devices by address (libvirt hostdev, qm " \
                "hostpci)" if isinstance(device, str) and PCI_ID.fullmatch(device) else \
                "malformed PCI address"
            errs.add(host, f"{field}['devices']", device, problem, _ADDRESS,
                     "copy the address from `lspci -D`")
            ok = False
    vcpus = int_value(host, f"{field}['vcpus']", item.get("vcpus", 4), errs, 1, 1024,
                      "set the VM's virtual CPUs")
    memory = int_value(host, f"{field}['memory_mib']", item.get("memory_mib", 16384), errs, 256,
                       2**24, "set the VM's memory in MiB")
    vmid = item.get("vmid")
    if vmid is not None:
        vmid = int_value(host, f"{field}['vmid']", vmid, errs, 100, 999999999,
                         "set the Proxmox VE VM id (qm list), or remove vmid")
    disk = item.get("disk")
    problem = None if disk is None else disk_problem(disk, image_dir or LIBVIRT_IMAGES)
    if problem and (image_dir is not None or "outside" not in problem):
        where = image_dir or LIBVIRT_IMAGES
        errs.add(host, f"{field}['disk']", disk, problem,
                 f"the path of an image file inside {where}, e.g. '{where}/train1.qcow2' "
                 "(normalised: no '.' or '..')",
                 f"put the VM's image in {where} and name it there, or set vfio_image_dir "
                 "in group_data/<site>.py to the site's image directory (libvirt's storage "
                 "pool), or remove disk")
        ok = False
    if not ok or None in (vcpus, memory) or (item.get("vmid") is not None and vmid is None):
        return None
    return VmSpec(name, tuple(dict.fromkeys(good)), vcpus, memory, vmid, disk)


def _nvlink_groups(host: str, raw: Any, errs: Collector) -> list[NvlinkGroup]:
    if raw is None:
        return []
    example = "[{'gpus': ['0000:3b:00.0', '0000:3c:00.0'], 'fabric': 'bridge'}]"
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        errs.add(host, "vfio_nvlink", raw, "must be a list of dicts", example,
                 f"fix vfio_nvlink {WHERE_HOST}")
        return []
    groups = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw):
        field = f"vfio_nvlink[{index}]"
        gpus = item.get("gpus") if isinstance(item, Mapping) else None
        fabric = item.get("fabric", "bridge") if isinstance(item, Mapping) else None
        extra = sorted(set(item) - {"gpus", "fabric"}) if isinstance(item, Mapping) else []
        if not isinstance(item, Mapping) or extra:
            errs.add(host, field, item, "must be a dict of 'gpus' and 'fabric'", example,
                     "fix the entry")
            continue
        if fabric not in NVLINK_FABRICS:
            errs.add(host, f"{field}['fabric']", fabric, "unknown NVLink fabric",
                     ", ".join(NVLINK_FABRICS), "'bridge' for bridged or directly linked GPUs,"
                     " 'nvswitch' for an NVSwitch board")
            continue
        if isinstance(gpus, (str, bytes)) or not isinstance(gpus, (list, tuple)) or \
                len(gpus) < 2 or not all(isinstance(g, str) and PCI_ADDRESS.fullmatch(g)
                                         for g in gpus):
            errs.add(host, f"{field}['gpus']", gpus, "needs two or more GPU addresses",
                     f"a list of {_ADDRESS}", "list the GPUs NVLink joins")
            continue
        addresses = tuple(normalize_address(g) for g in gpus)
        for gpu in addresses:
            if gpu in seen:
                errs.add(host, f"{field}['gpus']", gpu, f"already in vfio_nvlink[{seen[gpu]}]",
                         "each GPU in one NVLink group", "merge the two groups")
            seen.setdefault(gpu, index)
        groups.append(NvlinkGroup(addresses, fabric))
    return groups


def _check_vm_devices(host: str, addresses: Sequence[str], ids: Sequence[str],
                      vms: Sequence[VmSpec], errs: Collector) -> None:
    """Every VM device is passed through: listed (the card, any function), or left to the
    deploy to match against the listed IDs on the hardware."""
    slots = {slot_of(a) for a in addresses}
    for vm in vms:
        for device in vm.devices:
            if slot_of(device) not in slots and not ids:
                errs.add(host, "vms", device, f"VM {vm.name!r} gets a device vfio_devices does "
                         "not pass through", "devices listed in vfio_devices",
                         f"add {device!r} to vfio_devices")


def _check_nvlink_split(host: str, vms: Sequence[VmSpec], groups: Sequence[NvlinkGroup],
                        errs: Collector) -> None:
    """GPUs joined by NVLink go to the same VM, or the guest sees no NV# link to its peer
    (docs/hardware-reference.md 4); part of an NVSwitch board needs Fabric Manager's
    shared-NVSwitch mode, which no role deploys."""
    owner = {slot_of(d): vm.name for vm in vms for d in vm.devices}
    for index, group in enumerate(groups):
        owners = [owner.get(slot_of(gpu)) for gpu in group.gpus]
        if len(set(owners)) == 1:
            continue
        where = ", ".join(f"{gpu} ({f'VM {o!r}' if o else 'no VM'})"
                          for gpu, o in zip(group.gpus, owners, strict=True))
        if group.fabric == "nvswitch":
            errs.add(host, f"vfio_nvlink[{index}]", list(group.gpus),
                     f"part of an NVSwitch board goes to a VM ({where}): that needs Fabric "
                     "Manager's shared-NVSwitch mode (a service VM driving the switches), "
                     "which gpuinfra does not deploy", "the whole board in one VM",
                     f"give all {len(group.gpus)} GPUs of the board (and its NVSwitches) to "
                     "one VM")
        else:
            errs.add(host, f"vfio_nvlink[{index}]", list(group.gpus),
                     f"GPUs joined by NVLink are split ({where}): a guest sees no NV# link to "
                     "a peer outside it", "every GPU of an NVLink group in the same VM",
                     "give the GPUs of the group to one VM")


def _check_host_use(host: str, addresses: Sequence[str], ids: Sequence[str],
                    gpus: GpuSpec | None, nics: Sequence[RdmaNic], errs: Collector) -> None:
    """Nothing the host itself counts (its GPUs for the driver and the schedulers, its RDMA
    NICs) is passed through."""
    if gpus is not None:
        model_ids = {f"10de:{pid}" for pid in gpus.model.pci_ids}
        for pci_id in ids:
            if pci_id in model_ids:
                errs.add(host, "vfio_devices", pci_id, f"vfio-pci ids={pci_id} claims every "
                         f"{gpus.model.key} of the host, including the gpu_count = "
                         f"{gpus.count} GPUs its driver and Slurm/Kubernetes count",
                         "the GPUs that go to VMs by PCI address",
                         "list those GPUs by address (the rest stay the host's), or remove "
                         "gpu_model/gpu_count when every GPU goes to VMs")
    slots = {slot_of(a) for a in addresses}
    for nic in nics:
        if nic.pci and slot_of(normalize_address(nic.pci)) in slots:
            errs.add(host, "vfio_devices", nic.pci, f"the host's RDMA NIC {nic.name} is also "
                     "passed through", "devices the host does not use itself",
                     f"remove it from vfio_devices, or {nic.name} from rdma_nics")


# The rdma role's default for rdma_acs_disable (roles/rdma/defaults.py), for a spec
# built without the roles' knobs.
_RDMA_ACS_DISABLE_DEFAULT = True


def check_acs_kept(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """A hypervisor whose rdma role clears ACS (``rdma_acs_disable``, on by default on GPU
    nodes with ``rdma_nics``) cannot hand devices to VMs: the rdma role writes ACS Control 0
    on the GPU-NIC bridges after the kernel has computed the IOMMU groups at boot, so the
    groups VFIO relies on no longer isolate the devices below those bridges (peer-to-peer
    DMA goes through the switch, never reaching the IOMMU)."""
    for node in nodes:
        if node.vfio is None or not (node.vfio.addresses or node.vfio.ids):
            continue
        clears = node.settings.get("rdma_acs_disable", _RDMA_ACS_DISABLE_DEFAULT)
        if not node.rdma_nics or node.gpus is None or clears is not True:
            continue
        errs.add(node.name, "rdma_acs_disable", clears,
                 "the rdma role clears ACS on this node's GPU-NIC bridges (rdma_nics with "
                 "rdma_acs_disable = True) after the kernel computed its IOMMU groups, while "
                 "vfio_devices hands devices to VMs: those groups would no longer isolate them",
                 "rdma_acs_disable = False on a node with vfio_devices",
                 f"set rdma_acs_disable = False for {node.name} (GPUDirect RDMA traffic then "
                 "crosses the root complex: roles/rdma/README.md), or remove "
                 "vfio_devices and its VMs from it")
