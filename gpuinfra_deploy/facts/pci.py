"""Facts about PCI devices: their functions from sysfs, what the host itself runs on,
driverctl's saved overrides, which processes hold a device open, and whether the rdma role
cleared ACS.
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
from gpuinfra.parsers.pciuse import HOST_USE_COMMAND, parse_host_use
from gpuinfra.rdma.node import ACS_SCRIPT, ACS_UNIT
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


class PciHostUse(FactBase):
    """The PCI functions the host runs on, and why: ``{address: ["its network interface
    eno1 is up", "its block device sda2 is mounted at /", "it is the boot VGA device ..."]}``
    (:mod:`gpuinfra.parsers.pciuse`: sysfs and /proc, one command). None when it printed
    nothing: every Linux host has at least ``lo``, so the reading failed, and the vfio role
    refuses rather than take devices blind. A failing command fails the host."""

    @staticmethod
    def default() -> None:
        return None

    def command(self) -> str:
        return HOST_USE_COMMAND

    def process(self, output: list[str]) -> dict[str, list[str]]:
        try:
            return parse_host_use("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class AcsOffUnit(FactBase):
    """What the rdma role leaves where it clears ACS: ``{"unit": bool, "script": bool,
    "active": bool}``: its unit file and script installed (ACS cleared at every boot), and
    the unit active on this boot (ACS cleared now, after the kernel computed the IOMMU
    groups; RemainAfterExit keeps a oneshot active until the next boot)."""

    @staticmethod
    def default() -> dict[str, bool]:
        """No output (pyinfra then skips process()): none of the three."""
        return {"unit": False, "script": False, "active": False}

    def command(self) -> str:
        unit = ACS_UNIT.rsplit("/", 1)[1]
        return (f"[ -e {ACS_UNIT} ] && echo unit; [ -e {ACS_SCRIPT} ] && echo script; "
                f"systemctl is-active --quiet {unit} 2>/dev/null && echo active; true")

    def process(self, output: list[str]) -> dict[str, bool]:
        words = {line.strip() for line in output}
        return {key: key in words for key in ("unit", "script", "active")}


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
