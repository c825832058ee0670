"""The vfio role's own operations: per-address binding with driverctl, and Proxmox VE VMs.

Each reads facts when it runs, computes the difference and yields commands only for what is
missing; a converged host gets no command. A device is never rebound under a process using it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyinfra import host
from pyinfra.api import OperationError, QuoteString, StringCommand, operation

from gpuinfra.parsers.pcisysfs import PciSysfs
from gpuinfra.vfio import VFIO_DRIVER, hostpci_changes
from gpuinfra_deploy.facts.pci import DeviceUsers, DriverctlOverrides, PciFunctions
from gpuinfra_deploy.facts.virt import QmConfig


def _refuse_if_used(addresses: Sequence[str], why: str) -> None:
    """Stop the host, naming the processes, when any of ``addresses`` is in use."""
    if not addresses:
        return
    users = host.get_fact(DeviceUsers, addresses=list(addresses))
    if users:
        named = "; ".join(f"{a} by {', '.join(p)}" for a, p in sorted(users.items()))
        raise OperationError(f"vfio: {host.name}: not rebinding ({why}): in use: {named}. "
                             "Stop those processes (or their VMs) and deploy again")


@operation()
def vfio_overrides(functions: Sequence[str]):
    """``functions`` bound to vfio-pci one by one (driverctl), saved for every boot; the
    vfio-pci overrides of functions no longer passed through are removed.

    + functions: PCI addresses (``0000:3b:00.0``) to bind by address

    With the IOMMU off (no group yet: before the reboot that applies the kernel arguments)
    the override is only saved (``--noprobe``): vfio-pci takes the function at the next boot.
    """
    pci = PciSysfs.from_json(host.get_fact(PciFunctions)).by_address()
    saved = host.get_fact(DriverctlOverrides)
    to_bind = [a for a in functions
               if saved.get(a) != VFIO_DRIVER or pci[a].driver != VFIO_DRIVER]
    stale = sorted(a for a, driver in saved.items()
                   if driver == VFIO_DRIVER and a not in functions and a in pci)
    if not to_bind and not stale:
        host.noop(f"already bound to vfio-pci: {', '.join(functions) or 'nothing by address'}")
        return
    _refuse_if_used([a for a in to_bind + stale if pci[a].driver is not None],
                    "a device with a process on it")
    for address in to_bind:
        noprobe = ["--noprobe"] if pci[address].iommu_group is None else []
        yield StringCommand("driverctl", *noprobe, "set-override", QuoteString(address),
                            VFIO_DRIVER)
    for address in stale:
        yield StringCommand("driverctl", "unset-override", QuoteString(address))


@operation()
def qm_vm(vmid: int, vm_name: str, hostpci: Mapping[str, str], memory_mib: int, cores: int):
    """A Proxmox VE VM with exactly ``hostpci`` (``{"hostpci0": "0000:3b:00,pcie=1"}``);
    created (q35, OVMF) when it does not exist.

    + vmid: its id; vm_name: its name; memory_mib, cores: its size when created
    """
    config = host.get_fact(QmConfig, vmid=vmid)
    options = [StringCommand(f"--{key}", QuoteString(value)) for key, value in hostpci.items()]
    if config is None:
        yield StringCommand("qm", "create", str(int(vmid)), "--name", QuoteString(vm_name),
                            "--machine", "q35", "--bios", "ovmf", "--memory",
                            str(int(memory_mib)), "--cores", str(int(cores)), *options)
        return
    to_set, to_delete = hostpci_changes(hostpci, config)
    if not to_set and not to_delete:
        host.noop(f"VM {vmid} already has {', '.join(hostpci.values())}")
        return
    args = [StringCommand(f"--{key}", QuoteString(value)) for key, value in to_set.items()]
    if to_delete:
        args += ["--delete", ",".join(to_delete)]
    yield StringCommand("qm", "set", str(int(vmid)), *args)
