"""NCCL all-reduce runs: what nccl-tests' ``all_reduce_perf`` printed.

::

    # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 ...
    #  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3
    ...
    #       size         count      type   redop    root     time   algbw   busbw #wrong ...
    ...
      8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 70.742

Also read: NCCL_DEBUG=INFO lines (the network used, NVLink SHARP, the NCCL version, warnings),
mpirun ``[1,0]<stdout>:`` tags, and the older table without a ``root`` column (its float
``error`` column in place of ``#wrong``). The judgement is :mod:`gpuinfra.jobs.nccl_verdict`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "all_reduce_perf"

_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?")  # mpirun --tag-output
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+"
                   r"device\s+(\d+)\s+\[([^\]]*)\]\s+(.*)$")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
# The network NCCL chose (IB, Socket or a plugin's name). Only this line says it: the
# "NET/IB : ..." lines come before the choice, and NCCL 2.28 prints "NET/IB : Using [RO]; OOB
# eth0" on a host with no IB device (tests/fixtures/device/h200-141gb-vm-drv580.159.04/
# smoke-nccl-1gpu.txt: "NET/IB : No device found.", then "Using network Socket").
_NETWORK = re.compile(r"NCCL INFO Using network (.+)$")
# NCCL_DEBUG=INFO lines saying whether NVLink SHARP (NVLS) can be used.
_NVLS_OFF = re.compile(r"NVLS multicast support is not available|"
                       r"NCCL_NVLS_ENABLE set by environment to 0")
_NVLS_ON = re.compile(r"NVLS multicast support is available")
_VERSION = re.compile(r"NCCL version (\S+)")
_PROBLEM = re.compile(r"NCCL WARN|NCCL failure|Test failure|srun: error|error:", re.IGNORECASE)
_INT = re.compile(r"^\d+$")


def network_chosen(line: str) -> str | None:
    """The network NCCL chose, if ``line`` says it (``Using network Socket``: "Socket"). The
    one reading of it: the NCCL-tests parser here and the smoke job's judge."""
    found = _NETWORK.search(line)
    return found[1].strip() if found is not None else None


@dataclass(frozen=True)
class Rank:
    """One line of "# Using devices": rank number, host, device index, bus id, GPU name."""

    rank: int
    host: str
    device: int
    bus: str
    gpu: str


@dataclass(frozen=True)
class AllReduceRow:
    """One message size. wrong_*: #wrong count, None for "N/A" (-c 0) or the old error column."""

    size: int
    count: int
    dtype: str
    redop: str
    oop_time_us: float
    oop_algbw: float
    oop_busbw: float
    oop_wrong: int | None
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float
    ip_wrong: int | None

    @property
    def busbw(self) -> float:
        """Mean of out-of-place and in-place busbw (the value judged)."""
        return (self.oop_busbw + self.ip_busbw) / 2

    @property
    def wrong(self) -> int:
        return (self.oop_wrong or 0) + (self.ip_wrong or 0)


@dataclass(frozen=True)
class AllReduceResult:
    """A finished all_reduce_perf run.

    out_of_bounds: the summary's count ("# Out of bounds values : N OK|FAILED"); networks: what
    NCCL_DEBUG=INFO said it used between nodes ("IB", "Socket", ...); problems: NCCL WARN/error
    lines, kept for the diagnosis; checked: False when every #wrong cell is N/A (run with -c 0);
    nvls: whether NCCL could use NVLink SHARP (False when any rank said it could not), None when
    the log does not say.
    """

    rows: tuple[AllReduceRow, ...]
    out_of_bounds: int
    avg_busbw: float | None
    ranks: tuple[Rank, ...] = ()
    networks: tuple[str, ...] = ()
    nccl_version: str | None = None
    problems: tuple[str, ...] = ()
    checked: bool = True
    nvls: bool | None = None

    @property
    def largest(self) -> AllReduceRow:
        return max(self.rows, key=lambda row: row.size)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Hosts in rank order, each once."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["hosts"] = list(self.hosts)
        return data


def parse_all_reduce(text: str) -> AllReduceResult:
    """Parse the output of nccl-tests' ``all_reduce_perf``.

    Raises ParseError when it cannot be read without guessing: no result rows (the run never
    started), no "Out of bounds values" summary (it crashed, hung or was killed), several runs in
    one log (nccl-tests built without MPI=1: every task ran its own single-GPU test).
    """
    state = _State()
    for number, raw in enumerate(clean_lines(text), start=1):
        state.feed(number, _TAG.sub("", raw).strip())
    return state.result()


class _State:
    """Line-by-line reader; keeps the table layout from the header it saw."""

    def __init__(self) -> None:
        self.rows: list[AllReduceRow] = []
        self.ranks: list[Rank] = []
        self.networks: list[str] = []
        self.problems: list[str] = []
        self.oob: int | None = None
        self.avg: float | None = None
        self.version: str | None = None
        self.with_root: bool | None = None
        self.headers = 0
        self.nvls: bool | None = None
        self.counted = False  # saw a #wrong count (or the old error column): results checked

    def feed(self, number: int, line: str) -> None:
        if line.startswith("#"):
            self._comment(line)
        elif line and _INT.match(line.split()[0]):
            self._row(number, line)
        else:
            self._other(line)

    def _comment(self, line: str) -> None:
        words = line.lstrip("#").split()
        if words[:1] == ["nThread"]:
            self.headers += 1
        elif words[:1] == ["size"] and "busbw" in words:
            self.with_root = "root" in words
        elif (rank := _RANK.match(line)) is not None:
            self.ranks.append(Rank(int(rank[1]), rank[2], int(rank[3]), rank[4], rank[5].strip()))
        elif (oob := _OOB.match(line)) is not None:
            self.oob = int(oob[1])
        elif (avg := _AVG.match(line)) is not None:
            self.avg = float(avg[1])

    def _row(self, number: int, line: str) -> None:
        fields = line.split()
        expected = {True: (13,), False: (12,), None: (12, 13)}[self.with_root]
        if len(fields) not in expected or not _INT.match(fields[1]):
            return  # not a table row ("8 more processes have sent help message ...")
        if len(fields) == 13:
            del fields[4]  # root
        self.counted = self.counted or fields[7] != "N/A" or fields[11] != "N/A"
        try:
            self.rows.append(AllReduceRow(
                int(fields[0]), int(fields[1]), fields[2], fields[3],
                float(fields[4]), float(fields[5]), float(fields[6]), _wrong(fields[7]),
                float(fields[8]), float(fields[9]), float(fields[10]), _wrong(fields[11])))
        except ValueError:
            raise ParseError(SOURCE, f"unreadable result row: {line!r}", number) from None

    def _other(self, line: str) -> None:
        if _NVLS_OFF.search(line):
            self.nvls = False
        elif _NVLS_ON.search(line) and self.nvls is None:
            self.nvls = True
        if (net := network_chosen(line)) is not None and net not in self.networks:
            self.networks.append(net)
        elif (version := _VERSION.search(line)) is not None and self.version is None:
            self.version = version[1]
        elif _PROBLEM.search(line) and len(self.problems) < 20:
            self.problems.append(line)

    def result(self) -> AllReduceResult:
        if self.headers > 1 or len({r.rank for r in self.ranks}) < len(self.ranks):
            raise ParseError(SOURCE, f"{max(self.headers, 2)} separate runs in one log: "
                             "nccl-tests was built without MPI=1, so every srun task ran its "
                             "own test; rebuild with `make MPI=1 MPI_HOME=...`")
        if not self.rows:
            raise ParseError(SOURCE, "no result rows: the run crashed or never started"
                             + _first_problem(self.problems))
        if self.oob is None:
            last = max(row.size for row in self.rows)
            raise ParseError(SOURCE, "no '# Out of bounds values' summary: the run did not "
                             f"finish (crashed, hung or killed; last size {size_text(last)})"
                             + _first_problem(self.problems))
        return AllReduceResult(tuple(self.rows), self.oob, self.avg, tuple(self.ranks),
                               tuple(self.networks), self.version, tuple(self.problems),
                               self.counted, self.nvls)


def _wrong(cell: str) -> int | None:
    """A #wrong cell: a count, or None for "N/A" and for the old float "error" column."""
    if cell == "N/A":
        return None
    if _INT.match(cell):
        return int(cell)
    float(cell)  # the old "error" column (max error, e.g. 2e-07); garbage raises ValueError
    return None


def _first_problem(problems: Sequence[str]) -> str:
    return f"; first error: {problems[0]}" if problems else ""


def size_text(nbytes: int) -> str:
    """A message size for people: 8589934592 -> "8 GiB"; sizes that are not whole units keep
    their byte count."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"
