"""Distributions the roles support, keyed as ``<ID>-<VERSION_ID>`` from /etc/os-release."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.drivers import SUPPORTED_OS
from gpuinfra.text import FileText

# Distributions whose Slurm needs what the distribution does not boot with, and what the slurm
# role does about it (its DISTRO table holds the packages; this is what `gpuinfra validate`
# says, since the spec names no OS: the deploy learns it from each host).
CGROUP_V1 = {
    "ubuntu-22.04": "Slurm 21.08.5 has only the cgroup/v1 plugin and Ubuntu 22.04 boots "
                    "cgroup v2: the slurm role adds systemd.unified_cgroup_hierarchy=0 to the "
                    "kernel command line of its Slurm nodes (the one GRUB drop-in, with the "
                    "IOMMU arguments) and records a reboot; slurmd starts after it",
}


def os_notes(schedulers: set[str]) -> list[str]:
    """What each supported distribution needs for the schedulers a spec deploys, said before
    any host is reached (the spec has no OS key)."""
    if "slurm" not in schedulers:
        return []
    return [f"Slurm on {key}: {why}" for key, why in CGROUP_V1.items()]


# The shell line that prints a host's key as :func:`distro_key` makes it (``debian-13``), for
# the commands that ask a node over SSH before anything is deployed (smoke run, roll).
RELEASE_COMMAND = '. /etc/os-release && echo "$ID-$VERSION_ID"'


class UnsupportedOS(GpuinfraError):
    """The host runs a distribution the roles have no table for."""


def distro_key(distribution: Mapping[str, Any]) -> str:
    """``debian-12``, ``ubuntu-22.04``... from pyinfra's LinuxDistribution fact.

    Raises :class:`UnsupportedOS` naming the supported releases for anything else.
    """
    meta = distribution.get("release_meta") or {}
    key = f"{meta.get('ID', '')}-{meta.get('VERSION_ID', '')}".lower()
    if key not in SUPPORTED_OS:
        name = distribution.get("name") or meta.get("PRETTY_NAME") or "unknown"
        raise UnsupportedOS(f"{name} ({key}) is not supported; the roles support "
                            f"{', '.join(SUPPORTED_OS)}")
    return key


def hosts_block(entries: list[tuple[str, str]]) -> FileText:
    """The lines of the /etc/hosts block: ``address name`` per node of ``entries`` (``(name,
    address)`` pairs), sorted by name, one per node; template common/etc/hosts.j2."""
    return FileText("common/etc/hosts.j2", {"nodes": sorted(entries)})


def node_address(data: Mapping[str, Any]) -> str | None:
    """A node's address for /etc/hosts: ``node_address``, or ``ssh_hostname`` when it is an IP.

    ``data`` is a host's data (anything with ``.get``); None when neither names an IP. A
    loopback ``ssh_hostname`` is a port forward on the machine running the deploy (a lab
    guest), never the node's address on the cluster network.
    """
    for key in ("node_address", "ssh_hostname"):
        value = data.get(key)
        if value and isinstance(value, str):  # ip_address(167772162) would read an integer
            try:
                address = ipaddress.ip_address(value)
            except ValueError:
                continue
            if key == "ssh_hostname" and address.is_loopback:
                continue
            return str(address)
    return None
