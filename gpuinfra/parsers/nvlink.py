"""`nvidia-smi nvlink --status` (also `-s`, `-s -i N`): per-GPU NVLink link states and rates.

Shape (docs/hardware-reference.md 8.3)::

    GPU 0: NVIDIA H100 PCIe (UUID: GPU-...)
             Link 0: 26.562 GB/s
             Link 4: <inactive>
    GPU 1: NVIDIA A100-PCIE-40GB (UUID: GPU-...)
    NVML: Unable to retrieve NVLink information as all links are inActive

Empty output (a GPU without NVLink, e.g. an A10) is an empty result, not an error. Output of
other `nvlink` subcommands (`--capabilities`, `-R`, `-e`) raises :class:`ParseError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "nvidia-smi nvlink --status"

_LINK_LINE = re.compile(r"Link (\d+): (.*)")
_RATE = re.compile(r"(\d+(?:\.\d+)?) GB/s")
_ALL_INACTIVE = "all links are inactive"

# What other `nvidia-smi nvlink` subcommands print, to say what a wrong file is.
_OTHER_OUTPUTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Link \d+, .*(supported|Supported)"), "nvidia-smi nvlink --capabilities"),
    (re.compile(r"Link \d+: Remote Device"), "nvidia-smi nvlink -R (remote links)"),
    (re.compile(r"Link \d+: .*Errors?\b", re.IGNORECASE), "nvidia-smi nvlink -e (error counters)"),
    (re.compile(r"MIG \S+\s+Device\s+\d+: \(UUID: "), "nvidia-smi -L (the GPU list)"),
)
# A GPU list (`nvidia-smi -L`) has the same `GPU n: NAME (UUID: ...)` lines as --status, and
# nothing else; --status prints a `Link n:` line or the all-inactive message for each GPU.
_GPU_LIST = ("this is `nvidia-smi -L` output (GPU lines only, no `Link n:` line and no "
             "all-links-inactive message for any GPU), not `nvidia-smi nvlink --status`: "
             "capture `nvidia-smi nvlink --status` instead")


@dataclass(frozen=True)
class NvlinkLink:
    """One link: active with its per-direction rate in GB/s, or inactive (gbytes_per_s None)."""

    active: bool
    gbytes_per_s: float | None

    def to_json(self) -> dict[str, Any]:
        """Plain data: active, gbytes_per_s (GB/s, not Gb/s)."""
        return {"active": self.active, "gbytes_per_s": self.gbytes_per_s}


@dataclass
class NvlinkGpu:
    """One GPU's block: name and UUID from its header line, links by number.

    all_inactive: the driver printed "Unable to retrieve NVLink information as all links are
    inActive" for it (links is then empty).
    """

    index: int
    name: str
    uuid: str
    links: dict[int, NvlinkLink] = field(default_factory=dict)
    all_inactive: bool = False

    def to_json(self) -> dict[str, Any]:
        """Plain data: name, uuid, links (keyed by link number as text), all_inactive."""
        return {
            "name": self.name,
            "uuid": self.uuid,
            "links": {str(k): link.to_json() for k, link in self.links.items()},
            "all_inactive": self.all_inactive,
        }

    @property
    def active_links(self) -> list[int]:
        """Numbers of the active links, ascending."""
        return sorted(k for k, link in self.links.items() if link.active)

    @property
    def inactive_links(self) -> list[int]:
        """Numbers of the links shown as ``<inactive>``, ascending."""
        return sorted(k for k, link in self.links.items() if not link.active)


@dataclass
class NvlinkStatus:
    """Every GPU block of the output, keyed ``GPU<n>`` in output order."""

    gpus: dict[str, NvlinkGpu] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain data: ``{"GPU0": {name, uuid, links, all_inactive}, ...}``."""
        return {key: gpu.to_json() for key, gpu in self.gpus.items()}

    @property
    def names(self) -> list[str]:
        """GPU names as the driver printed them (e.g. "NVIDIA H100 PCIe"), one per GPU."""
        return [gpu.name for gpu in self.gpus.values()]


def parse_nvlink(text: str) -> NvlinkStatus:
    """Parse `nvidia-smi nvlink --status` output; returns :class:`NvlinkStatus`.

    Empty text gives an empty result. Raises ParseError for lines that are not status output.
    """
    status = NvlinkStatus()
    current: NvlinkGpu | None = None
    for lineno, line in enumerate(clean_lines(text, SOURCE), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        gpu = _gpu_header(stripped)
        if gpu is not None:
            current = _add_gpu(status, gpu, lineno)
            continue
        if current is None:
            raise ParseError(SOURCE, f"{_what_is(stripped)} before any `GPU n: ...` line",
                             line=lineno)
        _read_detail(current, stripped, lineno)
    if status.gpus and not any(g.links or g.all_inactive for g in status.gpus.values()):
        raise ParseError(SOURCE, _GPU_LIST)
    return status


def _gpu_header(line: str) -> NvlinkGpu | None:
    """The GPU a ``GPU n: NAME (UUID: ...)`` line opens, or None for other lines.

    Split by hand, not with a pattern: ``NAME\\s*\\(UUID`` as a regex backtracks over long
    runs of spaces (seconds on a 60 KB line); these string operations are linear."""
    if not line.startswith("GPU ") or not line.endswith(")"):
        return None
    index, sep, rest = line[4:].partition(": ")
    if not sep or not (index.isascii() and index.isdigit()) or len(index) > 4:
        return None
    name, sep, uuid = rest[:-1].partition("(UUID: ")
    if not sep or ")" in uuid:
        return None
    return NvlinkGpu(int(index), name.rstrip(), uuid.strip())


def _add_gpu(status: NvlinkStatus, gpu: NvlinkGpu, lineno: int) -> NvlinkGpu:
    key = f"GPU{gpu.index}"
    if key in status.gpus:
        raise ParseError(SOURCE, f"{key} appears twice", line=lineno)
    status.gpus[key] = gpu
    return gpu


def _read_detail(gpu: NvlinkGpu, line: str, lineno: int) -> None:
    """Record a ``Link k: ...`` line or the all-inactive message for ``gpu``."""
    if _ALL_INACTIVE in line.lower():
        if gpu.links:
            raise ParseError(SOURCE, f"GPU{gpu.index} lists links and also says all links "
                                     "are inactive", line=lineno)
        gpu.all_inactive = True
        return
    match = _LINK_LINE.fullmatch(line)
    link = _link_state(match.group(2)) if match else None
    if match is None or link is None:
        raise ParseError(SOURCE, _what_is(line), line=lineno)
    number = int(match.group(1))
    if number in gpu.links:
        raise ParseError(SOURCE, f"GPU{gpu.index} link {number} appears twice", line=lineno)
    if gpu.all_inactive:
        raise ParseError(SOURCE, f"GPU{gpu.index} says all links are inactive but lists "
                                 f"link {number}", line=lineno)
    gpu.links[number] = link


def _link_state(value: str) -> NvlinkLink | None:
    """``26.562 GB/s`` / ``25 GB/s`` -> active with that rate, ``<inactive>`` -> inactive."""
    value = value.strip()
    if value.lower() == "<inactive>":
        return NvlinkLink(active=False, gbytes_per_s=None)
    rate = _RATE.fullmatch(value)
    return NvlinkLink(active=True, gbytes_per_s=float(rate.group(1))) if rate else None


def _what_is(line: str) -> str:
    """Why ``line`` is not status output, naming the subcommand that prints it when known."""
    for pattern, command in _OTHER_OUTPUTS:
        if pattern.match(line):
            return f"this is `{command}` output, not `--status` output: {line!r}"
    return f"not `nvidia-smi nvlink --status` output: unexpected line {line!r}"
