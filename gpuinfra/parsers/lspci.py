"""PCI devices: `lspci`, `lspci -nn`, `lspci -k` / `-nnk` (also filtered with grep or -d/-s).

One line per device, then (with ``-k``) detail lines, each indented by one tab::

    08:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:1db1] (rev a1)
        Subsystem: NVIDIA Corporation Device [10de:1212]
        Kernel driver in use: vfio-pci
        Kernel modules: nvidiafb, nouveau, nvidia_drm, nvidia_vgpu_vfio, nvidia

The slot may carry a PCI domain (``0001:00:00.0``) or not (``06:00.0``, domain 0000). Other
indented lines (``-v`` details) are skipped; nothing else is accepted.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "lspci"

NVIDIA = "10de"
MELLANOX = "15b3"

_DEVICE_LINE = re.compile(
    r"^(?P<slot>(?:(?P<domain>[0-9a-fA-F]{4,8}):)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
    r" (?P<class>.+?)(?: \[(?P<class_code>[0-9a-fA-F]{4})\])?: (?P<rest>.*)$"
)
# The end of a description: -nn IDs, revision and (with -v) programming interface. Each is
# matched on the line's last characters only (a pattern with a lazy group in front of the
# suffix would scan the whole line, once per suffix).
_IDS = re.compile(r" ?\[(?P<vendor>[0-9a-f]{4}):(?P<device>[0-9a-f]{4})\]")
_REV = re.compile(r" \(rev (?P<rev>[0-9a-f]{2})\)")
_PROG_IF = re.compile(r" \(prog-if [^()]{0,40}\)")
_SUFFIX_MAX = 52  # the longest of the three
# Without -nn, lspci names devices it has no name for as "Device 2941".
_UNNAMED_DEVICE = re.compile(r"(?:^| )Device (?P<device>[0-9a-f]{4})$")
# Vendor names as pci.ids spells them; without -nn they are the only way to tell the vendor.
_VENDOR_NAMES = {
    "NVIDIA Corporation": NVIDIA,
    "Mellanox Technologies": MELLANOX,
    "Intel Corporation": "8086",
    "Advanced Micro Devices, Inc. [AMD/ATI]": "1002",
    "Advanced Micro Devices, Inc. [AMD]": "1022",
    "Broadcom Inc. and subsidiaries": "14e4",
    "Broadcom / LSI": "1000",
    "Red Hat, Inc.": "1af4",
    "Microsoft Corporation": "1414",
    "ASPEED Technology, Inc.": "1a03",
    "Samsung Electronics Co Ltd": "144d",
    "Pericom Semiconductor": "12d8",
    "Renesas Technology Corp.": "1912",
    "Matrox Electronics Systems Ltd.": "102b",
    "Marvell Technology Group Ltd.": "1b4b",
    "Huawei Technologies Co., Ltd.": "19e5",
    "Amazon.com, Inc.": "1d0f",
    "Google, Inc.": "1ae0",
}
_GPU_CLASSES = {"0300": "VGA compatible controller", "0302": "3D controller"}
_NIC_CLASSES = {"0200": "Ethernet controller", "0207": "Infiniband controller",
                "0280": "Network controller"}
_NVSWITCH_CLASS = ("0680", "Bridge")


@dataclass
class PciDevice:
    """One PCI function.

    address: full lower-case ``DDDD:BB:DD.F`` (domain 0000 added when lspci printed none).
    slot: the address as printed.
    class_code, vendor_id, device_id, subsystem ids: 4 lower-case hex digits (``-nn`` only,
        except device_id also read from "Device 2941" when lspci has no name for it).
    vendor_name: from a table of well-known vendors (None when not recognised).
    description: vendor and device as printed, without IDs and revision.
    subsystem, driver, modules: ``-k`` lines (None / [] when not shown).
    """

    address: str
    slot: str
    class_name: str
    class_code: str | None
    description: str
    vendor_name: str | None
    vendor_id: str | None
    device_id: str | None
    revision: str | None
    subsystem: str | None = None
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    driver: str | None = None
    modules: list[str] = field(default_factory=list)

    @property
    def is_nvidia(self) -> bool:
        return self.vendor_id == NVIDIA or self.vendor_name == "NVIDIA Corporation"

    @property
    def is_mellanox(self) -> bool:
        return self.vendor_id == MELLANOX or self.vendor_name == "Mellanox Technologies"

    def in_class(self, classes: dict[str, str]) -> bool:
        """Whether the class code (or, without ``-nn``, the class name) is one of ``classes``."""
        if self.class_code is not None:
            return self.class_code in classes
        return self.class_name in classes.values()


@dataclass
class PciDevices:
    """PCI devices in the order lspci printed them."""

    devices: list[PciDevice]

    def to_json(self) -> dict[str, Any]:
        """``{"devices": [{"address", "slot", "class_name", "class_code", "description",
        "vendor_name", "vendor_id", "device_id", "revision", "subsystem", ..., "driver",
        "modules"}]}``."""
        return {"devices": [asdict(d) for d in self.devices]}


def parse_lspci(text: str) -> PciDevices:
    """Read `lspci` output with or without ``-nn`` and ``-k`` (see the module doc)."""
    devices: list[PciDevice] = []
    seen: set[str] = set()
    for no, line in enumerate(clean_lines(text, SOURCE), 1):
        if not line.strip():
            continue
        if line[0] in " \t":
            if not devices:
                raise ParseError(SOURCE, f"detail line before any device: {line.strip()[:60]!r}",
                                 line=no)
            _add_detail(devices[-1], line.strip())
            continue
        device = _device(line, no)
        if device.address in seen:
            raise ParseError(SOURCE, f"device {device.address} listed twice", line=no)
        seen.add(device.address)
        devices.append(device)
    if not devices:
        raise ParseError(SOURCE, "no device lines (empty output)")
    return PciDevices(devices)


def nvidia_gpus(devs: PciDevices) -> list[PciDevice]:
    """NVIDIA display controllers: class 0300 (VGA) or 0302 (3D controller)."""
    return [d for d in devs.devices if d.is_nvidia and d.in_class(_GPU_CLASSES)]


def mellanox_nics(devs: PciDevices) -> list[PciDevice]:
    """Mellanox/NVIDIA networking functions: InfiniBand, Ethernet or network controllers.

    Physical and virtual functions alike; ConnectX PCIe bridges and BlueField management
    functions are left out.
    """
    return [d for d in devs.devices if d.is_mellanox and d.in_class(_NIC_CLASSES)]


def nvswitches(devs: PciDevices) -> list[PciDevice]:
    """NVSwitch chips: NVIDIA functions of class 0680 ("Bridge"), not PCI bridges (0604)."""
    code, name = _NVSWITCH_CLASS
    return [d for d in devs.devices if d.is_nvidia and d.in_class({code: name})]


def _device(line: str, no: int) -> PciDevice:
    match = _DEVICE_LINE.match(line)
    if not match:
        raise ParseError(SOURCE, f"expected a device line like '06:00.0 3D controller: ...', "
                         f"got {line[:60]!r}", line=no)
    rest = match["rest"].strip()
    rest, _ = _strip(_PROG_IF, rest, None)
    rest, revision = _strip(_REV, rest, "rev")
    vendor_id = device_id = None
    ids = _suffix(_IDS, rest)
    if ids:
        rest, vendor_id, device_id = rest[:ids[0]].strip(), ids[1]["vendor"], ids[1]["device"]
    else:
        unnamed = _UNNAMED_DEVICE.search(rest[-12:])  # " Device 2941" at the very end
        device_id = unnamed["device"] if unnamed else None
    slot = match["slot"]
    return PciDevice(
        address=_address(slot), slot=slot, class_name=match["class"],
        class_code=match["class_code"].lower() if match["class_code"] else None,
        description=rest, vendor_name=_vendor_name(rest), vendor_id=vendor_id,
        device_id=device_id, revision=revision,
    )


def _suffix(pattern: re.Pattern[str], text: str) -> tuple[int, re.Match[str]] | None:
    """(where the suffix starts, its match) when ``pattern`` matches the end of ``text``."""
    tail_start = max(0, len(text) - _SUFFIX_MAX)
    match = pattern.search(text[tail_start:])
    while match and match.end() != len(text) - tail_start:
        match = pattern.search(text[tail_start:], match.start() + 1)
    return (tail_start + match.start(), match) if match else None


def _strip(pattern: re.Pattern[str], text: str, group: str | None) -> tuple[str, str | None]:
    """``text`` without the suffix ``pattern`` matches, and the captured ``group``."""
    found = _suffix(pattern, text)
    if not found:
        return text, None
    start, match = found
    return text[:start].strip(), match[group] if group else None


def _address(slot: str) -> str:
    slot = slot.lower()
    if slot.count(":") == 1:
        return f"0000:{slot}"
    domain, bus_dev_fn = slot.split(":", 1)
    return f"{domain.zfill(4)}:{bus_dev_fn}"


def _vendor_name(description: str) -> str | None:
    for name in sorted(_VENDOR_NAMES, key=len, reverse=True):
        if description == name or description.startswith(name + " "):
            return name
    return None


def _add_detail(device: PciDevice, detail: str) -> None:
    key, sep, value = detail.partition(":")
    value = value.strip()
    if not sep:
        return  # a -v continuation line
    if key == "Subsystem":
        device.subsystem = value
        found = _suffix(_IDS, value)  # -nn: "NVIDIA Corporation Device [10de:1212]"
        if found:
            ids = found[1]
            device.subsystem_vendor_id, device.subsystem_device_id = ids["vendor"], ids["device"]
    elif key == "Kernel driver in use":
        device.driver = value
    elif key == "Kernel modules":
        device.modules = [m.strip() for m in value.split(",") if m.strip()]
