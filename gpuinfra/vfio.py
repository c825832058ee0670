"""VFIO passthrough on a KVM host: kernel arguments, early binding, IOMMU groups, VM definitions.

The facts are in docs/hardware-reference.md section 4: the IOMMU kernel arguments per CPU
vendor, ``options vfio-pci ids=`` with ``softdep`` so vfio-pci wins the probe, per-address
binding (driverctl) when only some cards of a model go to VMs, the IOMMU group as the unit of
isolation, libvirt ``hostdev`` entries. Everything here is a pure function of the spec and of
the host's PCI functions (:mod:`gpuinfra.parsers.pcisysfs`): the `vfio` role computes with it,
the verify suite judges with it, and both are unit-tested on real sysfs captures.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from gpuinfra.errors import GpuinfraError, clip
from gpuinfra.parsers.pcisysfs import PciFunction, PciSysfs

if TYPE_CHECKING:  # the spec imports this module's patterns; no import cycle at run time
    from gpuinfra.spec.model import VmSpec

# The one line these files have carried since they were first deployed, kept byte for byte
# (not gpuinfra.header's): the GRUB drop-in and modprobe.d file are judged by their bytes, and a
# changed first line would run update-grub and update-initramfs and mark a reboot on every
# hypervisor and RDMA node of a running cluster, for a comment.
HEADER = "# Managed by gpuinfra (roles/vfio): local edits are overwritten on the next deploy.\n"
XML_HEADER = ("<!-- Managed by gpuinfra (roles/vfio): local edits are overwritten on the next "
              "deploy. -->\n")

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


def node_kernel_args(hypervisor: bool, rdma: bool, cpu_vendor: str) -> tuple[tuple[str, ...],
                                                                           str]:
    """Every IOMMU argument a node needs, and why: one list for the vfio and rdma roles, so
    both write the same GRUB drop-in (one mechanism; whichever runs second changes nothing).
    ``rdma``: the node has real RDMA NICs (not Soft-RoCE, which does no device DMA)."""
    args: tuple[str, ...] = kernel_args(cpu_vendor) if hypervisor else ()
    if rdma:
        args += tuple(a for a in RDMA_ARGS if a not in args)
    why = VFIO_WHY if hypervisor else RDMA_WHY
    return args, why


def grub_dropin(args: Sequence[str], why: str = VFIO_WHY) -> str:
    """/etc/default/grub.d/gpuinfra-vfio.cfg: the arguments added to every kernel entry.

    update-grub reads /etc/default/grub, then the drop-ins in name order; the line appends to
    ``GRUB_CMDLINE_LINUX`` so it keeps what the site and other drop-ins set.
    """
    return (HEADER + f"# {why}; applied by update-grub at the next boot.\n"
            f'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX {" ".join(args)}"\n')


def kernel_cmdline(current: str, args: Sequence[str]) -> str:
    """/etc/kernel/cmdline (one line, systemd-boot on Proxmox VE) with ``args`` appended where
    missing; everything already there (root=..., boot=zfs) is kept as it is."""
    words = current.split()
    return " ".join(words + [a for a in args if a not in words]) + "\n"


# ---------------------------------------------------------------------------- module files

def modprobe_conf(ids: Sequence[str], host_drivers: Sequence[str]) -> str:
    """/etc/modprobe.d/gpuinfra-vfio.conf: vfio-pci claims ``ids`` at boot, loaded before the
    drivers that would otherwise win the probe (nvidia, nouveau, the cards' HDMI audio)."""
    lines = [HEADER.rstrip("\n")]
    if ids:
        lines.append("# Every device with these vendor:device IDs goes to vfio-pci at boot.")
        lines.append(f"options vfio-pci ids={','.join(ids)}")
    lines.append("# vfio-pci loads first, so it claims its devices before these drivers do.")
    lines += [f"softdep {driver} pre: vfio-pci" for driver in host_drivers]
    return "\n".join(lines) + "\n"


def modules_load_conf() -> str:
    """/etc/modules-load.d/gpuinfra-vfio.conf: the VFIO modules at every boot."""
    return HEADER + "\n".join(VFIO_MODULES) + "\n"


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


def group_problems(functions: Iterable[str], pci: PciSysfs,
                   live: bool = False) -> list[GroupProblem]:
    """Every function among ``functions`` whose IOMMU group also holds a function the host
    keeps (planned: not passed through; ``live``: bound to another driver now)."""
    chosen = set(functions)
    ok = _live_ok if live else _planned_ok(chosen)
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


def domain_xml(vm: VmSpec, functions: Sequence[str]) -> str:
    """libvirt domain XML for ``vm``: q35 with UEFI, each card behind its own PCIe root port,
    all its functions as ``hostdev`` entries (``multifunction='on'`` on function 0 of a card
    with several) (docs/hardware-reference.md 4) [libvirt-hostdev] [libvirt-mf]."""
    dom = ET.Element("domain", type="kvm")
    ET.SubElement(dom, "name").text = vm.name
    ET.SubElement(dom, "memory", unit="MiB").text = str(vm.memory_mib)
    ET.SubElement(dom, "vcpu").text = str(vm.vcpus)
    os_ = ET.SubElement(dom, "os", firmware="efi")
    ET.SubElement(os_, "type", arch="x86_64", machine="q35").text = "hvm"
    features = ET.SubElement(dom, "features")
    ET.SubElement(features, "acpi")
    ET.SubElement(features, "apic")
    ET.SubElement(dom, "cpu", mode="host-passthrough")
    devices = ET.SubElement(dom, "devices")
    ET.SubElement(devices, "controller", type="pci", index="0", model="pcie-root")
    if vm.disk:
        disk = ET.SubElement(devices, "disk", type="file", device="disk")
        ET.SubElement(disk, "driver", name="qemu",
                      type="qcow2" if vm.disk.endswith(".qcow2") else "raw")
        ET.SubElement(disk, "source", file=vm.disk)
        ET.SubElement(disk, "target", dev="vda", bus="virtio")
    cards: dict[str, list[str]] = {}
    for function in functions:
        cards.setdefault(slot_of(function), []).append(function)
    for port, funcs in enumerate(cards.values(), start=1):
        ET.SubElement(devices, "controller", type="pci", index=str(port), model="pcie-root-port")
        for function in funcs:
            domain, bus, rest = function.split(":")
            dev, fn = rest.split(".")
            hostdev = ET.SubElement(devices, "hostdev", mode="subsystem", type="pci",
                                    managed="yes")
            ET.SubElement(hostdev, "driver", name="vfio")
            source = ET.SubElement(hostdev, "source")
            ET.SubElement(source, "address", domain=_hex(domain), bus=_hex(bus), slot=_hex(dev),
                          function=_hex(fn))
            guest = {"type": "pci", "domain": "0x0000", "bus": f"0x{port:02x}", "slot": "0x00",
                     "function": _hex(fn)}
            if fn == "0" and len(funcs) > 1:
                guest["multifunction"] = "on"
            ET.SubElement(hostdev, "address", guest)
    ET.indent(dom)
    return XML_HEADER + ET.tostring(dom, encoding="unicode") + "\n"


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
