"""The rdma role's own operation: ATS in a NIC's firmware, set only where it differs.

It reads the firmware when it runs (after mstflint is installed), computes the difference and
yields the one command that sets it; a NIC already as wanted gets no command, and one set by an
earlier deploy but not yet rebooted is reported, not set again.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import OperationError, StringCommand, operation

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.mlxconfig import MlxConfig
from gpuinfra.rdma.node import ats_plan, ats_set_command
from gpuinfra_roles.rdma.facts import FirmwareAts


@operation()
def firmware_ats(nic: str, pci: str, wanted: bool):
    """``ATS_ENABLED`` of ``nic``'s firmware is ``wanted`` from the next boot on.

    + nic: the verbs device, for the messages (``mlx5_0``)
    + pci: its PCI address (``0000:17:00.0``), as mstconfig takes it
    + wanted: the spec's ``ats``

    The firmware applies the value at the next reboot (or ``mstfwreset``): never reset a NIC
    here, under running jobs; the reboot marker says why a reboot is needed.
    """
    query = host.get_fact(FirmwareAts, pci=pci)
    if query is None:
        raise OperationError(f"rdma: {host.name}: mstconfig cannot read {nic} ({pci}): is it a "
                             "ConnectX at that address (lspci -D -s " + pci + ")?")
    try:
        plan = ats_plan(nic, wanted, MlxConfig.from_json(query))
    except GpuinfraError as exc:
        raise OperationError(f"rdma: {host.name}: {exc}") from None
    if plan.action != "set":
        host.noop(plan.why)
        return
    yield StringCommand(*ats_set_command(pci, wanted))
