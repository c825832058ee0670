"""Facts about the virtualisation host: Proxmox VE, libvirt domains, qm configs.
"""

from __future__ import annotations

import re

from pyinfra.api import FactBase

from gpuinfra.parsers.proxmox import parse_qm_config
from gpuinfra_deploy.facts._base import quiet


class ProxmoxVersion(FactBase):
    """The Proxmox VE major version (``pveversion``: ``pve-manager/8.2.4/...``), None on a
    host without Proxmox VE."""

    def requires_command(self) -> str:
        return "pveversion"

    def command(self) -> str:
        return quiet("pveversion")

    def process(self, output: list[str]) -> int | None:
        text = " ".join(output)
        match = re.search(r"pve-manager/(\d+)\.", text)
        return int(match[1]) if match else None


class LibvirtDomains(FactBase):
    """The domains libvirt knows (``virsh list --all --name``); None where libvirt does not
    run (no virsh, or no daemon answering on qemu:///system)."""

    def requires_command(self) -> str:
        return "virsh"

    def command(self) -> str:
        return ("out=$(virsh -c qemu:///system list --all --name 2>/dev/null) && "
                "{ echo libvirt-running; printf '%s\\n' \"$out\"; }; true")

    def process(self, output: list[str]) -> list[str] | None:
        if not output or output[0].strip() != "libvirt-running":
            return None
        return sorted(line.strip() for line in output[1:] if line.strip())


class QmConfig(FactBase):
    """``qm config VMID`` on Proxmox VE as ``{key: value}``; None when the VM does not exist."""

    def requires_command(self, vmid: int) -> str:
        return "qm"

    def command(self, vmid: int) -> str:
        return (f"out=$(qm config {int(vmid)} 2>/dev/null) && {{ echo qm-config; "
                "printf '%s\\n' \"$out\"; }; true")

    def process(self, output: list[str]) -> dict[str, str] | None:
        if not output or output[0].strip() != "qm-config":
            return None
        return parse_qm_config("\n".join(output[1:]))
