"""PCI listings as people paste them for VFIO: IOMMU group listings and ``lspci -nnk``.

Read forgivingly, because these are pasted into tickets cut, filtered and elided; whatever
could not be read is said in :attr:`PciListing.cuts`, never guessed:

- the common group script, one header per group then its devices (``lspci -nns`` lines, or
  ``lspci -nnks`` blocks with their driver)::

      IOMMU Group 1:
          00:01.0 PCI bridge [0604]: Intel Corporation ... [8086:1901] (rev 05)
          01:00.0 VGA compatible controller [0300]: NVIDIA Corporation ... [10de:2482] (rev a1)

- its one-line form (``printf 'IOMMU Group %s ' ...; lspci -nns ...``)::

      IOMMU Group 11 02:00.0 VGA compatible controller [0300]: NVIDIA ... [10de:1c03] (rev a1)

- the addresses-only form of ``echo "G${g##*/}: $(ls $g/devices)"``: ``G12: 0000:81:00.0 ...``;
- plain ``lspci -nnk`` (no groups): devices with their ``Kernel driver in use:`` lines.

Each IOMMU group is a block (its devices are judged together); without groups each device is
one. A ``...`` line, a device line cut before its IDs, detail lines whose device line is not in
the capture, group numbers missing between the first and the last: each is a cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuinfra.parsers._text import clean_lines
from gpuinfra.parsers.lspci import PciDevice, _address, _device

SOURCE = "PCI listing"

_GROUP_HEADER = re.compile(r"^\s*(?:IOMMU )?[Gg]roup\s+(?P<group>\d+)\s*:?\s*(?P<rest>.*)$")
_SHORT_GROUP = re.compile(r"^\s*G(?P<group>\d+):\s*(?P<rest>.*)$")
_ADDRESS = re.compile(r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_DEVICE_START = re.compile(r"^\s*" + _ADDRESS.pattern + r" ")
_ELISION = re.compile(r"^\s*(?:\.{3,}|…|\[\.{3}\]|\(\.{3}\)|<snip>|\[snip\])\s*$", re.I)
# Command lines people paste with the output (a prompt, the script itself).
_COMMAND = re.compile(r"^\s*(?:\S*[$#]\s|for |do |done|shopt |#!|echo |lspci\b)|iommu_groups/")
_DETAIL = re.compile(r"^\s+(?:Subsystem|Kernel driver in use|Kernel modules|DeviceName|"
                     r"Physical Slot|Flags|Control|Status|Capabilities|Memory at|I/O ports|"
                     r"Expansion ROM|Interrupt|Latency|Region|NUMA node|IOMMU group)\b")


@dataclass
class ListedFunction:
    """One PCI function of the listing: its group (None: not shown), the lspci fields known
    (class and IDs None when the listing shows addresses only) and whether the driver lines
    were in the capture (``drivers_shown``: ``lspci -k``)."""

    address: str
    group: int | None
    class_code: str | None  # 4 hex digits, e.g. "0300"
    vendor_id: str | None
    device_id: str | None
    description: str = ""
    class_name: str = ""
    driver: str | None = None
    drivers_shown: bool = False

    @property
    def pci_id(self) -> str | None:
        return f"{self.vendor_id}:{self.device_id}" if self.vendor_id and self.device_id else None

    @property
    def slot(self) -> str:
        return self.address.rsplit(".", 1)[0]

    @property
    def is_bridge(self) -> bool | None:
        """Host or PCI-to-PCI bridge (0600, 0604); None when the class is not shown."""
        if self.class_code is not None:
            return self.class_code in ("0600", "0604")
        return self.class_name in ("Host bridge", "PCI bridge") if self.class_name else None


@dataclass
class PciListing:
    """The functions read, in order, and what the capture did not show.

    grouped: the capture shows IOMMU groups. has_driver_lines: it shows ``lspci -k`` lines.
    cuts: why it is not the whole listing (each a sentence). incomplete_groups: groups whose
    devices were not all read (a cut line inside them).
    """

    functions: list[ListedFunction] = field(default_factory=list)
    grouped: bool = False
    has_driver_lines: bool = False
    cuts: list[str] = field(default_factory=list)
    incomplete_groups: set[int] = field(default_factory=set)

    def by_address(self) -> dict[str, ListedFunction]:
        return {f.address: f for f in self.functions}

    def groups(self) -> dict[int, list[ListedFunction]]:
        out: dict[int, list[ListedFunction]] = {}
        for f in self.functions:
            if f.group is not None:
                out.setdefault(f.group, []).append(f)
        return out

    @property
    def whole_host(self) -> bool:
        """The listing looks like every function of the host: no cut, and (a host always has
        one) a host bridge at 0000:00:00.0 or, for group listings, group 0 listed."""
        if self.cuts:
            return False
        if self.grouped:
            return 0 in self.groups()
        return "0000:00:00.0" in self.by_address()

    def to_json(self) -> dict[str, object]:
        return {"functions": [vars(f) | {"pci_id": f.pci_id} for f in self.functions],
                "grouped": self.grouped, "cuts": self.cuts,
                "incomplete_groups": sorted(self.incomplete_groups)}


def _function(device: PciDevice, group: int | None) -> ListedFunction:
    return ListedFunction(device.address, group, device.class_code, device.vendor_id,
                          device.device_id, device.description, device.class_name)


def parse_pci_listing(text: str) -> PciListing:
    """Read an IOMMU group listing or an ``lspci -nn[k]`` capture (see the module's doc)."""
    listing = PciListing()
    lines = clean_lines(text, SOURCE)
    group: int | None = None
    current: ListedFunction | None = None
    orphans = 0
    seen: set[str] = set()

    def cut(message: str) -> None:
        listing.cuts.append(message)
        if group is not None:
            listing.incomplete_groups.add(group)

    def add(fn: ListedFunction) -> ListedFunction | None:
        if fn.address in seen:
            return None
        seen.add(fn.address)
        listing.functions.append(fn)
        return fn

    for no, line in enumerate(lines, 1):
        if not line.strip() or line.strip().startswith("```"):
            continue
        if _ELISION.match(line):
            cut(f"line {no}: {line.strip()!r}, lines left out")
            current = None
            continue
        short = _SHORT_GROUP.match(line)
        header = _GROUP_HEADER.match(line) if not short else None
        if short or header:
            match = short or header
            assert match is not None
            group, rest = int(match["group"]), match["rest"].strip()
            listing.grouped = True
            current = None
            if short:
                for address in _ADDRESS.findall(rest):
                    add(ListedFunction(_address(address), group, None, None, None))
                continue
            if rest:  # the one-line form: the device follows the group number
                current = _read_device(rest, no, group, listing, cut, add)
            continue
        if _DETAIL.match(line) or (line[:1] in "\t " and not _DEVICE_START.match(line)
                                   and ":" in line and current is not None):
            if current is None:
                orphans += 1
                continue
            key, _, value = line.strip().partition(":")
            if key in ("Kernel driver in use", "Kernel modules"):
                listing.has_driver_lines = True
            if key == "Kernel driver in use":
                current.driver = value.strip()
            continue
        if _DEVICE_START.match(line):
            if listing.grouped and group is None:
                orphans += 1  # a device above the first group header: its group is unknown
                continue
            current = _read_device(line.strip(), no, group, listing, cut, add)
            continue
        if _COMMAND.search(line):
            continue
        cut(f"line {no}: {line.strip()[:60]!r} is not a listing line")
        current = None
    if orphans:
        listing.cuts.append(f"{orphans} line(s) without the line above them that says which "
                            "device or IOMMU group they belong to: not read")
    if listing.has_driver_lines:
        for fn in listing.functions:
            fn.drivers_shown = True  # with -k, a function without the line has no driver
    if listing.grouped:
        numbers = sorted(listing.groups())
        if numbers:
            # Real listings start at group 0 (the host bridge's): a first group above it
            # means the top was cut or the listing filtered.
            missing = sorted(set(range(0, numbers[-1] + 1)) - set(numbers))
            if missing:
                listing.cuts.append(f"IOMMU groups {_ranges(missing)} are not in the capture "
                                    "(filtered or elided)")
    return listing


def _read_device(line: str, no: int, group: int | None, listing: PciListing, cut, add
                 ) -> ListedFunction | None:
    try:
        device = _device(line, no)
    except Exception:  # noqa: BLE001 - a cut line is reported, not raised
        cut(f"line {no}: {line[:60]!r} cut before its class and IDs")
        return None
    if device.class_code is not None and device.vendor_id is None:
        cut(f"line {no}: {line[:60]!r} has its [class] but no [vendor:device]: cut")
        return None
    return add(_function(device, group))


def _ranges(numbers: list[int]) -> str:
    out: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)
