"""`nvidia-smi topo -m`: the GPU/NIC connection matrix with CPU and NUMA affinity.

Real captures come in several shapes (all in tests/fixtures/real/nvidia-smi-topo-m/):

- tab-separated, as nvidia-smi prints it. The number of tabs before the last value is an
  alignment artifact (``...\\t0-23\\t0\\t\\tN/A``), and a value may be genuinely empty
  (``...\\tNODE\\t\\t0\\t\\tN/A``: no CPU affinity inside a Slurm job);
- tabs expanded to spaces (8-column stops) by whoever pasted it;
- ANSI escapes around header names (terminal captures);
- a damaged header whose last names are joined by single spaces
  (``mlx5_1 CPU Affinity NUMA Affinity``), recovered when the rows confirm it.

Codes (docs/hardware-reference.md 8.1): X self, SYS, NODE, PHB, PXB, PIX, NV# (# bonded NVLinks).
Anything that cannot be read without guessing raises :class:`ParseError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import ELISION, clean_lines

SOURCE = "nvidia-smi topo -m"
TAB = 8

# Columns after the device columns, as nvidia-smi names them -> TopoMatrix attribute.
TRAILERS: dict[str, str] = {
    "CPU Affinity": "cpu_affinity",
    "NUMA Affinity": "numa_affinity",
    "GPU NUMA ID": "gpu_numa_ids",
}
CODES = ("X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#", "N/A")
_CELL = re.compile(r"X|SYS|NODE|PHB|PXB|PIX|NV\d+|N/A")
_NV = re.compile(r"NV(\d+)")
_GPU = re.compile(r"GPU\d+")
_DEVICE = re.compile(r"[A-Za-z][\w.:-]*\d")  # GPU0, NIC3, mlx5_0, mlx5_bond_0
_AFFINITY = re.compile(r"[\d,-]+")  # a CPU list or NUMA node where a cell should be
_NIC_LEGEND = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*")


@dataclass
class TopoMatrix:
    """The parsed matrix.

    gpus / nics: device column names in header order (NICs as named: ``NIC0`` or ``mlx5_0``).
    nic_devices: ``NIC0`` -> ``mlx5_0`` from the "NIC Legend" section ({} if none).
    links: row device -> column device -> code (``NV12``, ``SYS``...), self cell omitted.
    cpu_affinity / numa_affinity / gpu_numa_ids: per GPU, None when empty or ``N/A``.
    """

    gpus: list[str]
    nics: list[str]
    nic_devices: dict[str, str]
    links: dict[str, dict[str, str]]
    cpu_affinity: dict[str, str | None]
    numa_affinity: dict[str, str | None]
    gpu_numa_ids: dict[str, str | None] = field(default_factory=dict)
    # What a pasted matrix did not show (parse_topo_partial): elided rows, pairs unknown.
    cuts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain data: gpus, nics, nic_devices, links, cpu_affinity, numa_affinity."""
        return {
            "gpus": list(self.gpus),
            "nics": list(self.nics),
            "nic_devices": dict(self.nic_devices),
            "links": {row: dict(cols) for row, cols in self.links.items()},
            "cpu_affinity": dict(self.cpu_affinity),
            "numa_affinity": dict(self.numa_affinity),
        }

    @property
    def gpu_count(self) -> int:
        """Number of GPU columns."""
        return len(self.gpus)

    def link(self, a: str | int, b: str | int) -> str | None:
        """The code between devices ``a`` and ``b`` ("GPU0" or 0), or None if either is absent."""
        return self.links.get(_name(a), {}).get(_name(b))

    def nvlink_count(self, a: str | int, b: str | int) -> int:
        """Bonded NVLinks between ``a`` and ``b``: 12 for ``NV12``, 0 for anything not NV#."""
        match = _NV.fullmatch(self.link(a, b) or "")
        return int(match.group(1)) if match else 0

    def numa_node(self, gpu: str | int) -> int | None:
        """The GPU's NUMA Affinity as a number, or None when empty, N/A or not a single node."""
        value = self.numa_affinity.get(_name(gpu))
        return int(value) if value is not None and value.isdigit() else None

    def gpu_numa_id(self, gpu: str | int) -> str | None:
        """The GPU's own "GPU NUMA ID" column (set on coherent systems like Grace), or None."""
        return self.gpu_numa_ids.get(_name(gpu))


def _name(device: str | int) -> str:
    return f"GPU{device}" if isinstance(device, int) else device


@dataclass(frozen=True)
class _Token:
    """A value of a line with the column it starts at once tabs are expanded."""

    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass
class _Header:
    """Device columns, trailing columns (CPU Affinity ...), and the header's 1-based line."""

    devices: list[_Token]
    trailers: list[_Token]
    line: int

    @property
    def names(self) -> list[str]:
        return [t.text for t in self.devices]


def parse_topo(text: str) -> TopoMatrix:
    """Parse `nvidia-smi topo -m` output; returns a :class:`TopoMatrix` or raises ParseError."""
    lines = clean_lines(text, SOURCE)
    if not any(line.strip() for line in lines):
        raise ParseError(SOURCE, "empty output: no matrix to read")
    header_at = _find_header(lines)
    header = _parse_header(lines[header_at], header_at + 1)
    rows, end = _read_rows(lines, header)
    _check_complete(rows, header)
    return _build(header, rows, _nic_legend(lines[end:]))


def parse_topo_partial(text: str) -> TopoMatrix:
    """A pasted matrix read as far as it shows (issue 47): a poster's ``...`` rows are left
    out, and the rows not shown (NIC rows cut, GPU rows elided) are read from the other rows'
    columns (the matrix is symmetric). A pair neither row shows is absent from ``links`` and
    said in ``cuts``, like every row read that way. A whole matrix reads as :func:`parse_topo`."""
    lines = clean_lines(text, SOURCE)
    cuts = [f"line {no}: {line.strip()!r} (rows left out by the poster)"
            for no, line in enumerate(lines, 1) if ELISION.match(line)]
    lines = [line for line in lines if not ELISION.match(line)]
    if not any(line.strip() for line in lines):
        raise ParseError(SOURCE, "empty output: no matrix to read")
    header_at = _find_header(lines)
    header = _parse_header(lines[header_at], header_at + 1)
    rows, end = _read_rows(lines, header)
    if not any(_GPU.fullmatch(label) for label in rows):
        raise ParseError(SOURCE, "no GPU rows after the header", line=header.line)
    names = header.names
    missing = [name for name in names if name not in rows]
    if not missing and not cuts:
        return _build(header, rows, _nic_legend(lines[end:]))
    for name in missing:
        cells = [rows[col].cells[names.index(name)] if col in rows else "?" for col in names]
        cells[names.index(name)] = "X"
        rows[name] = _Row(name, cells, [None] * len(header.trailers), 0)
    matrix = _build(header, rows, _nic_legend(lines[end:]))
    unknown = [(a, b) for i, a in enumerate(missing) for b in missing[i + 1:]]
    for a, b in unknown:
        matrix.links[a].pop(b, None)
        matrix.links[b].pop(a, None)
    # Rows of NICs only, every GPU row shown: each GPU's links are whole, and NIC-to-NIC links
    # are judged by no check: nothing that could change a verdict is missing.
    if any(_GPU.fullmatch(name) for name in missing):
        cuts.append(f"no row for {', '.join(missing)}: read from the other rows' columns"
                    + (f"; {len(unknown)} pair(s) between them not in the capture"
                       if unknown else ""))
    matrix.cuts = cuts
    return matrix


def _find_header(lines: list[str]) -> int:
    """Index of the header line (first word GPU0 and no topology code among its values)."""
    for index, line in enumerate(lines):
        words = line.split()
        if not words or not _GPU.fullmatch(words[0]):
            continue
        if any(_CELL.fullmatch(word) for word in words[1:]):
            raise ParseError(SOURCE, "matrix row found before any header line "
                                     "(expected a line naming the columns: GPU0 GPU1 ...)",
                             line=index + 1)
        if words[0] == "GPU0":
            return index
    raise ParseError(SOURCE, "no header line naming the device columns (GPU0 GPU1 ...) found")


def _tab_tokens(line: str) -> list[_Token]:
    """Tab-separated fields (stripped, empty ones kept) with their expanded start columns."""
    tokens, col = [], 0
    for part in line.split("\t"):
        lead = len(part) - len(part.lstrip())
        tokens.append(_Token(part.strip(), col + lead))
        col = (col + len(part)) // TAB * TAB + TAB
    return tokens


def _space_tokens(line: str, pattern: str) -> list[_Token]:
    return [_Token(m.group(), m.start()) for m in re.finditer(pattern, line.expandtabs(TAB))]


def _parse_header(line: str, lineno: int) -> _Header:
    """Split the header into device columns and trailing columns (CPU Affinity ...)."""
    if "\t" in line:
        raw = [t for t in _tab_tokens(line) if t.text]
    else:  # names like "CPU Affinity" hold single spaces; columns are 2+ spaces apart
        raw = _space_tokens(line, r"\S+(?: \S+)*")
    devices: list[_Token] = []
    trailers: list[_Token] = []
    for token in raw:
        for piece in _split_header_token(token, lineno):
            is_device = bool(_DEVICE.fullmatch(piece.text))
            if is_device and trailers:
                raise ParseError(SOURCE, f"header names device {piece.text!r} after the "
                                         f"{trailers[-1].text!r} column", line=lineno)
            (devices if is_device else trailers).append(piece)
    _check_unique([t.text for t in devices + trailers], lineno)
    return _Header(devices, trailers, lineno)


def _split_header_token(token: _Token, lineno: int) -> list[_Token]:
    """A header name, or a damaged one (``mlx5_1 CPU Affinity NUMA Affinity``) split apart.

    Known trailer names are peeled off the end; what is left must be one device name.
    """
    text, peeled = token.text, []
    while " " in text and text not in TRAILERS:
        name = next((n for n in TRAILERS if text.endswith(" " + n)), None)
        if name is None:
            break
        peeled.insert(0, name)
        text = text[: -len(name) - 1]
    if not peeled:
        return [token]
    if " " in text and text not in TRAILERS:
        raise ParseError(SOURCE, f"cannot split header name {token.text!r} into columns",
                         line=lineno)
    pieces, col = [], token.start
    for name in [text, *peeled]:
        pieces.append(_Token(name, col))
        col += len(name) + 1
    return pieces


def _check_unique(names: list[str], lineno: int) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ParseError(SOURCE, f"header names column {name!r} twice", line=lineno)
        seen.add(name)


@dataclass
class _Row:
    """One matrix row: its codes in column order and its trailing values (None when empty)."""

    label: str
    cells: list[str]
    tail: list[str | None]
    line: int


def _read_rows(lines: list[str], header: _Header) -> tuple[dict[str, _Row], int]:
    """Rows after the header up to the first blank or Legend line; also that line's index."""
    rows: dict[str, _Row] = {}
    index = header.line  # 1-based header line == 0-based index of the line after it
    while index < len(lines):
        line = lines[index]
        if not line.strip() or line.strip().startswith("Legend"):
            break
        row = _parse_row(line, index + 1, header)
        if row.label in rows:
            raise ParseError(SOURCE, f"two rows for {row.label}", line=index + 1)
        rows[row.label] = row
        index += 1
    return rows, index


def _parse_row(line: str, lineno: int, header: _Header) -> _Row:
    """One matrix row: label, one code per device column, then the trailing values."""
    tab_mode = "\t" in line
    tokens = _tab_tokens(line) if tab_mode else _space_tokens(line, r"\S+")
    label = tokens[0].text if tokens else ""
    if label not in header.names:
        raise ParseError(SOURCE, f"row label {label!r} is not one of the header's devices "
                                 f"({' '.join(header.names)})", line=lineno)
    values = tokens[1:]
    width = len(header.devices)
    cells = [t.text for t in values[:width]]
    _check_cells(label, cells, header, lineno)
    rest = values[width:]
    if tab_mode:
        tail = _tail_from_tabs([t.text for t in rest], header, label, lineno)
    else:
        last_end = values[width - 1].end
        tail = _tail_from_spaces(rest, last_end, header, label, lineno)
    return _Row(label, cells, tail, lineno)


def _check_cells(label: str, cells: list[str], header: _Header, lineno: int) -> None:
    """As many codes as device columns, every one known, X exactly on the diagonal."""
    width = len(header.devices)
    leading = next((i for i, cell in enumerate(cells) if not _CELL.fullmatch(cell)), len(cells))
    if leading < width:
        bad = cells[leading] if leading < len(cells) else ""
        if not bad or _AFFINITY.fullmatch(bad):
            raise ParseError(SOURCE, f"row {label} has {leading} matrix cells but the header "
                                     f"names {width} devices", line=lineno)
        raise ParseError(SOURCE, f"row {label}, column {header.names[leading]}: {bad!r} is not "
                                 f"a topology code ({', '.join(CODES)})", line=lineno)
    for column, cell in zip(header.names, cells, strict=True):
        if (cell == "X") != (column == label):
            raise ParseError(SOURCE, f"row {label}, column {column}: {cell!r} where the self "
                                     "cell X belongs only on the diagonal", line=lineno)


def _tail_from_tabs(tail: list[str], header: _Header, label: str, lineno: int) -> list[str | None]:
    """Tab-separated trailing values mapped onto the trailer columns.

    nvidia-smi pads with an empty field before its last value (``0-23\\t0\\t\\tN/A``); those
    padding fields are dropped. Missing values at the end (a right-stripped line) are None.
    """
    want = len(header.trailers)
    tail = list(tail)
    while len(tail) > want and len(tail) >= 2 and tail[-2] == "":
        del tail[-2]
    if len(tail) > want:
        _raise_too_many(tail, header, label, lineno)
    return [_value(v) for v in tail] + [None] * (want - len(tail))


def _tail_from_spaces(
    tail: list[_Token], last_end: int, header: _Header, label: str, lineno: int
) -> list[str | None]:
    """Space-separated trailing values; with fewer values than columns, placed by position."""
    want = len(header.trailers)
    if len(tail) > want:
        _raise_too_many([t.text for t in tail], header, label, lineno)
    if len(tail) == want:
        return [_value(t.text) for t in tail]
    starts = [t.start for t in header.trailers]
    if all(any(abs(t.start - s) <= 1 for s in starts) for t in tail):
        placed: list[str | None] = [None] * want
        for token in tail:
            placed[min(range(want), key=lambda i: abs(starts[i] - token.start))] = token.text
        return [_value(v) for v in placed]
    if all(t.start % TAB == 0 for t in tail):
        return _tail_from_tabs(_retab(tail, last_end), header, label, lineno)
    raise ParseError(SOURCE, f"row {label}: cannot tell which columns the values "
                             f"{' '.join(t.text for t in tail)!r} belong to", line=lineno)


def _retab(tail: list[_Token], last_end: int) -> list[str]:
    """Fields as nvidia-smi's tabs laid them out, from values at 8-column tab stops."""
    fields: list[str] = []
    end = last_end
    for token in tail:
        tabs = max(1, token.start // TAB - end // TAB)
        fields.extend([""] * (tabs - 1) + [token.text])
        end = token.end
    return fields


def _raise_too_many(tail: list[str], header: _Header, label: str, lineno: int) -> None:
    extra = [v for v in tail if _CELL.fullmatch(v)]
    if extra:
        raise ParseError(SOURCE, f"row {label} has more matrix cells than the header's "
                                 f"{len(header.devices)} devices", line=lineno)
    names = ", ".join(t.text for t in header.trailers) or "none"
    raise ParseError(SOURCE, f"row {label} has {len(tail)} values after the matrix but the "
                             f"header names {len(header.trailers)} such columns ({names})",
                     line=lineno)


def _value(text: str) -> str | None:
    return None if text in ("", "N/A") else text


def _check_complete(rows: dict[str, _Row], header: _Header) -> None:
    """Every device column has its row."""
    if not any(_GPU.fullmatch(label) for label in rows):
        raise ParseError(SOURCE, "no GPU rows after the header", line=header.line)
    missing = [name for name in header.names if name not in rows]
    if missing:
        raise ParseError(SOURCE, f"no row for {', '.join(missing)} (output truncated?)",
                         line=header.line)


def _nic_legend(lines: list[str]) -> dict[str, str]:
    """``NIC0`` -> ``mlx5_0`` from the "NIC Legend:" section, {} when there is none."""
    legend: dict[str, str] = {}
    inside = False
    for line in lines:
        if line.strip() == "NIC Legend:":
            inside = True
            continue
        match = _NIC_LEGEND.fullmatch(line) if inside else None
        if match:
            legend[match.group(1)] = match.group(2)
    return legend


def _build(header: _Header, rows: dict[str, _Row], nic_devices: dict[str, str]) -> TopoMatrix:
    names = header.names
    gpus = [n for n in names if _GPU.fullmatch(n)]
    per_column: dict[str, dict[str, str | None]] = {attr: {} for attr in TRAILERS.values()}
    for gpu in gpus:
        row = rows[gpu]
        for trailer, value in zip(header.trailers, row.tail, strict=True):
            attr = TRAILERS.get(trailer.text)
            if attr is not None:
                per_column[attr][gpu] = value
    return TopoMatrix(
        gpus=gpus,
        nics=[n for n in names if not _GPU.fullmatch(n)],
        nic_devices=nic_devices,
        links={
            label: {col: cell for col, cell in zip(names, rows[label].cells, strict=True)
                    if col != label}
            for label in names
        },
        cpu_affinity=_all_gpus(per_column["cpu_affinity"], gpus),
        numa_affinity=_all_gpus(per_column["numa_affinity"], gpus),
        gpu_numa_ids=_all_gpus(per_column["gpu_numa_ids"], gpus),
    )


def _all_gpus(values: dict[str, str | None], gpus: list[str]) -> dict[str, str | None]:
    """``values`` with a None entry for every GPU the column did not cover."""
    return {gpu: values.get(gpu) for gpu in gpus}
