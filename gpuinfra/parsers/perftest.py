"""perftest's ``ib_write_bw`` client output: one NIC's RDMA write bandwidth.

Shape (perftest's RESULT_LINE / RESULT_FMT; real runs in tests/fixtures/perftest)::

     WARNING: BW peak won't be measured in this run.
    ---------------------------------------------------------------------------------------
                        RDMA_Write BW Test
     Dual-port       : OFF            Device         : rocep1s0f0
     ...
     Link type       : Ethernet
    ---------------------------------------------------------------------------------------
     #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]    MsgRate[Mpps]
     65536      882805           0.00               92.57                0.176554

Units: ``--report_gbits`` prints Gb/sec (10^9 bit/s); without it perftest prints MB/sec with
MB = 2^20 bytes (src/perftest_parameters.c: ``format_factor = (report_fmt == MBS) ? 0x100000 :
125000000``), headed ``MiB/sec`` since perftest 24.07.0 (linux-rdma/perftest commit 1d202bb,
"Display proper unit for MiB/sec results", 2024-03; knowledge audit 9735030 row 52) and
``MB/sec`` before; all are read as Gb/s here. ``--run_infinitely`` repeats the row; ``-a`` sweeps
sizes. "Conflicting CPU frequency values" warnings may sit between the header and the rows.
The judgement is :mod:`gpuinfra.rdma.perftest`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "ib_write_bw"

_TITLE = re.compile(r"^(?P<test>.+?) BW Test$")
_FIELD = re.compile(r"(?P<key>[A-Za-z][A-Za-z* ]*?)\s*:\s*(?P<value>\S+)")
_HEADER = re.compile(r"^#bytes\s+#iterations\s+BW peak\[(?P<unit>Gb/sec|MiB/sec|MB/sec)\]")
_ROW = re.compile(r"^(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)(?:\s+([0-9.]+))?")
_MB_TO_GB = 1048576 * 8 / 1e9  # MB/sec or MiB/sec (2^20 bytes) -> Gb/sec


@dataclass(frozen=True)
class BwRow:
    """One result row, rates in Gb/s."""

    bytes: int
    iterations: int
    peak_gbps: float
    average_gbps: float


@dataclass(frozen=True)
class IbWriteBw:
    """One ib_write_bw run: the device it ran on, its link type and result rows."""

    device: str
    link_type: str
    unit: str
    rows: tuple[BwRow, ...]

    @property
    def largest(self) -> int:
        return max(row.bytes for row in self.rows)

    @property
    def lowest_at_largest(self) -> float:
        """The lowest BW average among the rows of the largest message size."""
        return min(row.average_gbps for row in self.rows if row.bytes == self.largest)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_ib_write_bw(text: str) -> IbWriteBw:
    """Parse ``ib_write_bw`` client output; raises ParseError for anything else (other perftest
    tests, a bidirectional run, a run without results)."""
    lines = [line.strip() for line in clean_lines(text)]
    title = next((m for line in lines if (m := _TITLE.match(line))), None)
    if title is None:
        raise ParseError(SOURCE, "no 'RDMA_Write BW Test' banner: not perftest bandwidth output")
    if title["test"] != "RDMA_Write":
        test = title["test"]
        if test.endswith(" Bidirectional"):
            raise ParseError(SOURCE, f"a bidirectional run ({test} BW Test, ib_write_bw -b): "
                             "its BW sums both directions and cannot be judged against the "
                             "NIC's rate; run it without -b")
        raise ParseError(SOURCE, f"this is the {test} BW Test, not ib_write_bw's RDMA_Write")
    fields = {m["key"].strip(): m["value"] for line in lines for m in _FIELD.finditer(line)}
    unit = None
    rows: list[BwRow] = []
    for lineno, line in enumerate(lines, start=1):
        header = _HEADER.match(line)
        if header:
            unit = header["unit"]
            continue
        row = _ROW.match(line)
        if row and unit is not None:
            factor = 1.0 if unit == "Gb/sec" else _MB_TO_GB
            rows.append(BwRow(int(row[1]), int(row[2]), round(float(row[3]) * factor, 2),
                              round(float(row[4]) * factor, 2)))
        elif unit is not None and line[:1].isdigit():
            raise ParseError(SOURCE, f"unreadable result row: {line!r}", lineno)
    if unit is None or not rows:
        raise ParseError(SOURCE, "no result rows: the run did not connect or was cut off "
                         "(only the server side's output, or the client stopped early?)")
    return IbWriteBw(fields.get("Device", "?"), fields.get("Link type", "?"), unit, tuple(rows))
