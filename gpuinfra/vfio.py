"""VFIO passthrough on a KVM host: kernel arguments, early binding, IOMMU groups, VM definitions.

The facts are in docs/hardware-reference.md section 4: the IOMMU kernel arguments per CPU
vendor, ``options vfio-pci ids=`` with ``softdep`` so vfio-pci wins the probe, per-address
binding (driverctl) when only some cards of a model go to VMs, the IOMMU group as the unit of
isolation, libvirt ``hostdev`` entries. Everything here is a pure function of the spec and of
the host's PCI functions (:mod:`gpuinfra.parsers.pcisysfs`): the `vfio` role computes with it,
the verify suite judges with it, and both are unit-tested on real sysfs captures.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuinfra.errors import GpuinfraError, clip
from gpuinfra.parsers.pcisysfs import PciFunction, PciSysfs
from gpuinfra.paths import path_problem
from gpuinfra.text import FileText

if TYPE_CHECKING:  # the spec imports this module's patterns; no import cycle at run time
    from gpuinfra.spec.model import VmSpec

# The files this module describes (gpuinfra.text.FileText), each rendered from its template in
# roles/vfio/templates. Their first line is the one these files have carried since they were
# first deployed, kept byte for byte in the templates (not gpuinfra.header's): the GRUB drop-in
# and modprobe.d file are judged by their bytes, and a changed first line would run update-grub
# and update-initramfs and mark a reboot on every hypervisor and RDMA node of a running cluster,
# for a comment.
GRUB_TEMPLATE = "vfio/etc/default/grub.d/gpuinfra-vfio.cfg.j2"
MODPROBE_TEMPLATE = "vfio/etc/modprobe.d/gpuinfra-vfio.conf.j2"
MODULES_LOAD_TEMPLATE = "vfio/etc/modules-load.d/gpuinfra-vfio.conf.j2"
DOMAIN_TEMPLATE = "vfio/etc/gpuinfra/libvirt/domain.xml.j2"  # every VM's <LIBVIRT_DIR>/<vm>.xml

# A PCI function as `lspci -D` prints it (the domain may be left out: 0000), and a
# vendor:device ID as `lspci -nn` prints it.
PCI_ADDRESS = re.compile(r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
PCI_ID = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{4}")

# IOMMU on, host DMA identity-mapped (docs/hardware-reference.md 4) [kparams] [arch-pt].
# Intel: intel_iommu_setup() parses "on" (dmar_disabled = 0). AMD: no "on": amd_iommu= takes
# fullflush, off, force_isolation, force_enable, pgtbl_v1/v2, irtcachedis...
# (Documentation/admin-guide/kernel-parameters.txt "amd_iommu="); anything else is
# "Unknown option" (drivers/iommu/amd/init.c parse_amd_iommu_options); AMD-Vi is on whenever
# the firmware enables it (IVRS table). So iommu=pt alone: knowledge audit 9735030 row 85.
KERNEL_ARGS: dict[str, tuple[str, ...]] = {
    "GenuineIntel": ("intel_iommu=on", "iommu=pt"),
    "AuthenticAMD": ("iommu=pt",),
}
# Loaded at boot and put in the initramfs, so vfio-pci is there before any host driver.
VFIO_MODULES = ("vfio", "vfio_iommu_type1", "vfio_pci")
VFIO_DRIVER = "vfio-pci"
# Drivers a function may keep without making its IOMMU group unusable for VFIO.
_GROUP_SAFE_DRIVERS = (VFIO_DRIVER, "pci-stub")

GRUB_DROPIN = "/etc/default/grub.d/gpuinfra-vfio.cfg"
KERNEL_CMDLINE = "/etc/kernel/cmdline"  # Proxmox VE with systemd-boot (proxmox-boot-tool)
MODPROBE_CONF = "/etc/modprobe.d/gpuinfra-vfio.conf"
MODULES_LOAD = "/etc/modules-load.d/gpuinfra-vfio.conf"
INITRAMFS_MODULES = "/etc/initramfs-tools/modules"
LIBVIRT_DIR = "/etc/gpuinfra/libvirt"

# Where a VM's disk image may be (the knob vfio_image_dir): libvirt's default storage pool,
# <libvirt data root>/images (virt-manager, virtinst/storage.py: _preferred_default_pool_path).
LIBVIRT_IMAGES = "/var/lib/libvirt/images"
_SAFE_PATH = re.compile(r"(/[A-Za-z0-9._+-]+)+")
GROUP_FIX = "another slot, or ACS in the BIOS; never the ACS override patch in production"


def normalize_address(value: str) -> str:
    """``3B:00.0`` -> ``0000:3b:00.0``: as sysfs and ``lspci -D`` write it."""
    value = value.lower()
    return value if value.count(":") == 2 else f"0000:{value}"


def slot_of(address: str) -> str:
    """The card a function belongs to: ``0000:3b:00.1`` -> ``0000:3b:00``."""
    return address.rsplit(".", 1)[0]


# ---------------------------------------------------------------------------- kernel arguments

def kernel_args(cpu_vendor: str) -> tuple[str, ...]:
    """The IOMMU arguments for a CPU vendor (``vendor_id`` of /proc/cpuinfo)."""
    try:
        return KERNEL_ARGS[cpu_vendor]
    except KeyError:
        raise GpuinfraError(f"CPU vendor {clip(cpu_vendor)}: no IOMMU kernel arguments known "
                            f"(known: {', '.join(KERNEL_ARGS)})") from None


def missing_kernel_args(cmdline: str, args: Iterable[str]) -> list[str]:
    """The ``args`` that the kernel command line ``cmdline`` (/proc/cmdline) lacks."""
    present = set(cmdline.split())
    return [arg for arg in args if arg not in present]


VFIO_WHY = "IOMMU on for VFIO passthrough"
RDMA_WHY = "IOMMU passthrough mode for RDMA (GPUDirect)"
RDMA_ARGS = ("iommu=pt",)  # NVIDIA's GPUDirect RDMA guide: no IOMMU translation for DMA
# systemd.unified_cgroup_hierarchy=0: systemd mounts the legacy (v1) controller hierarchies
# instead of the unified v2 one (systemd(1), "Kernel Command Line"; systemd 249 on Ubuntu
# 22.04 honours it). Slurm 21.08's only cgroup plugin is
# cgroup/v1 (cgroup/v2 came in 22.05: Slurm's cgroup_v2.html), so its slurmd fails on a
# cgroup v2 host.
CGROUP_V1_ARGS = ("systemd.unified_cgroup_hierarchy=0",)
CGROUP_V1_WHY = "cgroup v1 for Slurm's cgroup/v1 plugin (Slurm 21.08 has no cgroup/v2)"


def node_kernel_args(hypervisor: bool, rdma: bool, cpu_vendor: str,
                     cgroup_v1: bool = False) -> tuple[tuple[str, ...], str]:
    """Every kernel argument a node needs, and why: one list for the vfio, rdma and slurm
    roles, so all write the same GRUB drop-in (one mechanism; whichever runs second changes
    nothing). ``rdma``: the node has real RDMA NICs (not Soft-RoCE, which does no device DMA);
    ``cgroup_v1``: the node's Slurm has only the cgroup/v1 plugin while its distribution boots
    cgroup v2 (:data:`gpuinfra.platforms.CGROUP_V1`)."""
    args: tuple[str, ...] = kernel_args(cpu_vendor) if hypervisor else ()
    if rdma:
        args += tuple(a for a in RDMA_ARGS if a not in args)
    whys = [VFIO_WHY] if hypervisor else [RDMA_WHY] if rdma else []
    if cgroup_v1:
        args += CGROUP_V1_ARGS
        whys.append(CGROUP_V1_WHY)
    return args, "; ".join(whys)


def grub_dropin(args: Sequence[str], why: str = VFIO_WHY) -> FileText:
    """/etc/default/grub.d/gpuinfra-vfio.cfg (template :data:`GRUB_TEMPLATE`): the arguments
    added to every kernel entry.

    update-grub reads /etc/default/grub, then the drop-ins in name order; the line appends to
    ``GRUB_CMDLINE_LINUX`` so it keeps what the site and other drop-ins set.
    """
    return FileText(GRUB_TEMPLATE, {"args": list(args), "why": why})


def kernel_cmdline(current: str, args: Sequence[str]) -> str:
    """/etc/kernel/cmdline (one line, systemd-boot on Proxmox VE) with ``args`` appended where
    missing; everything already there (root=..., boot=zfs) is kept as it is."""
    words = current.split()
    return " ".join(words + [a for a in args if a not in words]) + "\n"


# ---------------------------------------------------------------------------- module files

def modprobe_conf(ids: Sequence[str], host_drivers: Sequence[str]) -> FileText:
    """/etc/modprobe.d/gpuinfra-vfio.conf (template :data:`MODPROBE_TEMPLATE`): vfio-pci claims
    ``ids`` at boot, loaded before the drivers that would otherwise win the probe (nvidia,
    nouveau, the cards' HDMI audio). An ID that is not ``vendor:device`` is refused."""
    for pci_id in ids:
        if not PCI_ID.fullmatch(pci_id):
            raise GpuinfraError(f"not a vendor:device ID: {clip(pci_id)}")
    return FileText(MODPROBE_TEMPLATE, {"ids": list(ids), "host_drivers": list(host_drivers)})


def modules_load_conf() -> FileText:
    """/etc/modules-load.d/gpuinfra-vfio.conf (template :data:`MODULES_LOAD_TEMPLATE`): the
    VFIO modules at every boot."""
    return FileText(MODULES_LOAD_TEMPLATE, {"modules": list(VFIO_MODULES)})


# ---------------------------------------------------------------------------- binding

@dataclass(frozen=True)
class Binding:
    """Which functions of a host go to vfio-pci, and how.

    functions: every function bound, sorted: the listed addresses, the devices matching the
        listed IDs, and every other function of those cards (a GPU's audio function).
    by_id: the functions ``options vfio-pci ids=`` claims at boot.
    by_address: the others, bound one by one (driverctl ``set-override``).
    missing: listed addresses with no such function on the host.
    unmatched_ids: listed IDs no function of the host has.
    """

    functions: tuple[str, ...]
    by_id: tuple[str, ...]
    by_address: tuple[str, ...]
    missing: tuple[str, ...] = ()
    unmatched_ids: tuple[str, ...] = ()


def binding(addresses: Sequence[str], ids: Sequence[str], pci: PciSysfs) -> Binding:
    """The :class:`Binding` of the spec's ``vfio_devices`` on a host with ``pci``."""
    present = pci.by_address()
    missing = tuple(a for a in addresses if a not in present)
    matched = [f for f in pci.functions if f.pci_id in ids]
    slots = {slot_of(a) for a in addresses if a in present} | {f.slot for f in matched}
    functions = tuple(sorted(f.address for f in pci.functions if f.slot in slots))
    by_id = tuple(sorted(f.address for f in matched))
    found_ids = {f.pci_id for f in matched}
    return Binding(functions, by_id, tuple(a for a in functions if a not in by_id), missing,
                   tuple(i for i in ids if i not in found_ids))


@dataclass(frozen=True)
class GroupProblem:
    """A function to pass through whose IOMMU group holds a function the host keeps."""

    device: str
    group: int
    other: PciFunction

    def __str__(self) -> str:
        driver = self.other.driver or "no driver"
        return (f"{self.device} shares an IOMMU group (group {self.group}) with "
                f"{self.other.address} ({self.other.pci_id}, {driver})")


def _planned_ok(chosen: set[str]) -> Callable[[PciFunction], bool]:
    """Deploy time: a group member is fine when it is passed through too, is a bridge, or has
    no driver (the kernel's rule for a viable group)."""
    return lambda f: f.address in chosen or f.is_bridge or f.driver is None


def _live_ok(f: PciFunction) -> bool:
    """On the running host: a group member is fine when bound to vfio-pci (or pci-stub), a
    bridge, or driverless (docs/hardware-reference.md 4) [kvfio]."""
    return f.is_bridge or f.driver is None or f.driver in _GROUP_SAFE_DRIVERS


def _bridge(f: PciFunction) -> bool:
    return f.is_bridge


def group_problems(functions: Iterable[str], pci: PciSysfs, live: bool = False,
                   drivers_shown: bool = True) -> list[GroupProblem]:
    """Every function among ``functions`` whose IOMMU group also holds a function the host
    keeps (planned: not passed through; ``live``: bound to another driver now). A listing
    that does not show drivers (``drivers_shown`` False: an IOMMU group listing pasted from
    ``lspci -nns``) lets only bridges share the group: any other device may be in use."""
    chosen = set(functions)
    ok = _live_ok if live else _planned_ok(chosen)
    if not drivers_shown:
        ok = _bridge
    by_group: dict[int, list[PciFunction]] = {}
    for f in pci.functions:
        if f.iommu_group is not None:
            by_group.setdefault(f.iommu_group, []).append(f)
    problems = []
    for f in pci.functions:
        if f.address not in chosen or f.iommu_group is None:
            continue
        for other in by_group[f.iommu_group]:
            if other.address not in chosen and not ok(other):
                problems.append(GroupProblem(f.address, f.iommu_group, other))
    return problems


def iommu_off(functions: Iterable[str], pci: PciSysfs) -> list[str]:
    """The ``functions`` that have no IOMMU group (the IOMMU is off on the running kernel)."""
    present = pci.by_address()
    return [a for a in functions if a in present and present[a].iommu_group is None]


# ---------------------------------------------------------------------------- what the host uses

# PCI class codes (base class, subclass) of what passthrough is for: display controllers
# (0x03xx: VGA 0300, 3D 0302), and the other functions of a GPU card: HD audio (0403), USB
# (0c03) and the USB Type-C UCSI controller ("Serial bus controller [0c80]" on Turing cards).
DISPLAY_CLASS = "03"
COMPANION_CLASSES = ("0403", "0c03", "0c80")
HOST_USE_FIX = ("remove it from vfio_devices (VFIO would take it from the host: its network, "
                "its disks or its console), or stop the host using it first (ip link set "
                "<if> down, umount, swapoff, vgchange -an) and deploy again")


def host_use_refusals(ids: Sequence[str], bound: Binding, pci: PciSysfs,
                      use: Mapping[str, Sequence[str]]) -> list[str]:
    """Why VFIO must not take what ``bound`` would take: every function it binds (listed, a
    companion of a listed card, or claimed by ``ids=``) that the host runs on (``use``:
    :func:`gpuinfra.parsers.pciuse.parse_host_use`), and for an ID, which of the host's own
    functions ``options vfio-pci ids=`` would claim with the rest."""
    present = pci.by_address()
    problems = []
    claimed_by_id = set()
    for pci_id in ids:
        for function in pci.functions:
            if function.pci_id == pci_id and function.address in use:
                claimed_by_id.add(function.address)
                problems.append(
                    f"vfio_devices lists {pci_id}: 'options vfio-pci ids={pci_id}' takes every "
                    f"function with that ID, including {function.address}, which this host "
                    f"runs on: {'; '.join(use[function.address])}. Fix: pass the devices meant "
                    "for VMs by address (lspci -D), not by ID")
    for address in bound.functions:
        if address in use and address not in claimed_by_id:
            f = present[address]
            problems.append(f"{address} ({f.pci_id}, class 0x{f.class_code}) is a device this "
                            f"host runs on: {'; '.join(use[address])}. Fix: {HOST_USE_FIX}")
    return problems


def kept_gpus_problem(model_key: str, pci_ids: Sequence[str], count: int, bound: Binding,
                      pci: PciSysfs) -> str | None:
    """A GPU node that is also a hypervisor: the GPUs of its model left to the host after
    ``bound`` goes to VMs must be at least ``count`` (gpu_count: what its driver, Slurm and
    Kubernetes count); None when they are."""
    ids = {f"10de:{pid}" for pid in pci_ids}
    gpus = [f.address for f in pci.functions if f.pci_id in ids]
    passed = [a for a in gpus if a in bound.functions]
    left = len(gpus) - len(passed)
    if not passed or left >= count:
        return None
    return (f"vfio_devices passes {len(passed)} of this host's {len(gpus)} {model_key} GPUs to "
            f"VMs ({', '.join(passed)}), leaving {left}; gpu_count = {count} says the host "
            "keeps that many for its driver and Slurm/Kubernetes (they would count GPUs that "
            "are bound to vfio-pci). Fix: lower gpu_count to the GPUs the host keeps, remove "
            "gpu_model/gpu_count when every GPU goes to VMs, or pass fewer GPUs through")


def class_warnings(bound: Binding, pci: PciSysfs) -> list[str]:
    """The functions ``bound`` takes that are neither a display controller (0x03xx) nor the
    audio/USB function of a card that has one: passed through as listed, but worth a look."""
    present = pci.by_address()
    display_slots = {slot_of(a) for a in bound.functions
                     if present[a].class_code.startswith(DISPLAY_CLASS)}
    warnings = []
    for address in bound.functions:
        f = present[address]
        if f.class_code.startswith(DISPLAY_CLASS) or (
                f.class_code[:4] in COMPANION_CLASSES and f.slot in display_slots):
            continue
        warnings.append(f"{address} ({f.pci_id}) has class 0x{f.class_code}: not a display/3D "
                        "controller (0x03xx) nor the audio/USB function of one; passed through "
                        "as vfio_devices says: check it is meant for a VM")
    return warnings


# ---------------------------------------------------------------------------- VM disks

def image_dir_problem(value: object) -> str | None:
    """Why ``value`` cannot be the directory VM disks are confined to (None: it can): the one
    rule of the folders a role fills (gpuinfra.paths), and not under /run (a tmpfs)."""
    problem = path_problem(value)
    if problem is None and isinstance(value, str) and value.startswith("/run/"):
        problem = "under /run, a tmpfs emptied at every boot"
    return None if problem is None else f"{problem}: VM disks would reach the host's own files" \
        if "system" in problem else problem


def disk_problem(disk: object, image_dir: str) -> str | None:
    """Why ``disk`` cannot be a VM's disk image under ``image_dir`` (None: it can): an absolute,
    normalised path of a file inside the directory. Symbolic links are judged on the host
    (:func:`disk_escape`)."""
    if not isinstance(disk, str) or not _SAFE_PATH.fullmatch(disk):
        return "not an absolute path of letters, digits and '._+-'"
    if posixpath.normpath(disk) != disk:
        return "not a normalised path ('.' or '..' in it)"
    if not disk.startswith(image_dir.rstrip("/") + "/"):
        return f"outside the VM image directory {image_dir} (vfio_image_dir)"
    return None


def disk_escape(disk: str, real: str, kind: str, image_dir_real: str) -> str | None:
    """Why the disk at ``disk`` must not go into a VM, judged on the host: ``real`` is its path
    with every symbolic link resolved (``readlink -m``), ``kind`` what is there (``file``,
    ``missing``, ``block``, ``dir``, ``other``), ``image_dir_real`` the image directory resolved."""
    if not real.startswith(image_dir_real.rstrip("/") + "/"):
        return f"{disk} resolves to {real}, outside {image_dir_real} (a symbolic link leads out)"
    if kind not in ("file", "missing"):
        return f"{disk} is a {'block device' if kind == 'block' else kind}, not an image file"
    return None


# ---------------------------------------------------------------------------- VMs

def vm_functions(devices: Sequence[str], pci: PciSysfs) -> tuple[list[str], list[str]]:
    """(every function of the cards ``devices`` name, in order; devices absent from ``pci``):
    a VM gets whole cards, all functions."""
    present = pci.by_address()
    missing = [d for d in devices if d not in present]
    slots = list(dict.fromkeys(slot_of(d) for d in devices if d in present))
    functions = [f.address for s in slots for f in pci.functions if f.slot == s]
    return functions, missing


def _hex(value: str) -> str:
    return f"0x{value}"


# A function as sysfs names it (domain included): what a VM's hostdev entry is made of.
_FUNCTION = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def domain_xml(vm: VmSpec, functions: Sequence[str]) -> FileText:
    """libvirt domain XML for ``vm`` (template :data:`DOMAIN_TEMPLATE`): q35 with UEFI, each
    card behind its own PCIe root port, all its functions as ``hostdev`` entries
    (``multifunction='on'`` on function 0 of a card with several) (docs/hardware-reference.md
    4) [libvirt-hostdev] [libvirt-mf]. A function that is not a full PCI address
    (``0000:3b:00.0``) is refused."""
    for function in functions:
        if not _FUNCTION.fullmatch(function):
            raise GpuinfraError(f"not a PCI function address (domain:bus:slot.function): "
                                f"{clip(function)}")
    disk = None
    if vm.disk:
        disk = {"file": vm.disk, "format": "qcow2" if vm.disk.endswith(".qcow2") else "raw"}
    by_slot: dict[str, list[str]] = {}
    for function in functions:
        by_slot.setdefault(slot_of(function), []).append(function)
    cards = []
    for port, funcs in enumerate(by_slot.values(), start=1):
        entries = []
        for function in funcs:
            domain, bus, rest = function.split(":")
            dev, fn = rest.split(".")
            entries.append({"domain": _hex(domain), "bus": _hex(bus), "slot": _hex(dev),
                            "function": _hex(fn), "multifunction": fn == "0" and len(funcs) > 1})
        cards.append({"index": port, "bus": f"0x{port:02x}", "functions": entries})
    return FileText(DOMAIN_TEMPLATE, {"vm_name": vm.name, "memory_mib": vm.memory_mib,
                                      "vcpus": vm.vcpus, "disk": disk, "cards": cards})


def qm_hostpci(devices: Sequence[str]) -> dict[str, str]:
    """Proxmox VE ``hostpciN`` options for a VM's cards: the card's address without function
    passes all its functions; ``pcie=1`` puts it on the q35 machine's PCIe bus."""
    slots = list(dict.fromkeys(slot_of(d) for d in devices))
    return {f"hostpci{i}": f"{slot},pcie=1" for i, slot in enumerate(slots)}


def hostpci_changes(wanted: Mapping[str, str], current: Mapping[str, str]
                    ) -> tuple[dict[str, str], list[str]]:
    """(``hostpciN`` options to set, ``hostpciN`` options to delete) to go from ``current``
    (``qm config``) to ``wanted``."""
    to_set = {k: v for k, v in wanted.items() if current.get(k) != v}
    to_delete = sorted(k for k in current if k.startswith("hostpci") and k not in wanted)
    return to_set, to_delete
