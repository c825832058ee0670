"""The PCI ``hostdev`` entries of a libvirt domain: ``virsh dumpxml VM`` whole, or its hostdev
sections as people paste them (``virsh dumpxml VM | grep -A5 hostdev``, an excerpt).

Read with patterns, not an XML parser, because excerpts are not well-formed XML. Each
``<hostdev ... type='pci'>`` is a block; it is complete when its ``<source><address .../>`` is in
the capture (the host function it passes). A block cut before its source, and a ``...`` line,
are cuts: the capture may hold hostdevs not shown. ``whole_domain``: the capture runs from
``<domain`` to ``</domain>`` with no cut, so a hostdev it lacks is not in the VM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuinfra.parsers._text import clean_lines

SOURCE = "virsh dumpxml"

_HOSTDEV = re.compile(r"<hostdev\b([^>]*)>")
_ATTR = re.compile(r"""([A-Za-z_][\w-]*)\s*=\s*(?:'([^']*)'|"([^"]*)")""")
_SOURCE_ADDRESS = re.compile(r"<source\b[^>]*>\s*<address\b([^>]*)/?>", re.S)
_NAME = re.compile(r"<name>([^<]+)</name>")
_ELISION = re.compile(r"^\s*(?:\.{3,}|…|\[\.{3}\]|\(\.{3}\)|<!--\s*\.{3}\s*-->)\s*$")


@dataclass(frozen=True)
class Hostdev:
    """One PCI hostdev: the host function it passes (``DDDD:BB:SS.F``), whether libvirt
    manages the binding, and the line it starts on."""

    address: str
    managed: bool
    line: int


@dataclass
class HostdevCapture:
    domain: str | None = None
    hostdevs: list[Hostdev] = field(default_factory=list)
    whole_domain: bool = False
    cuts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"domain": self.domain, "hostdevs": [vars(h) for h in self.hostdevs],
                "whole_domain": self.whole_domain, "cuts": self.cuts}


def _attrs(text: str) -> dict[str, str]:
    return {m[1]: m[2] if m[2] is not None else m[3] for m in _ATTR.finditer(text)}


def _hex(value: str, width: int) -> str | None:
    try:
        return f"{int(value, 16):0{width}x}"
    except ValueError:
        return None


def parse_hostdevs(text: str) -> HostdevCapture:
    """The PCI hostdevs of a ``virsh dumpxml`` capture, whole or cut (see the module's doc)."""
    lines = clean_lines(text, SOURCE)
    joined = "\n".join(lines)
    capture = HostdevCapture()
    name = _NAME.search(joined)
    capture.domain = name[1].strip() if name else None
    for no, line in enumerate(lines, 1):
        if _ELISION.match(line):
            capture.cuts.append(f"line {no}: {line.strip()!r}, lines left out")
    starts = [(m.start(), m) for m in _HOSTDEV.finditer(joined)]
    for i, (start, match) in enumerate(starts):
        attrs = _attrs(match[1])
        if attrs.get("type", "pci") != "pci":
            continue
        end = joined.find("</hostdev>", start)
        following = starts[i + 1][0] if i + 1 < len(starts) else len(joined)
        separator = joined.find("\n--\n", start)  # grep's group separator
        stop = min(x for x in (end if end >= 0 else len(joined), following,
                               separator if separator >= 0 else len(joined)))
        block = joined[start:stop]
        line_no = joined.count("\n", 0, start) + 1
        source = _SOURCE_ADDRESS.search(block)
        if not source:
            capture.cuts.append(f"line {line_no}: a hostdev cut before its <source> address")
            continue
        a = _attrs(source[1])
        parts = (_hex(a.get("domain", "0"), 4), _hex(a.get("bus", ""), 2),
                 _hex(a.get("slot", ""), 2), _hex(a.get("function", ""), 1))
        if None in parts:
            capture.cuts.append(f"line {line_no}: a hostdev whose source address is unreadable")
            continue
        domain, bus, slot, function = parts
        capture.hostdevs.append(Hostdev(f"{domain}:{bus}:{slot}.{function}",
                                        attrs.get("managed", "no") == "yes", line_no))
    capture.whole_domain = (not capture.cuts and "<domain" in joined
                            and "</domain>" in joined)
    return capture
