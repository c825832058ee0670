"""The ATS and ACS lines of `lspci -vvv` (whole, per device with ``-s``, or filtered with grep).

::

    0000:02:08.0 PCI bridge: PLX Technology, Inc. PEX 8725 ... (prog-if 00 [Normal decode])
            Capabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00
            ...
                    ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ ...
            Capabilities: [480 v1] Address Translation Service (ATS)
                    ATSCtl: Enable+, Smallest Translation Unit: 00

Each device block starts at its address line. ``ATSCtl``/``ACSCtl`` rows a grep left without
their device line are read as rows of an unnamed device: their state is plain, which device
they belong to is not. A poster's ``...`` or ``[...]`` is a cut (issue 24, section 3).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuinfra.parsers._text import split_blocks

SOURCE = "lspci -vvv"

_DEVICE = re.compile(r"^(?P<slot>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) "
                     r"(?P<what>.+)$")
_ATS_CTL = re.compile(r"ATSCtl:\s*Enable(?P<on>[+-])")
_ACS_CTL = re.compile(r"ACSCtl:\s*(?P<flags>.*)$")
_PORT_TYPE = re.compile(r"Express \(v\d\) (?P<type>[A-Za-z ]+?)(?: \(|,|$)")
# ACS Control register bits, in lspci's order (PCIe base spec 7.7.8.3).
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl",
            "DirectTrans")


@dataclass
class PciCaps:
    """One device's ATS and ACS state: ``ats`` True/False (ATSCtl Enable+/-), None without
    the capability shown; ``acs_control`` the ACS Control register rebuilt from the flags
    (0: every ACS function off), None without ACSCtl; ``port_type`` "Downstream Port",
    "Root Port", "Endpoint"... when shown. ``address`` is None for rows without their
    device line."""

    address: str | None
    description: str = ""
    port_type: str | None = None
    ats: bool | None = None
    acs_control: int | None = None
    acs_flags: str | None = None


@dataclass
class PciCapsCapture:
    devices: list[PciCaps] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"devices": [{"address", "description", "port_type", "ats", "acs_control",
        "acs_flags"}], "cuts": [...]}`` (address null: rows a grep left without their device
        line)."""
        return {"devices": [asdict(d) for d in self.devices], "cuts": list(self.cuts)}


def acs_control(flags: str) -> int | None:
    """``SrcValid+ TransBlk- ...`` -> the ACS Control register value; None if unreadable."""
    value, seen = 0, 0
    for bit, name in enumerate(ACS_BITS):
        match = re.search(rf"\b{name}([+-])", flags)
        if match:
            seen += 1
            value |= (match[1] == "+") << bit
    return value if seen else None


def parse_pci_caps(text: str) -> PciCapsCapture:
    """Every device block's ATS/ACS state, and the cuts (never raises on a partial capture:
    a block without ATS or ACS rows is simply a device without them shown)."""
    head, blocks, cuts = split_blocks(text, _DEVICE, SOURCE)
    capture = PciCapsCapture(cuts=cuts)
    if head:
        loose = _caps(None, "", head)
        capture.devices += loose  # a grep's rows: their state is plain, their device unnamed
    for _, block in blocks:
        first, *rest = block.split("\n")
        match = _DEVICE.match(first.strip())
        assert match is not None
        slot = match["slot"].lower()
        address = slot if slot.count(":") == 2 else f"0000:{slot}"
        found = _caps(address, match["what"], rest)
        capture.devices += found or [PciCaps(address, match["what"])]
    return capture


def _caps(address: str | None, what: str, lines: list[str]) -> list[PciCaps]:
    """The device of ``lines``; rows without a device line each make their own entry."""
    found: list[PciCaps] = []
    current = PciCaps(address, what) if address else None
    for line in lines:
        port = _PORT_TYPE.search(line)
        ats = _ATS_CTL.search(line)
        acs = _ACS_CTL.search(line)
        if current is None and (ats or acs):
            found.append(PciCaps(None))
            target = found[-1]
        elif current is not None:
            target = current
        else:
            continue
        if port and current is not None:
            current.port_type = port["type"].strip()
        if ats:
            target.ats = ats["on"] == "+"
        if acs:
            target.acs_flags = acs["flags"].strip()
            target.acs_control = acs_control(acs["flags"])
    if current is not None and (current.ats is not None or current.acs_control is not None
                                or current.port_type):
        found.append(current)
    return found
