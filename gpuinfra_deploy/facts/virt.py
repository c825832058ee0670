"""Facts about the virtualisation host: Proxmox VE, libvirt domains, qm configs.
"""

from __future__ import annotations

import re
import shlex

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


class ResolvedPaths(FactBase):
    """Each of ``paths`` with every symbolic link resolved (``readlink -m``: missing parts
    allowed) and what is there: ``{path: {"real": "/srv/images/a.qcow2", "kind": "file"}}``,
    kind one of ``file``, ``dir``, ``block``, ``other``, ``missing``."""

    default = dict

    def command(self, paths: list[str]) -> str:
        quoted = " ".join(shlex.quote(p) for p in paths)
        return (f"for p in {quoted}; do r=$(readlink -m -- \"$p\") || continue; k=missing; "
                "if [ -b \"$r\" ]; then k=block; elif [ -d \"$r\" ]; then k=dir; "
                "elif [ -f \"$r\" ]; then k=file; elif [ -e \"$r\" ]; then k=other; fi; "
                "printf '%s\\t%s\\t%s\\n' \"$p\" \"$r\" \"$k\"; done; true")

    def process(self, output: list[str]) -> dict[str, dict[str, str]]:
        resolved = {}
        for line in output:
            parts = line.split("\t")
            if len(parts) == 3:
                resolved[parts[0]] = {"real": parts[1], "kind": parts[2]}
        return resolved
