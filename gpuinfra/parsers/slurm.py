"""What Slurm's own tools print about nodes and GRES (Slurm 21.08 to 23.11 formats).

- ``slurmd -G`` (the node's merged GRES configuration, then exit): one line per GRES record,
  e.g. ``slurmd-n1: Gres Name=gpu Type=h100 Count=1 Index=0 ID=7696487 File=/dev/nvidia0
  Cores=0-1 CoreCnt=2 Links=-1,18``; ``error:`` lines when gres.conf is wrong (an invalid
  ``Cores=`` is only an error line: the exit code stays 0).
- ``sinfo -N -h -o '%N|%T|%G|%E'``: node, state (``idle``, ``mixed``, ``drained``, ``down*``...),
  configured GRES (``gpu:h100:8(S:0-1)``), reason (``none``).
- ``sinfo --version`` (and ``scontrol --version``): the package and its version on one line,
  ``slurm 22.05.8`` as SchedMD names it, ``slurm-wlm 24.11.5`` as Debian 13's build does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SLURMD_G = "slurmd -G"
SINFO = "sinfo -N -h -o '%N|%T|%G|%E'"
SINFO_FORMAT = "%N|%T|%G|%E"
SLURM_VERSION = "sinfo --version"
_VERSION_LINE = re.compile(r"^slurm(?:-wlm)?\s+(\d+)\.(\d+)(?:\.\S+)?$")
_GRES_LINE = re.compile(r"(?:^|:\s)Gres (Name=\S+.*)$")
_ERROR = re.compile(r"(?:^|:\s)(error|fatal): (.*)$")


@dataclass(frozen=True)
class GresRecord:
    """One record of ``slurmd -G``: name, type, count, device file, cores and links."""

    name: str
    type: str | None
    count: int
    index: int | None
    file: str | None
    cores: str | None
    links: tuple[int, ...] | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "count": self.count, "index": self.index,
                "file": self.file, "cores": self.cores,
                "links": list(self.links) if self.links is not None else None}


@dataclass
class SlurmdGres:
    records: list[GresRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def of(self, name: str) -> list[GresRecord]:
        return [r for r in self.records if r.name == name]

    def to_json(self) -> dict[str, Any]:
        return {"records": [r.to_json() for r in self.records], "errors": list(self.errors)}


def _fields(text: str) -> dict[str, str]:
    out = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if eq:
            out[key] = value
    return out


def _null(value: str | None) -> str | None:
    return None if value in (None, "", "(null)", "N/A") else value


def parse_slurmd_gres(text: str) -> SlurmdGres:
    """Read ``slurmd -G`` output (records and error lines)."""
    result = SlurmdGres()
    for no, line in enumerate(clean_lines(text, SLURMD_G), 1):
        error = _ERROR.search(line)
        if error:
            result.errors.append(f"{error.group(1)}: {error.group(2)}")
            continue
        match = _GRES_LINE.search(line)
        if not match:
            continue
        values = _fields(match.group(1))
        try:
            count = int(values.get("Count", "0"))
            index = int(values["Index"]) if "Index" in values else None
            links_text = _null(values.get("Links"))
            links = tuple(int(v) for v in links_text.split(",")) if links_text else None
        except ValueError as exc:
            raise ParseError(SLURMD_G, f"unreadable GRES record ({exc})", no) from None
        result.records.append(GresRecord(
            name=values["Name"], type=_null(values.get("Type")), count=count, index=index,
            file=_null(values.get("File")), cores=_null(values.get("Cores")), links=links))
    return result


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str
    gres: str
    reason: str

    @property
    def base_state(self) -> str:
        """``idle`` for ``idle``/``idle*``/``idle~``: the state without Slurm's flag suffix."""
        return self.state.rstrip("*~#!%$@^-+")

    @property
    def responding(self) -> bool:
        return not self.state.endswith("*")

    def gres_counts(self) -> dict[str, int]:
        """``{"gpu:h100": 8, "mps": 800}`` from ``gpu:h100:8(S:0-1),mps:800``."""
        return gres_counts(self.gres)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "gres": self.gres,
                "reason": self.reason}


def gres_counts(gres: str) -> dict[str, int]:
    """A Slurm GRES string as ``{name[:type]: count}``; ``(null)`` is empty.

    ``gpu:h100:8(S:0-1),shard:32`` -> ``{"gpu:h100": 8, "shard": 32}``.
    """
    out: dict[str, int] = {}
    if _null(gres) is None:
        return out
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = item.strip().split(":")
        if len(parts) >= 2 and parts[-1].isdigit():
            out[":".join(parts[:-1])] = out.get(":".join(parts[:-1]), 0) + int(parts[-1])
        elif parts and parts[0]:
            out[":".join(parts)] = out.get(":".join(parts), 0) + 1
    return out


def parse_sinfo_nodes(text: str) -> dict[str, SlurmNode]:
    """Read ``sinfo -N -h -o '%N|%T|%G|%E'``; a node in several partitions appears once."""
    nodes: dict[str, SlurmNode] = {}
    for no, line in enumerate(clean_lines(text, SINFO), 1):
        if not line.strip():
            continue
        parts = line.split("|", 3)
        if len(parts) != 4 or not parts[0]:
            raise ParseError(SINFO, f"expected NODE|STATE|GRES|REASON, got {line!r}", no)
        name, state, gres, reason = (p.strip() for p in parts)
        nodes[name] = SlurmNode(name, state, gres, reason)
    return nodes


_PING = re.compile(r"Slurmctld\((\w+)\) at (\S+) is (\w+)")


def parse_scontrol_ping(text: str) -> dict[str, tuple[str, str]]:
    """``scontrol ping`` -> {controller host: (its role, "UP"|"DOWN")}: one line per
    SlurmctldHost in 22.05 ("Slurmctld(primary) at lab-head is UP", "Slurmctld(backup) at
    lab-head2 is DOWN"). Lines of no controller are ignored; none at all is an empty dict."""
    return {m.group(2): (m.group(1), m.group(3)) for m in _PING.finditer(text)}


def parse_slurm_version(text: str) -> tuple[int, int]:
    """The major release of ``sinfo --version`` (``slurm 22.05.8`` -> ``(22, 5)``,
    ``slurm-wlm 24.11.5`` -> ``(24, 11)``); ParseError for anything else."""
    for line in clean_lines(text, SLURM_VERSION):
        found = _VERSION_LINE.match(line.strip())
        if found:
            return int(found[1]), int(found[2])
    shown = " ".join(text.split())[:80]
    raise ParseError(SLURM_VERSION, f"no 'slurm MAJOR.MINOR.PATCH' line in {shown!r}")
