"""VFIO passthrough on the hypervisors (the `vfio` role), against the spec.

/proc/cmdline carries the IOMMU arguments for the CPU vendor; the IOMMU is on; every device to
pass through (vfio_devices: addresses, IDs, and the other functions of their cards) is bound to
vfio-pci with its /dev/vfio/<group>; every other device of its IOMMU group is bound to vfio-pci
or is a bridge; no such device is held by a host GPU driver; each VM's definition is valid (its
libvirt XML passes virt-xml-validate; on Proxmox VE, its hostpci entries are the spec's). In
the lab these run on a QEMU guest with Debian's own kernel and an emulated IOMMU: the binding,
the groups and the kernel are real, the "GPUs" are stand-in devices (gpuinfra_lab/README.md).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

import pytest
from testinfra.host import Host

from gpuinfra.captures.vfio import (
    BINDING_CAUSE,
    BINDING_FIX,
    GROUP_CAUSE,
    HOST_DRIVER_CAUSE,
    HOST_DRIVER_FIX,
    VM_CAUSE,
    VM_FIX,
)
from gpuinfra.parsers.pcisysfs import PCI_SYSFS_COMMAND, PciSysfs, parse_pci_sysfs
from gpuinfra.parsers.proxmox import parse_qm_config
from gpuinfra.spec import NodeSpec
from gpuinfra.vfio import GROUP_FIX, LIBVIRT_DIR, Binding, binding, qm_hostpci, vm_functions
from gpuinfra_verify.expect import problem
from gpuinfra_verify.failure import fail
from gpuinfra_verify.vfio_expect import (
    binding_findings,
    group_findings,
    host_driver_findings,
    iommu_findings,
    kernel_arg_findings,
)

VERIFY_NODES = "hypervisors"
Note = Callable[[str, object], None]
CPU_VENDOR = "sed -n 's/^vendor_id[[:space:]]*: *//p' /proc/cpuinfo | head -n 1"


@pytest.fixture(scope="module")
def pci(host: Host) -> PciSysfs:
    return parse_pci_sysfs(host.check_output(PCI_SYSFS_COMMAND))


@pytest.fixture(scope="module")
def bound(node: NodeSpec, pci: PciSysfs) -> Binding:
    """What the spec passes through on this host (the role's own rule)."""
    return binding(node.vfio.addresses, node.vfio.ids, pci)


def test_kernel_arguments(host: Host, node: NodeSpec, note: Note) -> None:
    cmdline = host.file("/proc/cmdline").content_string
    findings = kernel_arg_findings(cmdline, host.check_output(CPU_VENDOR))
    note("cmdline", cmdline.strip())
    if findings:
        fail(note, problem(node.name, "; ".join(findings),
                           "the boot loader change of the vfio role is not in effect: the host "
                           "was not rebooted since the deploy, or update-grub / proxmox-boot-tool"
                           " refresh did not run",
                           "deploy the vfio role, then reboot the host (reboot_policy = "
                           "'if-needed' reboots it)"))


def test_iommu_on(host: Host, node: NodeSpec, note: Note) -> None:
    units = host.check_output("ls /sys/class/iommu").split()
    groups = len(host.check_output("ls /sys/kernel/iommu_groups").split())
    findings = iommu_findings(units, groups)
    if findings:
        fail(note, problem(node.name, "; ".join(findings),
                           "the IOMMU is disabled: VT-d / AMD-Vi off in the firmware, or the "
                           "kernel arguments missing (see test_kernel_arguments)",
                           "enable VT-d / AMD-Vi (IOMMU) in the BIOS, deploy, reboot; "
                           "`dmesg | grep -i -e DMAR -e IOMMU` says what the kernel found"))


def test_devices_bound_to_vfio(host: Host, node: NodeSpec, pci: PciSysfs, bound: Binding,
                               note: Note) -> None:
    nodes = host.check_output("ls /dev/vfio").split()
    findings = binding_findings(bound, pci, nodes)
    note("vfio_functions", ", ".join(bound.functions))
    if findings:
        fail(note, problem(node.name, "; ".join(findings),
                           BINDING_CAUSE, BINDING_FIX))


def test_iommu_groups_whole(node: NodeSpec, pci: PciSysfs, bound: Binding, note: Note) -> None:
    findings = group_findings(bound, pci)
    if findings:
        fail(note, problem(node.name, "; ".join(findings),
                           GROUP_CAUSE, GROUP_FIX))


def test_no_passthrough_gpu_on_a_host_driver(node: NodeSpec, pci: PciSysfs, bound: Binding,
                                             note: Note) -> None:
    findings = host_driver_findings(bound, pci)
    if findings:
        fail(note, problem(node.name, "; ".join(findings),
                           HOST_DRIVER_CAUSE, HOST_DRIVER_FIX))


def test_vm_definitions(host: Host, node: NodeSpec, pci: PciSysfs, note: Note) -> None:
    if not node.vfio.vms:
        pytest.skip("no VMs in the spec")
    findings = []
    proxmox = host.exists("qm")
    for vm in node.vfio.vms:
        functions, _ = vm_functions(vm.devices, pci)
        if proxmox:
            config = host.run(f"qm config {int(vm.vmid or 0)}")
            current = parse_qm_config(config.stdout) if config.rc == 0 else {}
            wanted = qm_hostpci(functions)
            got = {k: v for k, v in current.items() if k.startswith("hostpci")}
            if got != wanted:
                findings.append(f"VM {vm.vmid} ({vm.name}): hostpci {got}, expected {wanted}")
            continue
        path = f"{LIBVIRT_DIR}/{vm.name}.xml"
        result = host.run(f"virt-xml-validate {shlex.quote(path)} domain")
        if result.rc != 0:
            findings.append(f"{path}: {(result.stderr or result.stdout).strip()[:300]}")
    if findings:
        fail(note, problem(node.name, "; ".join(findings),
                           VM_CAUSE, VM_FIX))
