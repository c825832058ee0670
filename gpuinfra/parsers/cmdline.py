"""`cat /proc/cmdline`: the kernel's command line, one line of arguments::

    BOOT_IMAGE=/boot/vmlinuz-6.1.0-50-amd64 root=UUID=... ro quiet intel_iommu=on iommu=pt

A pasted one may be wrapped over several lines (they are joined) or shortened by the poster
(a ``...`` argument, or one ending in ``...``): a cut, said in :attr:`KernelCmdline.cuts`, since
an argument not shown may still be there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuinfra.parsers._text import ELISION, clean_lines

SOURCE = "/proc/cmdline"
ELIDED = "the command line holds a '...': the poster left arguments out"


@dataclass
class KernelCmdline:
    """The arguments in order, the non-empty lines they were on, and the cuts."""

    args: list[str] = field(default_factory=list)
    lines: int = 0
    cuts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"args": ["ro", "intel_iommu=on", ...], "cuts": [...]}``."""
        return {"args": list(self.args), "cuts": list(self.cuts)}


def parse_cmdline(text: str) -> KernelCmdline:
    """The arguments of a /proc/cmdline capture (see the module's doc)."""
    lines = [line for line in clean_lines(text, SOURCE) if line.strip()]
    args = " ".join(lines).split()
    cuts = [ELIDED] if any(ELISION.match(a) or a.endswith("...") for a in args) else []
    return KernelCmdline(args, len(lines), cuts)
