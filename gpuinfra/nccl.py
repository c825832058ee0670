"""NCCL all-reduce check: parse nccl-tests output, judge it, render the Slurm job that runs it.

- :func:`parse_all_reduce` reads what ``all_reduce_perf`` printed (also with NCCL_DEBUG=INFO
  lines, mpirun ``[1,0]<stdout>:`` tags, and the older table without a ``root`` column).
- :func:`judge_all_reduce` turns it into :class:`gpuinfra.verdicts.Finding` s against a
  :class:`gpuinfra.knowledge.nccl.BusbwThreshold`: every rank present, no wrong values, the sweep
  reached large sizes, busbw at the largest size above the floor, RDMA used between nodes.
  DeepOps' check only asserts "out of bounds = 0"; a slow fabric passes it.
- :func:`sbatch_script` renders the job: ``srun`` of ``all_reduce_perf`` over the partition's
  GPU nodes, the output teed to a log, then a POSIX awk pass/fail so the job's exit code says it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpuinfra.errors import GpuinfraError, ParseError
from gpuinfra.knowledge.nccl import PLATEAU_MIN_BYTES, SWEEP_MAX_BYTES, BusbwThreshold
from gpuinfra.parsers._text import clean_lines
from gpuinfra.slurmconf import SlurmConfigError, gpu_type
from gpuinfra.verdicts import Finding

SOURCE = "all_reduce_perf"

# ---------------------------------------------------------------------------- parsing

_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?")  # mpirun --tag-output
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+"
                   r"device\s+(\d+)\s+\[([^\]]*)\]\s+(.*)$")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_NETWORK = re.compile(r"NCCL INFO Using network (.+)$")
# NCCL_DEBUG=INFO lines saying whether NVLink SHARP (NVLS) can be used.
_NVLS_OFF = re.compile(r"NVLS multicast support is not available|"
                       r"NCCL_NVLS_ENABLE set by environment to 0")
_NVLS_ON = re.compile(r"NVLS multicast support is available")
_VERSION = re.compile(r"NCCL version (\S+)")
_PROBLEM = re.compile(r"NCCL WARN|NCCL failure|Test failure|srun: error|error:", re.IGNORECASE)
_INT = re.compile(r"^\d+$")


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
        if (net := _NETWORK.search(line)) is not None and net[1] not in self.networks:
            self.networks.append(net[1])
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
                             f"finish (crashed, hung or killed; last size {_size(last)})"
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


def _size(nbytes: int) -> str:
    """8589934592 -> "8 GiB"; sizes that are not whole units keep their byte count."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


# ---------------------------------------------------------------------------- judging

DATA_CAUSE = ("NCCL returned wrong values: data corruption in GPU memory, on NVLink or on the "
              "network (failing HBM, a flaky link, NIC or cable), or a broken NCCL/driver build")
DATA_FIX = ("rerun to see if it repeats; on every node `nvidia-smi -q -d ECC,ROW_REMAPPER`, "
            "`dmesg | grep -i xid`, `nvidia-smi nvlink -e`; bisect with single-node runs; check "
            "NCCL and driver versions match on all nodes")
RANKS_CAUSE = ("the job ran on a different number of GPUs than expected: srun started fewer "
               "tasks, a node hides a GPU, or nccl-tests was built without MPI=1 (each task then "
               "runs its own single-GPU test)")
RANKS_FIX = ("`nvidia-smi -L` on each node, `scontrol show job` for the task layout, rebuild "
             "nccl-tests with `make MPI=1 MPI_HOME=...`, and pass the right --nodes/--gpus")
SIZES_CAUSE = ("the sweep stopped before the sizes where busbw reaches its plateau (the job hit "
               "its time limit, ran out of GPU memory at the larger sizes, or -e was lowered): "
               "busbw of small messages measures latency, not bandwidth")
SIZES_FIX = "run the sweep to 8 GiB (`-b 8 -e 8G -f 2`, as the generated script does)"
SOCKET_CAUSE = ("NCCL used TCP sockets between nodes (NET/Socket) instead of InfiniBand/RoCE: "
                "no usable RDMA device, or NCCL_IB_HCA names devices that do not exist")
SOCKET_FIX = ("`ibv_devinfo` (PORT_ACTIVE) and `ibstat` on every node; check NCCL_IB_HCA against "
              "`ibv_devices`; NCCL_DEBUG=INFO shows why NET/IB was not used")
NVLS_CAUSE = ("NCCL could not use NVLink SHARP (\"NVLS multicast support is not available\" or "
              "NCCL_NVLS_ENABLE=0): on an NVSwitch board with Fabric Manager up it should be "
              "available (NCCL >= 2.17, multicast-capable driver, not disabled by a VM or a "
              "container without the IMEX/multicast devices); busbw is judged against the ring "
              "floor instead")
NVLS_FIX = ("unset NCCL_NVLS_ENABLE, check `systemctl status nvidia-fabricmanager` and the NCCL "
            "version; where NVLS is unavailable by design, the ring floor is the right one")
EXCLUSIVE = "; or other jobs shared the nodes (the generated script asks for --exclusive)"
BUSBW_CAUSES: dict[str, str] = {
    "nvswitch-all-to-all": "the NVSwitch path is degraded: Fabric Manager down, NVLinks down or "
    "trained slow, or ACS/IOMMU blocking P2P (NCCL then goes through PCIe/host memory)",
    "direct-all-to-all": "NVLinks down or trained slow between some GPUs, or ACS/IOMMU "
    "blocking P2P",
    "bridged-pairs": "an NVLink bridge not seated or links down, PCIe between the pairs trained "
    "below x16/its generation, or ACS/IOMMU blocking P2P",
    "fixed-mesh": "a GPU's NVLinks down or trained slow (the mesh then routes through PCIe), "
    "Fabric Manager down on a switched mesh, or ACS/IOMMU blocking P2P",
    "nvlink-domain": "a GPU not registered with the rack's NVLink domain (fabric State/Status in "
    "`nvidia-smi -q`), NVLinks down or trained slow",
    "pcie-only": "a GPU's PCIe link trained below x16 or its generation, P2P blocked by ACS/IOMMU "
    "or BIOS, or GPUs across sockets",
    "network": "the network between nodes is slower than this fabric measures: NCCL fell back "
    "to TCP sockets (no IB/GPUDirect RDMA: the NCCL_DEBUG=INFO lines say NET/Socket instead of "
    "NET/IB), nvidia-peermem not loaded (no GPUDirect RDMA), an IB link down or trained slow, "
    "NCCL_IB_HCA naming the wrong devices, or ACS/IOMMU blocking GPU-to-NIC P2P",
}
BUSBW_FIXES: dict[str, str] = {
    "intra-node": "`systemctl status nvidia-fabricmanager` (NVSwitch systems), "
    "`nvidia-smi nvlink --status`, `nvidia-smi topo -p2p r`, `lspci -vvv | grep -e LnkSta -e "
    "ACSCtl`; then `gpuinfra check --profile ... --nvlink ... --topo ...` for the cause",
    "network": "`grep -E 'NET/(IB|Socket)|GDR' LOG`, `lsmod | grep nvidia_peermem` (else "
    "`modprobe nvidia-peermem`), `ibstat` on every node (State: Active, Rate as expected), "
    "`lspci -vvv | grep ACSCtl`; run one node alone to split NVLink from network",
}


def judge_all_reduce(
    result: AllReduceResult, threshold: BusbwThreshold, expected_max_bytes: int | None = None
) -> list[Finding]:
    """Findings for one run, passes included: ranks, data-errors, sizes, transport, busbw.

    expected_max_bytes: the sweep's intended largest size (the script's 8 GiB); when None only
    the 1 GiB plateau minimum is required (logs from other sweeps).
    """
    findings = [_check_ranks(result, threshold), _check_data(result),
                _check_sizes(result, expected_max_bytes)]
    if threshold.nodes > 1:
        findings.append(_check_transport(result, threshold))
    if threshold.condition and threshold.ring_floor is not None:
        findings.append(_check_nvls(result, threshold))
    findings.append(_check_busbw(result, _applicable(result, threshold)))
    return findings


def _applicable(result: AllReduceResult, threshold: BusbwThreshold) -> BusbwThreshold:
    """The threshold itself, or its ring floor when the log shows NVLink SHARP off."""
    if result.nvls is not False or threshold.ring_floor is None:
        return threshold
    return replace(threshold, min_busbw=threshold.ring_floor, source=threshold.ring_source,
                   condition="")


def _check_nvls(result: AllReduceResult, threshold: BusbwThreshold) -> Finding:
    expected = f"{threshold.condition} (the {threshold.min_busbw:g} GB/s floor assumes it)"
    if result.nvls is None:
        return Finding("nvls", "job", expected, "the log does not say (NCCL_DEBUG unset)", "warn",
                       "NVLink SHARP use cannot be told from this log: judged as on",
                       "run with NCCL_DEBUG=INFO (the generated script sets it)")
    if result.nvls:
        return Finding("nvls", "job", expected, "NVLS multicast support is available", "ok")
    return Finding("nvls", "job", expected,
                   f"NVLS off: judged against the ring floor {threshold.ring_floor:g} GB/s",
                   "warn", NVLS_CAUSE, NVLS_FIX)


def _check_ranks(result: AllReduceResult, threshold: BusbwThreshold) -> Finding:
    expected = f"{threshold.ranks} ranks on {threshold.nodes} node(s)"
    if not result.ranks:
        return Finding("ranks", "job", expected, "no '# Using devices' lines in the log", "warn",
                       "the log was trimmed: the GPU count cannot be checked",
                       "keep the whole all_reduce_perf output")
    observed = f"{len(result.ranks)} ranks on {len(result.hosts)} node(s)"
    if len(result.ranks) == threshold.ranks and len(result.hosts) == threshold.nodes:
        return Finding("ranks", "job", expected, observed, "ok")
    return Finding("ranks", "job", expected, observed, "fail", RANKS_CAUSE, RANKS_FIX)


def _check_data(result: AllReduceResult) -> Finding:
    wrong_rows = [row for row in result.rows if row.wrong]
    observed = f"out of bounds {result.out_of_bounds}, #wrong {sum(r.wrong for r in wrong_rows)}"
    if result.out_of_bounds or wrong_rows:
        sizes = ", ".join(_size(row.size) for row in wrong_rows[:5])
        observed += f" (at {sizes})" if sizes else ""
        return Finding("data-errors", "job", "0 wrong values", observed, "fail",
                       DATA_CAUSE, DATA_FIX)
    if not result.checked:
        return Finding("data-errors", "job", "0 wrong values", "#wrong N/A (run with -c 0)",
                       "warn", "results were not checked", "run without -c 0")
    return Finding("data-errors", "job", "0 wrong values", observed, "ok")


def _check_sizes(result: AllReduceResult, expected_max_bytes: int | None) -> Finding:
    need = max(expected_max_bytes or 0, PLATEAU_MIN_BYTES)
    largest = result.largest.size
    observed = f"{len(result.rows)} sizes, {_size(min(r.size for r in result.rows))} .. " \
               f"{_size(largest)}"
    expected = f"largest size >= {_size(need)}"
    if largest < need:
        return Finding("sizes", "job", expected, observed, "fail", SIZES_CAUSE, SIZES_FIX)
    return Finding("sizes", "job", expected, observed, "ok")


def _check_transport(result: AllReduceResult, threshold: BusbwThreshold) -> Finding:
    want = "Socket" if threshold.network == "socket" else "IB"
    expected = f"NCCL network {want}" + ("" if want == "Socket" else " (or another RDMA plugin)")
    if not result.networks:
        return Finding("transport", "job", expected, "no 'Using network' line (NCCL_DEBUG unset)",
                       "warn", "the log does not say which network NCCL used",
                       "run with NCCL_DEBUG=INFO (the generated script sets it)")
    observed = ", ".join(result.networks)
    if want == "IB" and all(net == "Socket" for net in result.networks):
        return Finding("transport", "job", expected, observed, "fail", SOCKET_CAUSE, SOCKET_FIX)
    return Finding("transport", "job", expected, observed, "ok")


def _check_busbw(result: AllReduceResult, threshold: BusbwThreshold) -> Finding:
    row = result.largest
    condition = f"; with {threshold.condition}" if threshold.condition else ""
    expected = (f">= {threshold.min_busbw:g} GB/s ({threshold.bound}: {threshold.source}"
                f"{condition})")
    observed = (f"{row.busbw:.2f} GB/s at {_size(row.size)} (out-of-place {row.oop_busbw:g}, "
                f"in-place {row.ip_busbw:g})")
    if row.busbw >= threshold.min_busbw:
        return Finding("busbw", "job", expected, observed, "ok")
    return Finding("busbw", "job", expected, observed, "fail", _busbw_cause(threshold),
                   _busbw_fix(threshold))


def _busbw_cause(threshold: BusbwThreshold) -> str:
    if threshold.bound == "network":
        return BUSBW_CAUSES["network"] + EXCLUSIVE
    intra = BUSBW_CAUSES[threshold.profile]
    if threshold.nodes > 1:
        return f"inside a node: {intra}; between nodes: {BUSBW_CAUSES['network']}{EXCLUSIVE}"
    return intra + EXCLUSIVE


def _busbw_fix(threshold: BusbwThreshold) -> str:
    if threshold.bound == "network":
        return BUSBW_FIXES["network"]
    if threshold.nodes > 1:
        return f"{BUSBW_FIXES['intra-node']}; between nodes: {BUSBW_FIXES['network']}"
    return BUSBW_FIXES["intra-node"]


# ---------------------------------------------------------------------------- sbatch script

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # Slurm partition/job/node names we accept
_GRES_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # as gpuinfra.slurmconf accepts
_MPI = re.compile(r"^[a-z0-9_]{1,32}$")  # srun --mpi plugin names: pmix, pmix_v4, pmi2, none
_HCA = re.compile(r"^[A-Za-z0-9_.-]{1,64}(:\d+)?$")  # mlx5_0, or mlx5_0:1 with a port
_TIME = re.compile(r"^(\d+-)?\d{1,2}(:\d{2}){0,2}$|^\d+$")  # sbatch --time formats


class ScriptError(GpuinfraError):
    """A value that cannot go into the sbatch script safely."""


def slurm_gpu_type(model_key: str) -> str:
    """The Slurm GRES type of a GPU model (:func:`gpuinfra.slurmconf.gpu_type`, the rule the
    slurm role deploys), as a :class:`ScriptError` when there is none."""
    try:
        return gpu_type(model_key)
    except SlurmConfigError as exc:
        raise ScriptError(str(exc)) from None


@dataclass(frozen=True)
class JobSettings:
    """How the job runs; every field has the safe common default.

    mpi: srun's --mpi plugin (`srun --mpi=list` shows what the cluster has). binary: the
    all_reduce_perf built with MPI=1 (on PATH by default). exclude: nodes of the partition to
    leave out (short names). time_limit: sbatch --time.
    """

    job_name: str = "nccl-all-reduce"
    mpi: str = "pmix"
    binary: str = "all_reduce_perf"
    time_limit: str = "00:30:00"
    exclude: tuple[str, ...] = ()


def sbatch_script(
    partition: str,
    threshold: BusbwThreshold,
    gpu_type: str,
    ib_hcas: Sequence[str] = (),
    settings: JobSettings | None = None,
    ib_gid_index: int | None = None,
) -> str:
    """The sbatch script that runs all_reduce_perf on ``threshold.nodes`` nodes of
    ``partition`` and exits non-zero unless the run passes ``threshold``.

    ib_hcas: the nodes' RDMA device names (exported as NCCL_IB_HCA when the job spans nodes).
    ib_gid_index: their RoCE GID index (NCCL_IB_GID_INDEX; None: NCCL's own choice).
    Raises ScriptError for names that Slurm or the shell could misread.
    """
    job = settings or JobSettings()
    _check_values(partition, gpu_type, ib_hcas, job)
    lines = _header(partition, threshold, gpu_type, job)
    lines += _body(threshold, ib_hcas, job, ib_gid_index)
    return "\n".join(lines) + "\n"


def _check_values(partition: str, gpu_type: str, ib_hcas: Sequence[str],
                  job: JobSettings) -> None:
    checks = [("partition", partition, _NAME), ("job name", job.job_name, _NAME),
              ("GRES type", gpu_type, _GRES_TYPE),
              ("--mpi", job.mpi, _MPI), ("--time", job.time_limit, _TIME)]
    checks += [("excluded node", name, _NAME) for name in job.exclude]
    checks += [("RDMA device", name, _HCA) for name in ib_hcas]
    for what, value, pattern in checks:
        if not pattern.match(value):
            raise ScriptError(f"{what} {value!r}: refused in an sbatch script (use letters, "
                              "digits, '-' and '_'; --time as [D-]HH:MM:SS or minutes; --mpi "
                              "as `srun --mpi=list` prints it)")
    if not job.binary or "\n" in job.binary:
        raise ScriptError(f"--binary {job.binary!r}: give the path of all_reduce_perf")


def _header(partition: str, threshold: BusbwThreshold, gpu_type: str,
            job: JobSettings) -> list[str]:
    gpus = threshold.gpus_per_node
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job.job_name}",
        f"#SBATCH --partition={partition}",
        f"#SBATCH --nodes={threshold.nodes}",
        f"#SBATCH --ntasks-per-node={gpus}",
        f"#SBATCH --gres=gpu:{gpu_type}:{gpus}",
        "#SBATCH --exclusive",
        f"#SBATCH --time={job.time_limit}",
        f"#SBATCH --output={job.job_name}-%j.out",
    ]
    if job.exclude:
        lines.append(f"#SBATCH --exclude={','.join(job.exclude)}")
    return lines + [
        "#",
        "# NCCL all-reduce check, generated by `gpuinfra nccl script`",
        "# (gpuinfra_roles/slurm/NCCL.md).",
        f"# {threshold.nodes} node(s) x {gpus} {threshold.model} ({threshold.profile}).",
        f"# Pass: busbw at {_size(SWEEP_MAX_BYTES)} >= {threshold.min_busbw:g} GB/s, no wrong "
        f"values, all {threshold.ranks} ranks present.",
        f"# Floor ({threshold.bound}): {_one_line(threshold.source)}",
        *_condition_lines(threshold),
        "# The job's exit code is the verdict: 0 pass, 1 fail.",
    ]


def _body(threshold: BusbwThreshold, ib_hcas: Sequence[str], job: JobSettings,
          gid_index: int | None = None) -> list[str]:
    run = ["srun", f"--mpi={job.mpi}", job.binary, "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
    lines = [
        "set -u -o pipefail",
        "",
        f"MIN_BUSBW={threshold.min_busbw:g}",
        f"MAX_BYTES={SWEEP_MAX_BYTES}",
        f"RANKS={threshold.ranks}",
        'LOG="${NCCL_CHECK_LOG:-' + job.job_name + '-${SLURM_JOB_ID:-local}.log}"',
        "",
        "export NCCL_DEBUG=INFO  # the log then names the transport used (NET/IB, NET/Socket)",
    ]
    if threshold.nodes > 1 and ib_hcas:
        # '=': exact device names, so mlx5_1 does not also select mlx5_10..mlx5_19
        lines.append(f"export NCCL_IB_HCA='={','.join(ib_hcas)}'")
        if gid_index is not None:  # RoCE: the GID of the spec's type (RoCE v2, IPv4)
            lines.append(f"export NCCL_IB_GID_INDEX={int(gid_index)}")
    lines += [
        "",
        " ".join(shlex.quote(part) for part in run) + ' 2>&1 | tee "$LOG"',
        "launch=$?",
        "",
        "awk -v min=\"$MIN_BUSBW\" -v max_bytes=\"$MAX_BYTES\" -v ranks=\"$RANKS\" "
        f"{shlex.quote(_AWK)} \"$LOG\"",
        "verdict=$?",
        'if [ "$verdict" -eq 0 ] && [ "$launch" -ne 0 ]; then',
        '    echo "NCCL all_reduce FAIL: srun exited $launch after a passing table"',
        "    verdict=1",
        "fi",
        f'echo "diagnosis: {_check_hint(threshold)}"',
        'exit "$verdict"',
    ]
    return lines


def _check_hint(threshold: BusbwThreshold) -> str:
    """The `gpuinfra nccl check` command for this job's log (shell-quoted, $LOG expanded)."""
    parts = ["--profile", threshold.profile, "--model", threshold.model, "--nodes",
             str(threshold.nodes), "--gpus", str(threshold.gpus_per_node), "--max-size", "8G"]
    if threshold.bound == "explicit":
        parts += ["--min-busbw", f"{threshold.min_busbw:g}"]
    elif threshold.nodes > 1:
        parts += ["--nics", str(threshold.nics), "--nic-gbps", f"{threshold.nic_gbps:g}"]
    return "gpuinfra nccl check $LOG " + " ".join(shlex.quote(part) for part in parts)


def _condition_lines(threshold: BusbwThreshold) -> list[str]:
    if not threshold.condition:
        return []
    lines = [f"# The floor assumes {threshold.condition}."]
    if threshold.ring_floor is not None:
        lines.append(f"# With NVLS off the floor is {threshold.ring_floor:g} GB/s "
                     f"({_one_line(threshold.ring_source)}): `gpuinfra nccl check` applies it "
                     "when the log shows NVLS off.")
    return lines


def _one_line(text: str) -> str:
    return " ".join(text.split())


# POSIX awk: strips mpirun tags, counts ranks, reads the table (with or without the root column)
# and the out-of-bounds summary, and judges the largest size. Exit 0 pass, 1 fail.
_AWK = r"""
{ sub(/^\[[0-9]+,[0-9]+\]<std(out|err)>: ?/, "") }
$1 == "#" && $2 == "Rank" && $3 ~ /^[0-9]+$/ { seen[$3] = 1; next }
/^[ \t]*#[ \t]*Out of bounds values/ {
    split($0, part, ":"); split(part[2], word, " "); oob = word[1] + 0; summary = 1; next
}
$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && (NF == 13 || NF == 12) {
    if (NF == 13) { bw = ($8 + $12) / 2; w = 0
        if ($9 ~ /^[0-9]+$/) w += $9
        if ($13 ~ /^[0-9]+$/) w += $13
        wrong += w
    } else { bw = ($7 + $11) / 2 }
    rows++
    if ($1 + 0 >= size) { size = $1 + 0; busbw = bw }
}
END {
    n = 0; for (r in seen) n++
    why = ""
    if (rows == 0) why = why "no result rows (the run crashed or never started); "
    else if (!summary) why = why "no out-of-bounds summary (the run did not finish); "
    if (oob > 0 || wrong > 0) why = why "wrong values: out of bounds " oob ", #wrong " wrong "; "
    if (n != ranks) why = why n " ranks instead of " ranks "; "
    if (rows > 0 && size < max_bytes) why = why sprintf("sweep stopped at %.0f B; ", size)
    if (rows > 0 && busbw < min) why = why "busbw below the floor; "
    sub(/; $/, "", why)
    line = sprintf("busbw %.2f GB/s at %.0f B, floor %s GB/s", busbw, size, min)
    if (why == "") { print "NCCL all_reduce PASS: " line; exit 0 }
    print "NCCL all_reduce FAIL: " line ": " why
    exit 1
}
"""
