"""What a kernel log (`dmesg`, `journalctl -k`, whole or grepped) says about the IOMMU,
nvidia-peermem and the GPUs' XIDs.

Evidence is read line by line; anything else is ignored (a log holds everything the kernel
said). A log is a ring buffer and is often grepped: a message not in it proves nothing, so the
judgements built on this read only what is there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.monitoring.gpumetrics import (
    DriverFailure,
    XidEvent,
    parse_driver_failures,
    parse_xids,
)
from gpuinfra.parsers._text import ELISION, clean_lines

# The IOMMU found and on: Intel VT-d (DMAR), AMD-Vi, or devices put in IOMMU groups.
_IOMMU_ON = re.compile(r"DMAR: IOMMU enabled|AMD-Vi: (?:Found IOMMU|Interrupt remapping "
                       r"enabled)|Adding to iommu group|iommu: Adding device|"
                       r"DMAR-IR: Enabled IRQ remapping")
_IOMMU_OFF = re.compile(r"DMAR: IOMMU disabled|AMD-Vi: (?:AMD IOMMU disabled|IOMMU not "
                        r"enabled)|DMAR: Disable IOMMU|No DMAR table", re.IGNORECASE)
# Kernel 5.x+: "iommu: Default domain type: Passthrough (set via kernel command line)".
_DOMAIN = re.compile(r"iommu: Default domain type: (?P<type>Passthrough|Translated)")
_PEERMEM_SYMBOL = re.compile(r"nvidia_peermem: (?:disagrees about version of symbol|Unknown "
                             r"symbol) (?P<symbol>\w+)")


@dataclass
class KernelLog:
    """The evidence found: lines saying the IOMMU is on / off, the default domain type
    ("Passthrough"/"Translated"), the symbols nvidia_peermem could not resolve, the XIDs, and
    the poster's elisions."""

    iommu_on: list[str] = field(default_factory=list)
    iommu_off: list[str] = field(default_factory=list)
    domain_type: str | None = None
    peermem_symbols: list[str] = field(default_factory=list)
    xids: list[XidEvent] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)
    lines: int = 0
    driver_failures: list[DriverFailure] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"lines", "iommu_on": [line...], "iommu_off": [line...], "domain_type",
        "peermem_symbols": [...], "xids": [{"pci", "xid", "recovery_action"}], "cuts"}``."""
        return {"lines": self.lines, "iommu_on": list(self.iommu_on),
                "iommu_off": list(self.iommu_off), "domain_type": self.domain_type,
                "peermem_symbols": list(self.peermem_symbols),
                "xids": [x.to_json() for x in self.xids], "cuts": list(self.cuts),
                "driver_failures": [{"gpu": f.gpu, "what": f.what}
                                    for f in self.driver_failures]}


def parse_kernel_log(text: str) -> KernelLog:
    lines = clean_lines(text, "dmesg")  # first: no XID number is read from a refused line
    log = KernelLog(xids=parse_xids("\n".join(lines)),
                    driver_failures=parse_driver_failures("\n".join(lines)))
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        log.lines += 1
        if ELISION.match(line):
            log.cuts.append(f"line {no}: {line.strip()!r} (lines left out by the poster)")
        if _IOMMU_ON.search(line):
            log.iommu_on.append(line.strip())
        if _IOMMU_OFF.search(line):
            log.iommu_off.append(line.strip())
        if (domain := _DOMAIN.search(line)) is not None:
            log.domain_type = domain["type"]
        if (symbol := _PEERMEM_SYMBOL.search(line)) is not None \
                and symbol["symbol"] not in log.peermem_symbols:
            log.peermem_symbols.append(symbol["symbol"])
    return log
