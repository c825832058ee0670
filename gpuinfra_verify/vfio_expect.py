"""Pure judgements of the VFIO checks (gpuinfra_verify/test_vfio.py), unit-tested in tests/unit.

Each returns the failures it finds, as lines naming what was seen; the test adds the cause
and fix. The host's PCI functions come from the same sysfs listing the role reads
(gpuinfra.parsers.pcisysfs), the functions to pass through from the same binding rule
(gpuinfra.vfio.binding), so the deploy and the verdict never disagree on what was meant.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuinfra.parsers.pcisysfs import PciSysfs
from gpuinfra.vfio import (
    KERNEL_ARGS,
    VFIO_DRIVER,
    Binding,
    group_problems,
    missing_kernel_args,
)

# Drivers that would own a GPU given to a VM: the host's GPU drivers.
GPU_HOST_DRIVERS = ("nvidia", "nouveau")


def kernel_arg_findings(cmdline: str, cpu_vendor: str) -> list[str]:
    """The IOMMU arguments for ``cpu_vendor`` that /proc/cmdline lacks."""
    args = KERNEL_ARGS.get(cpu_vendor)
    if args is None:
        return [f"CPU vendor {cpu_vendor!r}: no IOMMU kernel arguments known"]
    return [f"kernel argument {arg} missing from /proc/cmdline"
            for arg in missing_kernel_args(cmdline, args)]


def iommu_findings(iommu_units: Iterable[str], groups: int) -> list[str]:
    """The IOMMU is on: a unit under /sys/class/iommu and IOMMU groups."""
    found = []
    if not list(iommu_units):
        found.append("no IOMMU under /sys/class/iommu: the IOMMU is off")
    if groups == 0:
        found.append("no IOMMU groups under /sys/kernel/iommu_groups")
    return found


def binding_findings(binding: Binding, pci: PciSysfs, vfio_nodes: Iterable[str]) -> list[str]:
    """Each function to pass through is on the host, bound to vfio-pci, with its
    /dev/vfio/<group>."""
    present = pci.by_address()
    nodes = set(vfio_nodes)
    found = [f"{a} (vfio_devices) is not a PCI function of this host" for a in binding.missing]
    for address in binding.functions:
        function = present[address]
        if function.driver != VFIO_DRIVER:
            found.append(f"{address} ({function.pci_id}) is bound to "
                         f"{function.driver or 'no driver'}, not {VFIO_DRIVER}")
        elif function.iommu_group is None or str(function.iommu_group) not in nodes:
            found.append(f"{address}: /dev/vfio/{function.iommu_group} does not exist")
    return found


def group_findings(binding: Binding, pci: PciSysfs) -> list[str]:
    """Every other function in a passed-through function's IOMMU group is bound to vfio-pci
    or is a bridge (or has no driver): else the group cannot go to a VM."""
    return [str(p) for p in group_problems(binding.functions, pci, live=True)]


def host_driver_findings(binding: Binding, pci: PciSysfs) -> list[str]:
    """No function meant for a VM is held by a host GPU driver."""
    present = pci.by_address()
    return [f"{a} ({present[a].pci_id}) is bound to {present[a].driver}, a host GPU driver"
            for a in binding.functions if present[a].driver in GPU_HOST_DRIVERS]
