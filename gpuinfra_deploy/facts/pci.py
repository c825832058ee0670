"""Facts about PCI devices: their functions from sysfs, driverctl's saved overrides, and
which processes hold a device open.
"""

from __future__ import annotations

from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from gpuinfra.errors import ParseError
from gpuinfra.parsers.pcisysfs import (
    DRIVERCTL_SAVED_COMMAND,
    PCI_SYSFS_COMMAND,
    device_users_command,
    parse_device_users,
    parse_driverctl_saved,
    parse_pci_sysfs,
)
from gpuinfra_deploy.facts._base import parsed, quiet


class PciFunctions(FactBase):
    """Every PCI function from sysfs with its driver, IOMMU group and driver override:
    ``{"functions": [{"address", "vendor_id", "device_id", "class_code", "driver",
    "iommu_group", "driver_override"}]}`` (:mod:`gpuinfra.parsers.pcisysfs`)."""

    default = dict

    def command(self) -> str:
        return quiet(PCI_SYSFS_COMMAND)

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsed(parse_pci_sysfs, output)


class DriverctlOverrides(FactBase):
    """The driver overrides driverctl saved for boot: ``{address: driver}``."""

    default = dict

    def command(self) -> str:
        return quiet(DRIVERCTL_SAVED_COMMAND)

    def process(self, output: list[str]) -> dict[str, str]:
        try:
            return parse_driverctl_saved("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class DeviceUsers(FactBase):
    """Processes using PCI functions (VFIO group, /dev/nvidiaN or mapped BARs open):
    ``{address: ["PID (COMM)"]}``; read before a function is rebound."""

    default = dict

    def command(self, addresses: list[str]) -> str:
        return quiet(device_users_command(list(addresses)))

    def process(self, output: list[str]) -> dict[str, list[str]]:
        try:
            return parse_device_users("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc
