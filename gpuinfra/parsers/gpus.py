"""The GPU list: `nvidia-smi --query-gpu=... --format=csv` or `nvidia-smi -L`.

Two outputs name the GPUs of a host:

- ``nvidia-smi --query-gpu=index,name,memory.total --format=csv``: a header line
  (``index, name, memory.total [MiB]``) then one row per GPU (``0, NVIDIA H200, 143771 MiB``).
  ``--format=csv,noheader[,nounits]`` drops the header; pass the queried names as ``fields``.
- ``nvidia-smi -L``: ``GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)``, each followed by its MIG
  devices (``  MIG 3g.40gb     Device  0: (UUID: MIG-...)``) when MIG is on.

:func:`parse_gpus` tells them apart by their first line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.knowledge.gpus import model_for_smi_name
from gpuinfra.parsers._text import clean_lines

SOURCE = "nvidia-smi --query-gpu / -L"
_CSV_SOURCE = "nvidia-smi --query-gpu --format=csv"
_LIST_SOURCE = "nvidia-smi -L"

# The message nvidia-smi prints (and exits non-zero) on a host without GPUs.
NO_DEVICES = "No devices were found"

_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^\s)]+)\)$")
_MIG_LINE = re.compile(
    r"^\s+MIG (?P<profile>\S+)\s+Device\s+(?P<device>\d+): \(UUID: (?P<uuid>[^\s)]+)\)$"
)
# A header cell: a query field name, with its unit in brackets when it has one.
_HEADER_CELL = re.compile(r"^(?P<name>[a-z][a-z0-9_.]*)(?: \[(?P<unit>[^\]]+)\])?$")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?\d+\.\d+$")
# What nvidia-smi prints for a value it cannot give.
_MISSING = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]",
            "[GPU is lost]", "[Requested functionality has been deprecated]"}

# Fields with no unit in the header whose values are still counts or numbers.
_UNITLESS_NUMERIC_PREFIXES = (
    "index", "count", "temperature.", "pcie.link.gen.", "pcie.link.width.", "ecc.errors.",
    "retired_pages.", "remapped_rows.", "encoder.stats.", "module_id",
)
# Fields that carry a unit (MiB, W, MHz, %) when queried without ``nounits``.
_UNIT_PREFIXES = ("memory.", "clocks.", "utilization.")
_UNIT_FIELDS = {
    "fan.speed", "power.draw", "power.draw.average", "power.draw.instant", "power.limit",
    "enforced.power.limit", "power.default_limit", "power.min_limit", "power.max_limit",
}
# Query fields whose names have neither a dot nor an underscore (`nvidia-smi --help-query-gpu`).
_PLAIN_FIELDS = {"timestamp", "count", "name", "serial", "uuid", "index", "pstate"}
_NAME_FIELDS = ("name", "gpu_name")
_UUID_FIELDS = ("uuid", "gpu_uuid")


@dataclass
class MigDevice:
    """One MIG device under a GPU in `nvidia-smi -L` (profile "3g.40gb", device 0, MIG UUID)."""

    profile: str
    device: int
    uuid: str

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "device": self.device, "uuid": self.uuid}


@dataclass
class Gpu:
    """One GPU.

    index: the nvidia-smi index (the ``index`` column, else the row order).
    model: the key of gpuinfra.knowledge.gpus.GPU_MODELS for ``name``, None if unknown.
    fields: the other CSV columns, by field name without unit; numbers as int/float, missing
        values (``[N/A]``, ``[Not Supported]``) as None.
    """

    index: int
    name: str | None = None
    uuid: str | None = None
    model: str | None = None
    mig_devices: list[MigDevice] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "name": self.name, "uuid": self.uuid, "model": self.model,
            "mig_devices": [m.to_json() for m in self.mig_devices], **self.fields,
        }


@dataclass
class GpuList:
    """GPUs in index order. ``format``: "csv", "list" (`-L`) or "none" (no devices found)."""

    format: str
    gpus: list[Gpu]

    def to_json(self) -> dict[str, Any]:
        """``{"gpus": [{"index", "name", "uuid", "model", "mig_devices": [...], **fields}]}``."""
        return {"gpus": [g.to_json() for g in self.gpus]}


def parse_gpus(text: str, fields: list[str] | None = None) -> GpuList:
    """Read `nvidia-smi --query-gpu ... --format=csv` or `nvidia-smi -L` output.

    ``fields``: the names given to ``--query-gpu`` when the CSV has no header
    (``--format=csv,noheader[,nounits]``); a header that repeats them is recognised and skipped.
    Raises ParseError for anything else, naming the line.
    """
    lines = clean_lines(text, SOURCE)
    numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if not numbered:
        raise ParseError(SOURCE, "empty output (no GPU lines)")
    first_no, first = numbered[0]
    if first.strip() == NO_DEVICES:
        return GpuList("none", [])
    if first.startswith("GPU "):
        return GpuList("list", _parse_list(numbered))
    if fields is None and "," not in first:
        raise ParseError(SOURCE, f"not nvidia-smi --query-gpu CSV or -L output: {first[:60]!r}",
                         line=first_no)
    return GpuList("csv", _parse_csv(numbered, fields))


# --- nvidia-smi -L -------------------------------------------------------------------------

def _parse_list(numbered: list[tuple[int, str]]) -> list[Gpu]:
    gpus: list[Gpu] = []
    for no, line in numbered:
        gpu_match = _GPU_LINE.match(line)
        if gpu_match:
            gpus.append(_gpu_from_list(gpu_match, gpus, no))
            continue
        mig_match = _MIG_LINE.match(line)
        if mig_match and gpus:
            gpus[-1].mig_devices.append(MigDevice(
                mig_match["profile"], int(mig_match["device"]), mig_match["uuid"]))
            continue
        raise ParseError(_LIST_SOURCE, f"expected a GPU or MIG device line, got {line[:60]!r}",
                         line=no)
    return gpus


def _gpu_from_list(match: re.Match[str], gpus: list[Gpu], no: int) -> Gpu:
    index = int(match["index"])
    if any(g.index == index for g in gpus):
        raise ParseError(_LIST_SOURCE, f"GPU {index} listed twice", line=no)
    return Gpu(index=index, name=match["name"], uuid=match["uuid"],
               model=_model_key(match["name"]))


# --- nvidia-smi --query-gpu --format=csv ---------------------------------------------------

def _parse_csv(numbered: list[tuple[int, str]], fields: list[str] | None) -> list[Gpu]:
    first_no, first = numbered[0]
    header = _header(first, first_no) if _looks_like_header(first) else None
    if header is not None:
        names, units = header
        if fields is not None and names != list(fields):
            raise ParseError(_CSV_SOURCE, f"header {names} does not match fields {list(fields)}",
                             line=first_no)
        rows = numbered[1:]
    elif fields is not None:
        names, units = list(fields), [None] * len(fields)
        rows = numbered
    else:
        raise ParseError(_CSV_SOURCE, "CSV without a header line (--format=csv,noheader): "
                         "pass the queried fields=[...]", line=first_no)
    if not rows:
        raise ParseError(_CSV_SOURCE, "header but no GPU rows (truncated output?)", line=first_no)
    gpus = [_gpu_from_row(no, line, order, names, units) for order, (no, line) in enumerate(rows)]
    _check_unique_indices(gpus, rows)
    return gpus


def _looks_like_header(line: str) -> bool:
    """Every cell a field name: dotted or with an underscore, or one of the few plain ones."""
    for cell in line.split(","):
        match = _HEADER_CELL.match(cell.strip())
        if not match:
            return False
        name = match["name"]
        if "." not in name and "_" not in name and name not in _PLAIN_FIELDS:
            return False
    return True


def _header(line: str, no: int) -> tuple[list[str], list[str | None]]:
    names: list[str] = []
    units: list[str | None] = []
    for cell in line.split(","):
        match = _HEADER_CELL.match(cell.strip())
        assert match is not None  # _looks_like_header checked every cell
        if match["name"] in names:
            raise ParseError(_CSV_SOURCE, f"field {match['name']!r} appears twice", line=no)
        names.append(match["name"])
        units.append(match["unit"])
    return names, units


def _gpu_from_row(no: int, line: str, order: int, names: list[str],
                  units: list[str | None]) -> Gpu:
    cells = [cell.strip() for cell in line.split(",")]
    if len(cells) != len(names):
        raise ParseError(_CSV_SOURCE, f"{len(cells)} values for {len(names)} fields "
                         "(truncated line, or a value containing a comma)", line=no)
    values = {name: _value(name, unit, cell, no)
              for name, unit, cell in zip(names, units, cells, strict=True)}
    index = values.pop("index", order)
    if not isinstance(index, int):
        raise ParseError(_CSV_SOURCE, f"GPU index is not a number: {index!r}", line=no)
    name = _pop_first(values, _NAME_FIELDS)
    uuid = _pop_first(values, _UUID_FIELDS)
    model = _model_key(name) if isinstance(name, str) else None
    return Gpu(index=index, name=name, uuid=uuid, model=model, fields=values)


def _pop_first(values: dict[str, Any], keys: tuple[str, ...]) -> Any:
    found = None
    for key in keys:
        if key in values:
            value = values.pop(key)
            found = value if found is None else found
    return found


def _value(name: str, unit: str | None, cell: str, no: int) -> Any:
    """One CSV value: None when missing, a number for numeric fields, else the string."""
    if cell in _MISSING:
        return None
    if unit is not None:
        return _number_with_unit(name, unit, cell, no)
    if _is_unit_field(name):
        # noheader output: the unit may still be on the value (no ``nounits``).
        number = cell.rsplit(" ", 1)[0] if " " in cell else cell
        return _number(name, number, no)
    if name.startswith(_UNITLESS_NUMERIC_PREFIXES) and _INT.match(cell):
        return int(cell)
    return cell


def _number_with_unit(name: str, unit: str, cell: str, no: int) -> int | float:
    number = cell.removesuffix(unit).strip() if cell.endswith(unit) else cell
    return _number(name, number, no)


def _number(name: str, text: str, no: int) -> int | float:
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    raise ParseError(_CSV_SOURCE, f"{name}: expected a number, got {text!r}", line=no)


def _is_unit_field(name: str) -> bool:
    return name in _UNIT_FIELDS or name.startswith(_UNIT_PREFIXES)


def _check_unique_indices(gpus: list[Gpu], rows: list[tuple[int, str]]) -> None:
    seen: set[int] = set()
    for gpu, (no, _) in zip(gpus, rows, strict=True):
        if gpu.index in seen:
            raise ParseError(_CSV_SOURCE, f"GPU {gpu.index} listed twice", line=no)
        seen.add(gpu.index)


def _model_key(name: str) -> str | None:
    model = model_for_smi_name(name)
    return model.key if model is not None else None
