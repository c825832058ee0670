"""RoCE GID tables: `show_gids` (MLNX_OFED/DOCA's script).

::

    DEV     PORT    INDEX   GID                                     IPv4            VER     DEV
    ---     ----    -----   ---                                     ------------    ---     ---
    mlx5_0  1       3       fe80:0000:0000:0000:1186:a6b1:3f0b:c441                 v2      ens1f0
    mlx5_0  1       5       0000:0000:0000:0000:0000:ffff:ac13:003c 172.19.0.60     v2      ens1f0
    n_gids_found=6

The last line counts the rows: a capture whose count differs from its rows was cut, or
filtered with grep (then the header and the count are gone too).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import ELISION, clean_lines

SOURCE = "show_gids"

_ROW = re.compile(r"^(?P<dev>\S+)\s+(?P<port>\d+)\s+(?P<index>\d+)\s+(?P<gid>[0-9a-fA-F:]{39})"
                  r"(?:\s+(?P<ipv4>\d{1,3}(?:\.\d{1,3}){3}))?\s+(?P<ver>v[12])"
                  r"(?:\s+(?P<netdev>\S+))?$")
_COUNT = re.compile(r"^n_gids_found=(?P<n>\d+)$")
_HEADER = re.compile(r"^DEV\s+PORT\s+INDEX\s+GID")


@dataclass(frozen=True)
class Gid:
    device: str
    port: int
    index: int
    gid: str
    ipv4: str | None
    version: str
    netdev: str | None


@dataclass
class GidTable:
    """The rows read, and the cuts: a count line that disagrees, no count line, no header."""

    gids: list[Gid] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)

    def of(self, device: str) -> list[Gid]:
        return [g for g in self.gids if g.device == device]

    def to_json(self) -> dict[str, Any]:
        """``{"gids": [{"device", "port", "index", "gid", "ipv4", "version", "netdev"}],
        "cuts": [...]}``."""
        return {"gids": [asdict(g) for g in self.gids], "cuts": list(self.cuts)}


def parse_show_gids(text: str) -> GidTable:
    table = GidTable()
    header = False
    count: int | None = None
    for no, line in enumerate(clean_lines(text, SOURCE), 1):
        stripped = line.strip()
        if not stripped or set(stripped.split()) <= {"---", "----", "-----", "------------"}:
            continue
        if _HEADER.match(stripped):
            header = True
        elif ELISION.match(stripped):
            table.cuts.append(f"line {no}: {stripped!r} (rows left out by the poster)")
        elif (match := _COUNT.match(stripped)) is not None:
            count = int(match["n"])
        elif (row := _ROW.match(stripped)) is not None:
            table.gids.append(Gid(row["dev"], int(row["port"]), int(row["index"]),
                                  row["gid"].lower(), row["ipv4"], row["ver"], row["netdev"]))
        elif not table.gids and not header:
            raise ParseError(SOURCE, f"not a show_gids line: {stripped[:60]!r}", line=no)
        else:
            table.cuts.append(f"line {no}: {stripped[:60]!r} is not a whole GID row (cut "
                              "mid-way?): not judged")
    if count is None:
        table.cuts.append("no 'n_gids_found=' line: the listing was cut or filtered")
    elif count != len(table.gids):
        table.cuts.append(f"n_gids_found={count} but {len(table.gids)} rows: rows are missing")
    if not header and table.gids:
        table.cuts.append("no header line: the listing was filtered (grep)")
    return table
