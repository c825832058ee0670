"""Facts about the running kernel and how it boots: loaded modules, the CPU vendor (IOMMU
kernel arguments), the boot loader.
"""

from __future__ import annotations

from typing import Any

from pyinfra.api import FactBase

from gpuinfra.parsers.system import (
    parse_proc_modules,
)
from gpuinfra_deploy.facts._base import parsed, quiet


class LoadedModules(FactBase):
    """/proc/modules: ``{"modules": {"nvidia": {"size", "instances", "used_by", "state"}}}``.

    ``{}`` where /proc/modules is absent (a kernel without module support). Not pyinfra's
    ``server.KernelModules``: that one runs a second command first (the ``Kernel`` fact) and
    raises a bare ValueError on a line it cannot split, where this one fails the host with the
    parser's message naming the line."""

    default = dict

    def command(self) -> str:
        return quiet("cat /proc/modules")

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsed(parse_proc_modules, output)


class CpuVendor(FactBase):
    """``vendor_id`` of /proc/cpuinfo (``GenuineIntel``, ``AuthenticAMD``); "" if unknown."""

    default = str

    def command(self) -> str:
        return quiet("sed -n 's/^vendor_id[[:space:]]*: *//p' /proc/cpuinfo | head -n 1")

    def process(self, output: list[str]) -> str:
        return output[0].strip() if output else ""


class CgroupHierarchy(FactBase):
    """The cgroup hierarchy this boot mounted: ``"v2"`` (unified only: /sys/fs/cgroup holds
    cgroup.controllers) or ``"v1"`` (the legacy controllers, with or without the hybrid
    unified tree at /sys/fs/cgroup/unified). cgroups(7), "cgroups version 2"."""

    default = str

    def command(self) -> str:
        return "test -f /sys/fs/cgroup/cgroup.controllers && echo v2 || echo v1"

    def process(self, output: list[str]) -> str:
        return output[0].strip() if output else ""


class BootLoader(FactBase):
    """How kernel arguments reach the kernel: ``"systemd-boot"`` (Proxmox VE booting from
    ESPs that proxmox-boot-tool keeps, kernel command line in /etc/kernel/cmdline), ``"grub"``
    (update-grub), or ``""`` (neither found)."""

    default = str

    def command(self) -> str:
        return ("if [ -e /etc/kernel/proxmox-boot-uuids ] && command -v proxmox-boot-tool "
                ">/dev/null && proxmox-boot-tool status 2>/dev/null | grep -q "
                "'configured with: uefi'; then echo systemd-boot; "
                "elif command -v update-grub >/dev/null; then echo grub; fi; true")

    def process(self, output: list[str]) -> str:
        return output[0].strip() if output else ""
