"""MIG listings: `nvidia-smi mig -lgip`, `-lgi`, `-lcip`, `-lci` and `-lgipp`.

The first four print a boxed table whose title names the listing::

    +-----------------------------------------------------------------------------+
    | GPU instance profiles:                                                      |
    | GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |
    |                              Free/Total   GiB              CE    JPEG  OFA  |
    |=============================================================================|
    |   0  MIG 1g.10gb       19     7/7        9.75       No     16     1     0   |
    |                                                             1     1     0   |
    +-----------------------------------------------------------------------------+

Each record sits between ``+---+`` borders: one main row, and for the profile listings one
continuation row (the second line of the two-line header). ``-lgipp`` prints one line per
profile (``GPU  0 Profile ID 14 Placements: {0,1,2,3}:1``). Without MIG, ``-lgi``/``-lci``
print ``No MIG-enabled devices found.``; so did ``-lgip`` on driver 460
(tests/fixtures/real/nvidia-smi-mig-lgip/a100-pcie-40gb-mig-lgip-mig-disabled.txt), but driver
580 lists the profiles of a MIG-capable GPU whose MIG mode is Disabled
(tests/fixtures/device/h100-80gb-hbm3-vm-drv580.159.04: `mig -lgip` and `-lgipp` print the
tables, `mig -lgi` the message, `--query-gpu=mig.mode.current` "Disabled"). A profile or
placement listing therefore does not say whether MIG is on: ``mig_enabled`` is None there.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "nvidia-smi mig"

NO_MIG = "No MIG-enabled devices found."
_NO_GPU_INSTANCES = "No GPU instances found"
_NO_COMPUTE_INSTANCES = "No compute instances found"

# Table title -> listing kind.
_TITLES = {
    "GPU instance profiles:": "gpu-instance-profiles",
    "GPU instances:": "gpu-instances",
    "Compute instance profiles:": "compute-instance-profiles",
    "Compute instances:": "compute-instances",
}
_PLACEMENTS = re.compile(
    r"^GPU\s+(?P<gpu>\d+)\s+Profile ID\s+(?P<profile_id>\d+)\s+Placements?\s*:\s*"
    r"\{(?P<starts>\d+(?:\s*,\s*\d+)*)\}:(?P<size>\d+)$"
)
_BORDER = re.compile(r"^\+-+\+$")
_RULE = re.compile(r"^\|=+\|$")
_FREE_TOTAL = re.compile(r"^(\d+)/(\d+)$")
_PLACEMENT = re.compile(r"^(\d+):(\d+)$")


@dataclass
class GpuInstanceProfile:
    """One row of `mig -lgip`: a profile, its free/total instances and its resources."""

    gpu: int
    profile: str
    profile_id: int
    free: int
    total: int
    memory_gib: float
    p2p: bool
    sm: int
    dec: int
    enc: int
    ce: int
    jpeg: int
    ofa: int


@dataclass
class GpuInstance:
    """One row of `mig -lgi`: an existing GPU instance and its placement (start:size slices)."""

    gpu: int
    profile: str
    profile_id: int
    instance_id: int
    placement_start: int
    placement_size: int


@dataclass
class ComputeInstanceProfile:
    """One row of `mig -lcip`; ``default`` is the ``*`` after the profile ID."""

    gpu: int
    gpu_instance_id: int
    profile: str
    profile_id: int
    default: bool
    free: int
    total: int
    sm: int
    dec: int
    enc: int
    ofa: int
    ce: int
    jpeg: int


@dataclass
class ComputeInstance:
    """One row of `mig -lci`: an existing compute instance inside a GPU instance."""

    gpu: int
    gpu_instance_id: int
    profile: str
    profile_id: int
    instance_id: int
    placement_start: int
    placement_size: int


@dataclass
class Placement:
    """One line of `mig -lgipp`: where instances of a profile may start, and their size."""

    gpu: int
    profile_id: int
    starts: list[int]
    size: int


MigEntry = GpuInstanceProfile | GpuInstance | ComputeInstanceProfile | ComputeInstance | Placement


@dataclass
class MigListing:
    """A MIG listing.

    kind: "gpu-instance-profiles" (-lgip), "gpu-instances" (-lgi), "compute-instance-profiles"
        (-lcip), "compute-instances" (-lci), "placements" (-lgipp) or "none" (MIG disabled).
    mig_enabled: False for "No MIG-enabled devices found."; None for the GPU instance profile
        and placement listings (-lgip, -lgipp), which driver 580 prints with MIG disabled
        (module doc); True for the others (-lgi, -lcip, -lci), which need MIG on.
    """

    kind: str
    mig_enabled: bool | None
    entries: list[MigEntry]

    def to_json(self) -> dict[str, Any]:
        """``{"kind": str, "mig_enabled": bool | None, "entries": [row fields as a dict, ...]}``."""
        return {"kind": self.kind, "mig_enabled": self.mig_enabled,
                "entries": [asdict(e) for e in self.entries]}


def parse_mig(text: str) -> MigListing:
    """Read any `nvidia-smi mig -lgip/-lgi/-lcip/-lci/-lgipp` output (see the module doc)."""
    numbered = [(n, line) for n, line in enumerate(clean_lines(text, SOURCE), 1) if line.strip()]
    if not numbered:
        raise ParseError(SOURCE, "empty output")
    first_no, first = numbered[0]
    message = first.strip()
    if message == NO_MIG:
        _expect_only_line(numbered)
        return MigListing("none", False, [])
    if message.startswith(_NO_GPU_INSTANCES):
        _expect_only_line(numbered)
        return MigListing("gpu-instances", True, [])
    if message.startswith(_NO_COMPUTE_INSTANCES):
        _expect_only_line(numbered)
        return MigListing("compute-instances", True, [])
    if message.startswith("GPU "):
        return MigListing("placements", None, _parse_placements(numbered))
    if _BORDER.match(message):
        return _parse_table(numbered)
    raise ParseError(SOURCE, f"not nvidia-smi mig output: {message[:60]!r}", line=first_no)


def available_profiles(listing: MigListing) -> dict[int, dict[str, int]]:
    """GPU index -> profile name ("1g.10gb") -> total instances, from a `-lgip` listing.

    A listing of a host without MIG ("none") gives ``{}``; any other kind raises ParseError.
    """
    if listing.kind == "none":
        return {}
    if listing.kind != "gpu-instance-profiles":
        raise ParseError(f"{SOURCE} -lgip",
                         f"available profiles need a -lgip listing, not {listing.kind}")
    result: dict[int, dict[str, int]] = {}
    for entry in listing.entries:
        assert isinstance(entry, GpuInstanceProfile)
        result.setdefault(entry.gpu, {})[entry.profile] = entry.total
    return result


def _expect_only_line(numbered: list[tuple[int, str]]) -> None:
    if len(numbered) > 1:
        no, line = numbered[1]
        raise ParseError(SOURCE, f"unexpected text after the message: {line[:60]!r}", line=no)


# --- -lgipp ---------------------------------------------------------------------------------

def _parse_placements(numbered: list[tuple[int, str]]) -> list[MigEntry]:
    entries: list[MigEntry] = []
    for no, line in numbered:
        match = _PLACEMENTS.match(line.strip())
        if not match:
            raise ParseError(f"{SOURCE} -lgipp", f"expected 'GPU n Profile ID n Placements: "
                             f"{{...}}:n', got {line.strip()[:60]!r}", line=no)
        starts = [int(s) for s in match["starts"].split(",")]
        entries.append(Placement(int(match["gpu"]), int(match["profile_id"]), starts,
                                 int(match["size"])))
    return entries


# --- boxed tables ---------------------------------------------------------------------------

def _parse_table(numbered: list[tuple[int, str]]) -> MigListing:
    kind, body = _split_header(numbered)
    records = _records(body, kind)
    if not records:
        raise ParseError(_source(kind), "table header without rows (truncated output?)",
                         line=numbered[-1][0])
    reader = _READERS[kind]
    enabled = None if kind == "gpu-instance-profiles" else True
    return MigListing(kind, enabled, [reader(record) for record in records])


def _split_header(numbered: list[tuple[int, str]]) -> tuple[str, list[tuple[int, str]]]:
    """The listing kind (from the title row) and the lines after the ``|=====|`` rule."""
    title_no, title_line = numbered[1] if len(numbered) > 1 else numbered[0]
    title = _cells_text(title_line)
    kind = _TITLES.get(title)
    if kind is None:
        raise ParseError(SOURCE, f"unknown MIG table title {title[:60]!r}", line=title_no)
    for position, (_, line) in enumerate(numbered):
        if _RULE.match(line.strip()):
            return kind, numbered[position + 1:]
    raise ParseError(_source(kind), "no '|====|' line under the table header (truncated?)",
                     line=numbered[-1][0])


def _records(body: list[tuple[int, str]], kind: str) -> list[list[tuple[int, list[str]]]]:
    """Rows grouped by the ``+---+`` borders; each row as (line number, cells)."""
    records: list[list[tuple[int, list[str]]]] = []
    current: list[tuple[int, list[str]]] = []
    for no, line in body:
        stripped = line.strip()
        if _BORDER.match(stripped):
            if not current:
                raise ParseError(_source(kind), "empty record between borders", line=no)
            records.append(current)
            current = []
        elif stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1:
            current.append((no, stripped[1:-1].split()))
        else:
            raise ParseError(_source(kind), f"not a table row: {stripped[:60]!r}", line=no)
    if current:
        raise ParseError(_source(kind), "last record has no closing border (truncated output?)",
                         line=current[-1][0])
    return records


def _cells_text(line: str) -> str:
    stripped = line.strip()
    if not (stripped.startswith("|") and stripped.endswith("|")):
        return stripped
    return " ".join(stripped[1:-1].split())


def _source(kind: str) -> str:
    flags = {"gpu-instance-profiles": "-lgip", "gpu-instances": "-lgi",
             "compute-instance-profiles": "-lcip", "compute-instances": "-lci"}
    return f"{SOURCE} {flags[kind]}"


def _read_gpu_instance_profile(record: list[tuple[int, list[str]]]) -> MigEntry:
    kind = "gpu-instance-profiles"
    (no, main), cont = _two_rows(record, kind)
    gpu, profile, rest = _gpu_and_profile(main, 0, kind, no)
    _expect_count(rest, 7, "ID, Free/Total, Memory, P2P, SM, DEC, ENC", kind, no)
    _expect_count(cont[1], 3, "CE, JPEG, OFA", kind, cont[0])
    free, total = _free_total(rest[1], kind, no)
    ints = [_int(v, kind, no) for v in (rest[0], *rest[4:7])]
    ce, jpeg, ofa = (_int(v, kind, cont[0]) for v in cont[1])
    return GpuInstanceProfile(
        gpu=gpu, profile=profile, profile_id=ints[0], free=free, total=total,
        memory_gib=_float(rest[2], kind, no), p2p=_yes_no(rest[3], kind, no),
        sm=ints[1], dec=ints[2], enc=ints[3], ce=ce, jpeg=jpeg, ofa=ofa,
    )


def _read_gpu_instance(record: list[tuple[int, list[str]]]) -> MigEntry:
    kind = "gpu-instances"
    no, main = _one_row(record, kind)
    gpu, profile, rest = _gpu_and_profile(main, 0, kind, no)
    _expect_count(rest, 3, "Profile ID, Instance ID, Placement", kind, no)
    start, size = _placement(rest[2], kind, no)
    return GpuInstance(gpu=gpu, profile=profile, profile_id=_int(rest[0], kind, no),
                       instance_id=_int(rest[1], kind, no), placement_start=start,
                       placement_size=size)


def _read_compute_instance_profile(record: list[tuple[int, list[str]]]) -> MigEntry:
    kind = "compute-instance-profiles"
    (no, main), cont = _two_rows(record, kind)
    gpu, profile, rest = _gpu_and_profile(main, 1, kind, no)
    _expect_count(rest, 6, "Profile ID, Free/Total, SM, DEC, ENC, OFA", kind, no)
    _expect_count(cont[1], 2, "CE, JPEG", kind, cont[0])
    profile_id = rest[0].removesuffix("*")
    free, total = _free_total(rest[1], kind, no)
    sm, dec, enc, ofa = (_int(v, kind, no) for v in rest[2:6])
    ce, jpeg = (_int(v, kind, cont[0]) for v in cont[1])
    return ComputeInstanceProfile(
        gpu=gpu, gpu_instance_id=_int(main[1], kind, no), profile=profile,
        profile_id=_int(profile_id, kind, no), default=rest[0].endswith("*"), free=free,
        total=total, sm=sm, dec=dec, enc=enc, ofa=ofa, ce=ce, jpeg=jpeg,
    )


def _read_compute_instance(record: list[tuple[int, list[str]]]) -> MigEntry:
    kind = "compute-instances"
    no, main = _one_row(record, kind)
    gpu, profile, rest = _gpu_and_profile(main, 1, kind, no)
    _expect_count(rest, 3, "Profile ID, Instance ID, Placement", kind, no)
    start, size = _placement(rest[2], kind, no)
    return ComputeInstance(gpu=gpu, gpu_instance_id=_int(main[1], kind, no), profile=profile,
                           profile_id=_int(rest[0], kind, no),
                           instance_id=_int(rest[1], kind, no), placement_start=start,
                           placement_size=size)


_READERS = {
    "gpu-instance-profiles": _read_gpu_instance_profile,
    "gpu-instances": _read_gpu_instance,
    "compute-instance-profiles": _read_compute_instance_profile,
    "compute-instances": _read_compute_instance,
}


def _one_row(record: list[tuple[int, list[str]]], kind: str) -> tuple[int, list[str]]:
    if len(record) != 1:
        raise ParseError(_source(kind), f"expected 1 row per record, got {len(record)}",
                         line=record[0][0])
    return record[0]


def _two_rows(record: list[tuple[int, list[str]]], kind: str
              ) -> tuple[tuple[int, list[str]], tuple[int, list[str]]]:
    if len(record) != 2:
        raise ParseError(_source(kind), f"expected 2 rows per record (row and continuation), "
                         f"got {len(record)}", line=record[0][0])
    return record[0], record[1]


def _gpu_and_profile(cells: list[str], extra_ids: int, kind: str, no: int
                     ) -> tuple[int, str, list[str]]:
    """GPU index, profile name (without "MIG ") and the cells after the name.

    ``extra_ids``: how many ID columns sit between the GPU and the name (the GPU instance ID
    in the compute-instance listings).
    """
    name_at = 1 + extra_ids
    if len(cells) <= name_at + 1:
        raise ParseError(_source(kind), f"row too short: {' '.join(cells)!r}", line=no)
    gpu = _int(cells[0], kind, no)
    if cells[name_at] == "MIG":
        return gpu, cells[name_at + 1], cells[name_at + 2:]
    return gpu, cells[name_at], cells[name_at + 1:]


def _expect_count(cells: list[str], count: int, what: str, kind: str, no: int) -> None:
    if len(cells) != count:
        raise ParseError(_source(kind), f"expected {count} values ({what}), got "
                         f"{len(cells)}: {' '.join(cells)!r}", line=no)


def _int(value: str, kind: str, no: int) -> int:
    if not re.fullmatch(r"[0-9]+", value):
        raise ParseError(_source(kind), f"expected a number, got {value!r}", line=no)
    return int(value)


def _float(value: str, kind: str, no: int) -> float:
    if not re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", value):
        raise ParseError(_source(kind), f"expected a size in GiB, got {value!r}", line=no)
    return float(value)


def _yes_no(value: str, kind: str, no: int) -> bool:
    if value not in ("Yes", "No"):
        raise ParseError(_source(kind), f"expected Yes or No, got {value!r}", line=no)
    return value == "Yes"


def _free_total(value: str, kind: str, no: int) -> tuple[int, int]:
    match = _FREE_TOTAL.match(value)
    if not match:
        raise ParseError(_source(kind), f"expected Free/Total like 7/7, got {value!r}", line=no)
    return int(match[1]), int(match[2])


def _placement(value: str, kind: str, no: int) -> tuple[int, int]:
    match = _PLACEMENT.match(value)
    if not match:
        raise ParseError(_source(kind), f"expected a placement like 0:1, got {value!r}", line=no)
    return int(match[1]), int(match[2])
