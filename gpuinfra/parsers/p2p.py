"""`nvidia-smi topo -p2p r|w|n|a|p`: the GPU-to-GPU peer-to-peer capability matrix.

The capability letter (read, write, nvlink, atomics, pcie) is not printed, so the caller passes
it as ``mode``. Rows start with a space (`` GPU0   X       OK``); the legend may be missing.
Codes (docs/hardware-reference.md 8.2) are in :data:`P2P_CODES`; any other code, a ragged row or a
row for a GPU the header does not name raises :class:`ParseError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuinfra.errors import GpuinfraError, ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "nvidia-smi topo -p2p"

# Status code -> meaning (legend wording, DR from R610-era output).
P2P_CODES: dict[str, str] = {
    "X": "Self",
    "OK": "Status Ok",
    "CNS": "Chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "Topology not supported",
    "NS": "Not supported",
    "DR": "Disabled by registry key",
    "U": "Unknown",
}

# The capability letters `-p2p` takes, and the long names people write for them.
MODES: dict[str, str] = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "pcie"}
_GPU = re.compile(r"GPU\d+")


@dataclass
class P2PMatrix:
    """P2P status per ordered GPU pair.

    mode: the `-p2p` letter (r, w, n, a, p) or None when unknown.
    gpus: GPU names in header order.
    status: row GPU -> column GPU -> code (OK, NS, CNS...), self cell omitted.
    """

    mode: str | None
    gpus: list[str]
    status: dict[str, dict[str, str]]

    def to_json(self) -> dict[str, Any]:
        """Plain data: mode, gpus, status."""
        return {
            "mode": self.mode,
            "gpus": list(self.gpus),
            "status": {row: dict(cols) for row, cols in self.status.items()},
        }

    def code(self, a: str | int, b: str | int) -> str | None:
        """The status from ``a`` to ``b`` ("GPU0" or 0), or None if either GPU is absent."""
        return self.status.get(_name(a), {}).get(_name(b))

    def pair_ok(self, a: str | int, b: str | int) -> bool:
        """True when P2P is OK in both directions between ``a`` and ``b``."""
        return self.code(a, b) == "OK" and self.code(b, a) == "OK"


def _name(gpu: str | int) -> str:
    return f"GPU{gpu}" if isinstance(gpu, int) else gpu


def normalize_mode(mode: str | None) -> str | None:
    """The `-p2p` letter for ``mode`` ("r" or "read"...); None stays None; unknown raises."""
    if mode is None:
        return None
    key = mode.strip().lower()
    for letter, long_name in MODES.items():
        if key in (letter, long_name):
            return letter
    raise GpuinfraError(f"unknown p2p mode {mode!r}: use one of {', '.join(MODES)}")


def parse_p2p(text: str, mode: str | None = None) -> P2PMatrix:
    """Parse `nvidia-smi topo -p2p` output; returns a :class:`P2PMatrix` or raises ParseError."""
    letter = normalize_mode(mode)
    lines = clean_lines(text, SOURCE)
    if not any(line.strip() for line in lines):
        raise ParseError(SOURCE, "empty output: no matrix to read")
    header_at = _find_header(lines)
    gpus = lines[header_at].split()
    status = _read_rows(lines, header_at + 1, gpus)
    missing = [gpu for gpu in gpus if gpu not in status]
    if missing:
        raise ParseError(SOURCE, f"no row for {', '.join(missing)} (output truncated?)",
                         line=header_at + 1)
    return P2PMatrix(letter, gpus, status)


def _find_header(lines: list[str]) -> int:
    """Index of the line naming the GPU columns (every word GPU<n>, the first GPU0)."""
    for index, line in enumerate(lines):
        words = line.split()
        if not words or not _GPU.fullmatch(words[0]):
            continue
        if not all(_GPU.fullmatch(word) for word in words):
            raise ParseError(SOURCE, "matrix row found before any header line "
                                     "(expected a line naming the columns: GPU0 GPU1 ...)",
                             line=index + 1)
        if words[0] == "GPU0" and len(set(words)) == len(words):
            return index
    raise ParseError(SOURCE, "no header line naming the GPU columns (GPU0 GPU1 ...) found")


def _read_rows(lines: list[str], start: int, gpus: list[str]) -> dict[str, dict[str, str]]:
    """Rows from ``start`` to the first blank or Legend line: GPU -> GPU -> code."""
    status: dict[str, dict[str, str]] = {}
    for index in range(start, len(lines)):
        words = lines[index].split()
        if not words or words[0].startswith("Legend"):
            break
        label, cells = words[0], words[1:]
        lineno = index + 1
        if label not in gpus:
            raise ParseError(SOURCE, f"row label {label!r} is not one of the header's GPUs "
                                     f"({' '.join(gpus)})", line=lineno)
        if label in status:
            raise ParseError(SOURCE, f"two rows for {label}", line=lineno)
        if len(cells) != len(gpus):
            raise ParseError(SOURCE, f"row {label} has {len(cells)} cells but the header names "
                                     f"{len(gpus)} GPUs", line=lineno)
        status[label] = _row_status(label, cells, gpus, lineno)
    return status


def _row_status(label: str, cells: list[str], gpus: list[str], lineno: int) -> dict[str, str]:
    """One row's codes by column, checked: known codes, X exactly on the diagonal."""
    row: dict[str, str] = {}
    for column, cell in zip(gpus, cells, strict=True):
        if cell not in P2P_CODES:
            raise ParseError(SOURCE, f"row {label}, column {column}: unknown status {cell!r} "
                                     f"(known: {', '.join(P2P_CODES)})", line=lineno)
        if (cell == "X") != (column == label):
            raise ParseError(SOURCE, f"row {label}, column {column}: {cell!r} where the self "
                                     "cell X belongs only on the diagonal", line=lineno)
        if column != label:
            row[column] = cell
    return row
