"""Facts the rdma role reads: where each RDMA device and PCI function sits, the ACS Control
of bridges, and a NIC's ATS setting in firmware. Each returns plain data (gpuinfra.parsers
parses the output: pcitree, mlxconfig)."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from gpuinfra.errors import ParseError
from gpuinfra.parsers.mlxconfig import parse_mlxconfig
from gpuinfra.parsers.pcitree import (
    NIC_ADDRESSES_COMMAND,
    PCI_PATHS_COMMAND,
    acs_control_command,
    parse_acs_control,
    parse_nic_addresses,
    parse_pci_paths,
)
from gpuinfra.rdma.node import ATS
from gpuinfra_deploy.facts._base import quiet


class RdmaDevices(FactBase):
    """``{device: PCI address or None}`` for /sys/class/infiniband/* (Soft-RoCE: None)."""

    default = dict

    def command(self) -> str:
        return quiet(NIC_ADDRESSES_COMMAND)

    def process(self, output: list[str]) -> dict[str, str | None]:
        return parse_nic_addresses("\n".join(output))


class PciPaths(FactBase):
    """``{address: [ancestor bridges, root port first]}`` for every PCI function."""

    default = dict

    def command(self) -> str:
        return quiet(PCI_PATHS_COMMAND)

    def process(self, output: list[str]) -> dict[str, list[str]]:
        try:
            return {a: list(p) for a, p in parse_pci_paths("\n".join(output)).items()}
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class AcsControl(FactBase):
    """``{bridge: ACS Control register, None without ACS}`` for the bridges asked about."""

    default = dict

    def requires_command(self, bridges: list[str]) -> str:
        return "setpci"

    def command(self, bridges: list[str]) -> str:
        return quiet(acs_control_command(bridges)) if bridges else "true"

    def process(self, output: list[str]) -> dict[str, int | None]:
        return parse_acs_control("\n".join(output))


class FirmwareAts(FactBase):
    """``mstconfig -d <pci> -e query ATS_ENABLED`` parsed (gpuinfra.parsers.mlxconfig JSON:
    ``{"params": {"ATS_ENABLED": {"next_boot", "current", ...}}}``); None when mstconfig
    cannot read the device."""

    def requires_command(self, pci: str) -> str:
        return "mstconfig"

    def command(self, pci: str) -> str:
        return quiet(f"mstconfig -d {shlex.quote(pci)} -e query {ATS}")

    def process(self, output: list[str]) -> dict[str, Any] | None:
        if not any(line.strip() for line in output):
            return None
        try:
            return parse_mlxconfig("\n".join(output)).to_json()
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc
