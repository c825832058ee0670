"""Distributions the roles support, keyed as ``<ID>-<VERSION_ID>`` from /etc/os-release."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.drivers import SUPPORTED_OS


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


def hosts_block(entries: list[tuple[str, str]]) -> str:
    """Lines for /etc/hosts: ``address name`` per node, sorted by name, one per node."""
    return "\n".join(f"{address} {name}" for name, address in sorted(entries))


def node_address(data: Mapping[str, Any]) -> str | None:
    """A node's address for /etc/hosts: ``node_address``, or ``ssh_hostname`` when it is an IP.

    ``data`` is a host's data (anything with ``.get``); None when neither names an IP. A
    loopback ``ssh_hostname`` is a port forward on the machine running the deploy (a lab
    guest), never the node's address on the cluster network.
    """
    for key in ("node_address", "ssh_hostname"):
        value = data.get(key)
        if value:
            try:
                address = ipaddress.ip_address(value)
            except ValueError:
                continue
            if key == "ssh_hostname" and address.is_loopback:
                continue
            return str(address)
    return None
