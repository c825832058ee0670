"""The training smoke job's log, read and judged (the job: :mod:`gpuinfra.jobs.smoke`).

:func:`parse_smoke` reads what the job printed: the batch script's ``GPUINFRA-SMOKE-JOB``
(backend, nodes, ranks asked for) and ``GPUINFRA-SMOKE-HOSTS`` (the nodes Slurm gave it) lines,
each rank's ``GPUINFRA-SMOKE {json}`` result, torchrun's and Python's failure reports, srun's
errors, NCCL's transport lines and srun's exit status (``GPUINFRA-SMOKE-END``).

:func:`judge_smoke` turns that into :class:`gpuinfra.verdicts.Finding` s, like the NCCL
all-reduce check: every node joined the rendezvous, every rank reported, no rank crashed, the
DDP replicas agree, NCCL used RDMA between nodes where the nodes have RDMA NICs, the all-reduce
bus bandwidth above the NCCL floor of the topology (NCCL; with gloo on CPUs there is no floor:
the run proves the launch path, not a bandwidth), the step time reported. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.jobs.nccl_verdict import SOCKET_CAUSE, SOCKET_FIX, _busbw_cause, _busbw_fix
from gpuinfra.jobs.smoke import END_MARK, HOSTS_MARK, JOB_MARK, MARK
from gpuinfra.knowledge.nccl import PLATEAU_MIN_BYTES, BusbwThreshold
from gpuinfra.parsers.nccl import network_chosen, size_text
from gpuinfra.verdicts import Finding

NEVER_JOINED_CAUSE = ("a node never joined the job: its torchrun did not reach the rendezvous "
                      "on the first node before the timeout (slurmd or the node down, the "
                      "rendezvous port blocked between nodes, a wrong hostname resolution, "
                      "python3 or torch missing on that node or in the container)")
NEVER_JOINED_FIX = ("`scontrol show node <node>` and `sinfo -R`; from that node `python3 -c "
                    "'import torch'` (or inside the bundle) and reach the first node's "
                    "rendezvous port (29500); `srun -w <node> hostname` for the launch path")
CRASH_CAUSE = ("a rank crashed: its Python raised (the exception is the observed text) or it "
               "was killed (out of memory, a signal); the other ranks then fail on its closed "
               "connections")
CRASH_FIX = ("read the rank's Traceback in the log; `dmesg | grep -i -e oom -e xid` on its node; "
             "with NCCL rerun with NCCL_DEBUG=INFO (the script sets it)")
MISSING_CAUSE = ("ranks never printed their result: the job was cut (time limit, scancel, a "
                 "node failure) or its output is not the whole log")
MISSING_FIX = "`sacct -j <jobid> -o JobID,State,ExitCode,NodeList`; judge the whole job output"
REPLICA_CAUSE = ("the DDP replicas hold different weights after training: gradients were not "
                 "averaged across ranks (a broken collective, or mixed torch versions)")
REPLICA_FIX = "the same torch on every node (or one job container); rerun to see if it repeats"
EXIT_CAUSE = "srun exited non-zero: a task failed or was killed (srun --kill-on-bad-exit)"
EXIT_FIX = "the failed ranks above say which; `sacct -j <jobid>` for the steps' exit codes"
CUT_CAUSE = ("the log has no end line: the job is still running, hit its time limit, or the "
             "log was cut")
CUT_FIX = "judge the log after the job ended (`squeue -j <jobid>` empty); raise --time"

_RESULT = re.compile(re.escape(MARK) + r" (\{.*\})\s*$")
_JOB = re.compile(re.escape(JOB_MARK) + r" (\{.*\})\s*$")
_HOSTS = re.compile(re.escape(HOSTS_MARK) + r" (\S*) endpoint (\S+)")
_END = re.compile(re.escape(END_MARK) + r" srun exit (\d+)")
_RDZV_TIMEOUT = re.compile(r"RendezvousTimeoutError|RendezvousClosedError|"
                           r"DistNetworkError|[Rr]endezvous .*tim(?:ed out|eout)|"
                           r"client socket has timed out while trying to connect")
_SRUN_NODE = re.compile(r"srun: error: (?:Node failure on |Nodes? )([\w.,\[\]-]+)|"
                        r"srun: error: Task launch for \S+ failed on node ([\w.-]+)")
_SRUN_TASK = re.compile(r"srun: error: ([\w.-]+): tasks? ([\d,-]+): (.+)$")
_TR_START = re.compile(r"^\s*\[\d+\]:\s*$")  # torchrun's failure report: one block per rank
_TR_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
_TR_HOST = re.compile(r"^\s*host\s*:\s*(\S+)")
_TR_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
_TR_WHY = re.compile(r"^\s*(?:traceback|error_file)\s*:\s*(.+)$")
_EXCEPTION = re.compile(r"^(?:\[rank\d+\]: ?)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)"
                        r"(?::.*)?)$")


@dataclass(frozen=True)
class Crash:
    """One failed rank as torchrun's failure report (or srun) said it."""

    rank: int | None
    host: str
    exitcode: int | None
    why: str


@dataclass
class SmokeLog:
    """What one job printed. job: the batch script's expectation (JSON), hosts: the nodes Slurm
    gave it, results: each rank's JSON, crashes, srun_nodes: nodes srun named as failed,
    rendezvous_timeout: torchrun's rendezvous timeout (or connect failure) text seen,
    networks: NCCL's, exceptions: the last line of each Traceback, exit_status: srun's."""

    job: dict[str, Any] | None = None
    hosts: tuple[str, ...] = ()
    endpoint: str = ""
    results: list[dict[str, Any]] = field(default_factory=list)
    crashes: list[Crash] = field(default_factory=list)
    srun_nodes: list[str] = field(default_factory=list)
    rendezvous_timeout: str = ""
    networks: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    exit_status: int | None = None
    bad_lines: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "hosts": list(self.hosts), "endpoint": self.endpoint,
                "results": self.results, "crashes": [c.__dict__ for c in self.crashes],
                "srun_nodes": self.srun_nodes, "rendezvous_timeout": self.rendezvous_timeout,
                "networks": self.networks, "exceptions": self.exceptions,
                "exit_status": self.exit_status}


def parse_smoke(text: str) -> SmokeLog:
    """The smoke job's log; GpuinfraError when it holds nothing of the smoke job."""
    log = SmokeLog()
    block: dict[str, Any] = {}
    in_traceback = False
    for line in text.splitlines():
        if (m := _JOB.search(line)) is not None:
            log.job = _json(m[1], log)
        elif (m := _HOSTS.search(line)) is not None:
            log.hosts = tuple(h for h in m[1].split(",") if h)
            log.endpoint = m[2]
        elif (m := _RESULT.search(line)) is not None:
            found = _json(m[1], log)
            if isinstance(found, dict) and isinstance(found.get("rank"), int):
                log.results.append(found)
        elif (m := _END.search(line)) is not None:
            log.exit_status = int(m[1])
        _failure_line(line, log, block)
        if "Traceback (most recent call last)" in line:
            in_traceback = True
        elif in_traceback and (m := _EXCEPTION.match(line.strip())) is not None:
            log.exceptions.append(m[1][:300])
            in_traceback = False
    if block:
        _close(block, log)
    if log.job is None and not log.results and not log.hosts:
        raise GpuinfraError("not the smoke job's log: no GPUINFRA-SMOKE line (judge the job's "
                            "output file, gpuinfra-smoke-<jobid>.out)")
    return log


def _json(text: str, log: SmokeLog) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        log.bad_lines += 1
        return None


def _failure_line(line: str, log: SmokeLog, block: dict[str, Any]) -> None:
    if not log.rendezvous_timeout and (m := _RDZV_TIMEOUT.search(line)) is not None:
        log.rendezvous_timeout = line.strip()[:300]
    if (m := _SRUN_NODE.search(line)) is not None:
        for name in (m[1] or m[2]).split(","):
            if name and name not in log.srun_nodes:
                log.srun_nodes.append(name)
    if (m := _SRUN_TASK.search(line)) is not None and "xited with exit code 0" not in m[3]:
        log.crashes.append(Crash(None, m[1], _code(m[3]), f"srun: task {m[2]}: {m[3]}"))
    if (net := network_chosen(line)) is not None and net not in log.networks:
        log.networks.append(net)
    if _TR_START.match(line):
        if block:
            _close(block, log)
        block["open"] = True
    elif block and (m := _TR_RANK.match(line)) is not None:
        block["rank"] = int(m[1])
    elif block and (m := _TR_HOST.match(line)) is not None:
        block["host"] = m[1]
    elif block and (m := _TR_EXIT.match(line)) is not None:
        block["exitcode"] = int(m[1])
    elif block and (m := _TR_WHY.match(line)) is not None:
        why = m[1].strip()
        if why != "<N/A>" and not why.startswith("To enable traceback"):
            block["why"] = why
        if line.lstrip().startswith("traceback"):
            _close(block, log)


def _code(text: str) -> int | None:
    found = re.search(r"exit code (\d+)", text)
    return int(found[1]) if found else None


def _close(block: dict[str, Any], log: SmokeLog) -> None:
    log.crashes.append(Crash(block.get("rank"), block.get("host", ""), block.get("exitcode"),
                             block.get("why", "")))
    block.clear()


# ---------------------------------------------------------------------------- the judge

@dataclass(frozen=True)
class Expected:
    """What the run should have been: backend, nodes, processes per node (from the spec or the
    log's job line), whether the nodes have RDMA NICs (NCCL must then use NET/IB)."""

    backend: str
    nodes: int
    procs_per_node: int
    rdma: bool = False

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node


def expected_from_log(log: SmokeLog) -> Expected:
    """The job line's expectation; else the ranks' own world size (a log without the batch
    script's lines); GpuinfraError when neither says."""
    if log.job:
        try:
            return Expected(str(log.job["backend"]), int(log.job["nodes"]),
                            int(log.job["procs_per_node"]))
        except (KeyError, TypeError, ValueError):
            pass
    if log.results:
        first = log.results[0]
        hosts = {r.get("host") for r in log.results}
        return Expected(str(first.get("backend", "gloo")), len(hosts),
                        max(1, int(first.get("world_size", 1)) // max(1, len(hosts))))
    raise GpuinfraError("the log does not say what the job asked for (no GPUINFRA-SMOKE-JOB "
                        "line): pass --inventory")


def _short(name: str) -> str:
    return name.split(".")[0]


def judge_smoke(log: SmokeLog, expected: Expected,
                threshold: BusbwThreshold | None = None) -> list[Finding]:
    """Findings for one run, passes included: nodes joined, ranks reported, crashes, replicas,
    exit, transport (NCCL across nodes), busbw, step time. ``threshold``: the NCCL floor for
    this shape (None: not judged, said; gloo never has one)."""
    findings = _joined(log, expected) + _crashes(log) + [_ranks(log, expected)]
    if log.results:
        findings.append(_replicas(log))
    findings.append(_exit(log))
    if expected.backend == "nccl" and expected.nodes > 1:
        findings.append(_transport(log, expected))
    if log.results:
        findings += [_busbw(log, expected, threshold), _step_time(log)]
    return findings


def _joined(log: SmokeLog, expected: Expected) -> list[Finding]:
    """One finding per node of the job (the HOSTS line; without it, the result hosts)."""
    reported: dict[str, int] = {}
    for r in log.results:
        reported[_short(str(r.get("host", "")))] = reported.get(_short(str(r.get("host", ""))),
                                                                0) + 1
    crashed = {_short(c.host) for c in log.crashes if c.host}
    nodes = [_short(h) for h in log.hosts] or list(reported)
    out = []
    want = f"joined, {expected.procs_per_node} rank(s) reported"
    for node in nodes:
        seen = reported.get(node, 0)
        if seen >= expected.procs_per_node:
            out.append(Finding("joined", node, want, f"{seen} rank(s) reported", "ok"))
        elif node in crashed:
            continue  # its crash is the cause, said by _crashes
        elif seen == 0 and (log.rendezvous_timeout or node in {_short(n) for n in log.srun_nodes}
                            or not log.results or log.crashes):
            said = log.rendezvous_timeout or (f"srun: node {node} failed" if node in {
                _short(n) for n in log.srun_nodes} else "no rank of it reported")
            out.append(Finding("joined", node, want, f"never joined: {said}", "fail",
                               NEVER_JOINED_CAUSE, NEVER_JOINED_FIX))
        else:
            out.append(Finding("joined", node, want, f"{seen} rank(s) reported", "fail",
                               MISSING_CAUSE, MISSING_FIX))
    return out


def _crashes(log: SmokeLog) -> list[Finding]:
    out = []
    torchrun = [c for c in log.crashes if c.rank is not None]
    if not torchrun and log.rendezvous_timeout:
        return []  # srun's failed tasks are the nodes that gave up waiting: not crashes
    for crash in torchrun or log.crashes:  # torchrun's report names ranks; srun only tasks
        subject = (f"rank {crash.rank}" if crash.rank is not None else "task") + \
            (f" on {_short(crash.host)}" if crash.host else "")
        why = crash.why if crash.why and crash.why != "<N/A>" else ""
        exception = log.exceptions[0] if log.exceptions else ""
        observed = "; ".join(x for x in (f"exit code {crash.exitcode}"
                                         if crash.exitcode is not None else "", why,
                                         exception) if x)
        out.append(Finding("crash", subject, "no rank fails", observed or "failed", "fail",
                           CRASH_CAUSE, CRASH_FIX))
    if not log.crashes and log.exceptions:
        out.append(Finding("crash", "job", "no rank fails", log.exceptions[0], "fail",
                           CRASH_CAUSE, CRASH_FIX))
    return out


def _ranks(log: SmokeLog, expected: Expected) -> Finding:
    want = set(range(expected.world_size))
    seen = {int(r["rank"]) for r in log.results}
    label = f"{expected.world_size} ranks ({expected.nodes} node(s) x {expected.procs_per_node})"
    missing = sorted(want - seen)
    observed = f"{len(seen & want)} of {expected.world_size} reported"
    if missing:
        cause, fix = ((NEVER_JOINED_CAUSE, NEVER_JOINED_FIX) if log.rendezvous_timeout else
                      (CRASH_CAUSE, CRASH_FIX) if log.crashes or log.exceptions else
                      (MISSING_CAUSE, MISSING_FIX))
        return Finding("ranks", "job", label, f"{observed}; missing {_ranges(missing)}",
                       "fail", cause, fix)
    worlds = {r.get("world_size") for r in log.results}
    if worlds != {expected.world_size}:
        return Finding("ranks", "job", label, f"world size {sorted(map(str, worlds))}", "fail",
                       MISSING_CAUSE, "pass the --nodes the job really had")
    return Finding("ranks", "job", label, observed, "ok")


def _ranges(numbers: Sequence[int]) -> str:
    text = ", ".join(str(n) for n in numbers[:8])
    return text + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")


def _replicas(log: SmokeLog) -> Finding:
    bad = [str(r["rank"]) for r in log.results if r.get("replicas_in_sync") is not True]
    if bad:
        return Finding("replicas", "job", "every rank holds rank 0's weights",
                       f"ranks {', '.join(bad)} differ", "fail", REPLICA_CAUSE, REPLICA_FIX)
    return Finding("replicas", "job", "every rank holds rank 0's weights",
                   f"{len(log.results)} ranks agree", "ok")


def _exit(log: SmokeLog) -> Finding:
    if log.exit_status is None:
        return Finding("exit", "job", "srun exit 0", "no end line", "warn", CUT_CAUSE, CUT_FIX)
    if log.exit_status:
        return Finding("exit", "job", "srun exit 0", f"srun exit {log.exit_status}", "fail",
                       EXIT_CAUSE, EXIT_FIX)
    return Finding("exit", "job", "srun exit 0", "srun exit 0", "ok")


def _transport(log: SmokeLog, expected: Expected) -> Finding:
    want = "IB" if expected.rdma else "Socket"
    label = f"NCCL network {want}" + (" (the nodes have RDMA NICs)" if expected.rdma else "")
    if not log.networks:
        return Finding("transport", "job", label, "no 'Using network' line (NCCL_DEBUG unset)",
                       "warn",
                       "the log does not say which network NCCL used",
                       "run with NCCL_DEBUG=INFO (the generated script sets it)")
    observed = ", ".join(log.networks)
    if expected.rdma and all(n == "Socket" for n in log.networks):
        return Finding("transport", "job", label, observed, "fail", SOCKET_CAUSE, SOCKET_FIX)
    return Finding("transport", "job", label, observed, "ok")


def _busbw(log: SmokeLog, expected: Expected, threshold: BusbwThreshold | None) -> Finding:
    values = [(float(r.get("busbw_gbytes_per_s", 0.0)), int(r["rank"])) for r in log.results]
    low, rank = min(values)
    nbytes = int(log.results[0].get("allreduce_bytes", 0))
    observed = f"{low:.2f} GB/s at {size_text(nbytes)} (lowest rank: {rank})"
    if expected.backend == "gloo":
        return Finding("busbw", "job", "reported (gloo on CPUs: no floor, the run proves the "
                       "launch path)", observed, "ok")
    if expected.world_size == 1:  # 2(n-1)/n = 0: one rank's all-reduce moves no data
        return Finding("busbw", "job", "two ranks or more to measure", observed, "warn",
                       "one rank: an all-reduce over one rank moves no data, so the run "
                       "proves the NCCL path, not a bandwidth",
                       "run it on two GPUs or more (--nodes, or a node with more GPUs)")
    if threshold is None:
        return Finding("busbw", "job", "a floor for this fabric", observed, "warn",
                       "no NCCL floor for this shape (no spec given, or none is known)",
                       "pass --inventory, or --min-busbw (90 % of a known-good run)")
    label = f">= {threshold.min_busbw:g} GB/s ({threshold.bound}: {threshold.source})"
    if nbytes < PLATEAU_MIN_BYTES:
        return Finding("busbw", "job", label, observed, "warn",
                       f"the all-reduce of {size_text(nbytes)} is below the plateau size "
                       f"({size_text(PLATEAU_MIN_BYTES)}): it measures latency, not the floor's "
                       "bandwidth", "regenerate the job with the default size (8 GiB)")
    if low >= threshold.min_busbw:
        return Finding("busbw", "job", label, observed, "ok")
    return Finding("busbw", "job", label, observed, "fail", _busbw_cause(threshold),
                   _busbw_fix(threshold))


def _step_time(log: SmokeLog) -> Finding:
    worst = max(log.results, key=lambda r: float(r.get("step_ms", 0.0)))
    steps = worst.get("steps", "?")
    return Finding("step-time", "job", "reported (no public figure for this model: not judged)",
                   f"median {float(worst.get('step_ms', 0.0)):.2f} ms over {steps} steps "
                   f"(slowest rank: {worst['rank']} on {_short(str(worst.get('host', '')))})",
                   "ok")
