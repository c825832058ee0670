"""PCI functions as sysfs shows them: IDs, class, bound driver, IOMMU group, driver override.

What VFIO needs and ``lspci`` does not print in one place: the IOMMU group of every function
and its ``driver_override`` (set by ``driverctl``). :data:`PCI_SYSFS_COMMAND` prints one line
per function, in address order::

    0000:04:03.0 0x8086 0x293e 0x040300 snd_hda_intel 10 (null)

address, vendor, device, class (as sysfs writes them), the driver in use (``-``: none), the
IOMMU group (``-``: the IOMMU is off) and ``driver_override`` (``(null)``: none; ``-``: the
kernel has no such file).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "sysfs PCI listing"

# One shell loop, reading with `read` (no fork per file) and readlink for the links.
PCI_SYSFS_COMMAND = (
    "for d in /sys/bus/pci/devices/*; do [ -e \"$d/vendor\" ] || continue; "
    "read -r v < \"$d/vendor\"; read -r p < \"$d/device\"; read -r c < \"$d/class\"; "
    "drv=-; [ -e \"$d/driver\" ] && { l=$(readlink \"$d/driver\"); drv=${l##*/}; }; "
    "grp=-; [ -e \"$d/iommu_group\" ] && { l=$(readlink \"$d/iommu_group\"); grp=${l##*/}; }; "
    "ovr=-; [ -r \"$d/driver_override\" ] && read -r ovr < \"$d/driver_override\"; "
    "echo \"${d##*/} $v $p $c $drv $grp $ovr\"; done"
)

_LINE = re.compile(
    r"(?P<address>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) "
    r"0x(?P<vendor>[0-9a-f]{4}) 0x(?P<device>[0-9a-f]{4}) 0x(?P<class>[0-9a-f]{6}) "
    r"(?P<driver>[A-Za-z0-9_.-]+) (?P<group>\d+|-) (?P<override>\S+)"
)
# Class codes of bridges (PCI base class 06): host (0600) and PCI-to-PCI (0604) bridges.
BRIDGE_CLASSES = ("0600", "0604")


@dataclass(frozen=True)
class PciFunction:
    """One PCI function.

    address: ``DDDD:BB:SS.F``, lower case. vendor_id, device_id: 4 hex digits.
    class_code: 6 hex digits (base class, subclass, programming interface).
    driver: the driver bound now (None: none). iommu_group: its group (None: IOMMU off).
    driver_override: the driver forced for it (``driverctl set-override``), None when unset.
    """

    address: str
    vendor_id: str
    device_id: str
    class_code: str
    driver: str | None
    iommu_group: int | None
    driver_override: str | None

    @property
    def pci_id(self) -> str:
        """``vendor:device``, as ``lspci -nn`` and ``vfio-pci ids=`` write it."""
        return f"{self.vendor_id}:{self.device_id}"

    @property
    def slot(self) -> str:
        """The device the function belongs to: ``DDDD:BB:SS`` (every function of a card)."""
        return self.address.rsplit(".", 1)[0]

    @property
    def is_bridge(self) -> bool:
        return self.class_code[:4] in BRIDGE_CLASSES


@dataclass
class PciSysfs:
    """Every PCI function of the host, in address order."""

    functions: list[PciFunction]

    def by_address(self) -> dict[str, PciFunction]:
        return {f.address: f for f in self.functions}

    def to_json(self) -> dict[str, Any]:
        """``{"functions": [{"address", "vendor_id", "device_id", "class_code", "driver",
        "iommu_group", "driver_override"}]}``."""
        return {"functions": [asdict(f) for f in self.functions]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PciSysfs:
        return cls([PciFunction(**f) for f in data.get("functions", [])])


def parse_pci_sysfs(text: str) -> PciSysfs:
    """Read :data:`PCI_SYSFS_COMMAND` output; ParseError on any other line."""
    functions: list[PciFunction] = []
    seen: set[str] = set()
    for no, line in enumerate(clean_lines(text), 1):
        if not line.strip():
            continue
        match = _LINE.fullmatch(line.strip())
        if not match:
            raise ParseError(SOURCE, f"expected 'ADDRESS 0xVENDOR 0xDEVICE 0xCLASS DRIVER GROUP "
                             f"OVERRIDE', got {line[:60]!r}", line=no)
        if match["address"] in seen:
            raise ParseError(SOURCE, f"function {match['address']} listed twice", line=no)
        seen.add(match["address"])
        override = match["override"]
        functions.append(PciFunction(
            address=match["address"], vendor_id=match["vendor"], device_id=match["device"],
            class_code=match["class"],
            driver=None if match["driver"] == "-" else match["driver"],
            iommu_group=None if match["group"] == "-" else int(match["group"]),
            driver_override=None if override in ("(null)", "-") else override,
        ))
    if not functions:
        raise ParseError(SOURCE, "no PCI functions (empty output)")
    return PciSysfs(functions)


# ---------------------------------------------------------------------------- around binding

# driverctl keeps each saved override in /etc/driverctl.d/<bus>-<device>, holding the driver
# name; driverctl@<bus>-<device>.service applies it when udev adds the device at boot.
DRIVERCTL_SAVED_COMMAND = (
    "for f in /etc/driverctl.d/pci-*; do [ -f \"$f\" ] || continue; read -r drv < \"$f\"; "
    "echo \"${f#/etc/driverctl.d/pci-} $drv\"; done"
)


def parse_driverctl_saved(text: str) -> dict[str, str]:
    """``{address: driver}`` of the overrides driverctl saved (:data:`DRIVERCTL_SAVED_COMMAND`)."""
    saved: dict[str, str] = {}
    for no, line in enumerate(clean_lines(text), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]",
                                                 parts[0]):
            raise ParseError("/etc/driverctl.d", f"not 'ADDRESS DRIVER': {line[:60]!r}", line=no)
        saved[parts[0]] = parts[1]
    return saved


def device_users_command(addresses: list[str]) -> str:
    """Shell printing ``ADDRESS PID COMM`` for each process using one of ``addresses``: holding
    its VFIO group (/dev/vfio/N: a VM), its /dev/nvidiaN (a CUDA process, nvidia-persistenced)
    open, or its BARs mapped (/sys/.../resourceN). Addresses must be valid (checked here)."""
    for address in addresses:
        if not re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", address):
            raise ParseError(SOURCE, f"not a PCI address: {address[:40]!r}")
    return (
        f"for a in {' '.join(addresses)}; do d=/sys/bus/pci/devices/$a; [ -e \"$d\" ] || "
        "continue; real=$(readlink -f \"$d\"); set -- -false; "
        "if [ -e \"$d/iommu_group\" ]; then l=$(readlink \"$d/iommu_group\"); "
        "set -- \"$@\" -o -lname \"/dev/vfio/${l##*/}\"; fi; "
        "i=/proc/driver/nvidia/gpus/$a/information; if [ -r \"$i\" ]; then "
        "m=$(sed -n 's/^Device Minor: *//p' \"$i\"); set -- \"$@\" -o -lname \"/dev/nvidia$m\"; "
        "fi; { find /proc/[0-9]*/fd -maxdepth 1 \\( \"$@\" \\) 2>/dev/null | cut -d/ -f3; "
        "grep -l \"$real/resource\" /proc/[0-9]*/maps 2>/dev/null | cut -d/ -f3; } | sort -u | "
        "while read -r pid; do read -r comm < \"/proc/$pid/comm\" 2>/dev/null && "
        "echo \"$a $pid $comm\"; done; done"
    )


def parse_device_users(text: str) -> dict[str, list[str]]:
    """``{address: ["PID (COMM)", ...]}`` from :func:`device_users_command` output."""
    users: dict[str, list[str]] = {}
    for no, line in enumerate(clean_lines(text), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=2)
        if len(parts) != 3 or not parts[1].isdigit():
            raise ParseError("device users", f"not 'ADDRESS PID COMM': {line[:60]!r}", line=no)
        users.setdefault(parts[0], []).append(f"{parts[1]} ({parts[2]})")
    return users
