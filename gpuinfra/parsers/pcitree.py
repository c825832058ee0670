"""Where devices sit in the PCI tree, from sysfs and setpci (what the rdma role reads).

Each command is gpuinfra's own one-liner; its output has one line per device:

- :data:`PCI_PATHS_COMMAND`: ``ADDRESS /sys/devices/pci0000:00/<root port>/.../ADDRESS``, the
  path sysfs resolves ``/sys/bus/pci/devices/ADDRESS`` to (the bridges above the function).
- :data:`NIC_ADDRESSES_COMMAND`: ``DEVICE ADDRESS`` for each RDMA device of
  ``/sys/class/infiniband`` (``-``: none, as for Soft-RoCE).
- :func:`acs_control_command`: ``BRIDGE VALUE``, the bridge's ACS Control register as
  ``setpci`` prints it (4 hex digits), ``-`` without ACS.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")  # a PCI address, as sysfs writes it

# Each function's place in the tree: sysfs resolves /sys/bus/pci/devices/<addr> to
# /sys/devices/pci0000:00/<root port>/<switch port>/.../<addr>.
PCI_PATHS_COMMAND = ("for d in /sys/bus/pci/devices/*; do echo \"${d##*/} $(readlink -f "
                     "\"$d\")\"; done")
# Each RDMA device's PCI function (Soft-RoCE devices have none: "-").
NIC_ADDRESSES_COMMAND = ("for d in /sys/class/infiniband/*; do [ -e \"$d\" ] || continue; "
                         "a=-; [ -e \"$d/device\" ] && { l=$(readlink -f \"$d/device\"); "
                         "a=${l##*/}; }; echo \"${d##*/} $a\"; done")


def parse_pci_paths(text: str) -> dict[str, tuple[str, ...]]:
    """``{address: (ancestor bridges from the root port down, ...)}`` from
    :data:`PCI_PATHS_COMMAND` output."""
    paths: dict[str, tuple[str, ...]] = {}
    for no, line in enumerate(clean_lines(text), 1):
        if not line.strip():
            continue
        address, _, path = line.strip().partition(" ")
        if not BDF.fullmatch(address) or not path.startswith("/sys/devices/"):
            raise ParseError("sysfs PCI paths", f"expected 'ADDRESS /sys/devices/...', got "
                             f"{line[:60]!r}", line=no)
        chain = tuple(p for p in path.split("/") if BDF.fullmatch(p))
        if not chain or chain[-1] != address:
            raise ParseError("sysfs PCI paths", f"{address} is not at the end of its path",
                             line=no)
        paths[address] = chain[:-1]
    return paths


def parse_nic_addresses(text: str) -> dict[str, str | None]:
    """``{device: PCI address or None}`` from :data:`NIC_ADDRESSES_COMMAND` output."""
    found: dict[str, str | None] = {}
    for line in clean_lines(text):
        parts = line.split()
        if len(parts) == 2:
            found[parts[0]] = parts[1] if BDF.fullmatch(parts[1]) else None
    return found


def acs_control_command(bridges: Sequence[str]) -> str:
    """Shell printing ``ADDRESS VALUE`` per bridge: its ACS Control register (4 hex digits),
    or ``-`` when the bridge has no ACS capability."""
    quoted = " ".join(shlex.quote(b) for b in bridges)
    return (f"for b in {quoted}; do v=$(setpci -s \"$b\" ECAP_ACS+0x6.w 2>/dev/null) || v=-; "
            "echo \"$b ${v:--}\"; done")


def parse_acs_control(text: str) -> dict[str, int | None]:
    """``{bridge: ACS Control value, None without ACS}`` from :func:`acs_control_command`."""
    found: dict[str, int | None] = {}
    for line in clean_lines(text):
        parts = line.split()
        if len(parts) == 2 and BDF.fullmatch(parts[0]):
            found[parts[0]] = int(parts[1], 16) if re.fullmatch(r"[0-9a-fA-F]{1,4}",
                                                                parts[1]) else None
    return found
