"""The GPU textfile collector: what it asks `nvidia-smi` and the kernel log, and the metric text.

The collector (roles/monitoring/collector.py, run by a systemd timer on every GPU node)
runs the commands below, hands their output to :func:`metrics_text` and writes the result where
node_exporter's textfile collector reads it. Everything here is pure, so the unit tests run it
on real captures; the collector ships this module and the parsers it imports to the node.

The queries are split by what a driver or a GPU may not answer: a driver that does not know a
field fails the whole ``--query-gpu`` (exit 2, "Field ... is not a valid field to query"), so
one unknown field must not blind the others. Each query's success is itself a metric
(``gpuinfra_gpu_collector_query_ok{query=...}``). Values a GPU does not support
(``[N/A]``, ``[Not Supported]``) give no series.

XID errors are not a query field: the driver logs them to the kernel log as
``NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus`` (docs/hardware-reference.md 8.6);
they are counted per GPU since boot or the GPU's last reset (:data:`RESET_MARK`), in all and
per code (an alert on "any fatal XID since
boot" must not depend on which XID came last: drivers from R565 on follow a fatal XID with Xid
154, "GPU recovery action changed", tests/fixtures/kernel-log). Xid 154 also states what the
driver wants done; the last one since boot is its own metric. A GPU that fell off the bus is
gone from nvidia-smi, so every XID series also names the PCI address it was logged for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.health.collect import Output
from gpuinfra.knowledge import xids
from gpuinfra.knowledge.xids import DEFAULT_DRAIN_XIDS
from gpuinfra.monitoring.jobmap import Holding
from gpuinfra.parsers.gpus import Gpu, parse_gpus
from gpuinfra.parsers.nvlink import parse_nvlink

PREFIX = "gpuinfra_gpu"
MIB = 1048576


@dataclass(frozen=True)
class Query:
    """One `nvidia-smi` CSV query: its name (the metric label), option and fields."""

    name: str
    option: str
    fields: tuple[str, ...]

    def command(self) -> list[str]:
        return ["nvidia-smi", f"{self.option}={','.join(self.fields)}",
                "--format=csv,noheader,nounits"]


# The GPU list first: without it no other series can be labelled.
QUERIES: tuple[Query, ...] = (
    Query("gpus", "--query-gpu", ("index", "uuid", "name", "pci.bus_id")),
    Query("telemetry", "--query-gpu", ("index", "temperature.gpu", "power.draw",
                                       "utilization.gpu", "memory.used", "memory.total")),
    Query("ecc", "--query-gpu", ("index", "ecc.errors.uncorrected.volatile.total",
                                 "ecc.errors.corrected.volatile.total")),
    Query("retired_pages", "--query-gpu", ("index", "retired_pages.double_bit.count",
                                           "retired_pages.single_bit_ecc.count",
                                           "retired_pages.pending")),
    # Ampere and later remap rows instead of retiring pages (own query, keyed by UUID).
    Query("remapped_rows", "--query-remapped-rows", (
        "gpu_uuid", "remapped_rows.correctable", "remapped_rows.uncorrectable",
        "remapped_rows.pending", "remapped_rows.failure")),
)
NVLINK_COMMAND = ["nvidia-smi", "nvlink", "--status"]
# The kernel log is read with the health check's command (gpuinfra.health.probes.KERNEL_LOG;
# the collector's whole reading is gpuinfra.health.probes.METRICS).


# (metric suffix, help, query, field, scale); the value is the field times scale.
GAUGES: tuple[tuple[str, str, str, str, float], ...] = (
    ("temperature_celsius", "GPU core temperature (temperature.gpu)", "telemetry",
     "temperature.gpu", 1),
    ("power_draw_watts", "GPU power draw (power.draw)", "telemetry", "power.draw", 1),
    ("utilization_ratio", "share of time a kernel ran (utilization.gpu / 100)", "telemetry",
     "utilization.gpu", 0.01),
    ("memory_used_bytes", "framebuffer memory in use (memory.used)", "telemetry",
     "memory.used", MIB),
    ("memory_total_bytes", "framebuffer memory (memory.total)", "telemetry", "memory.total",
     MIB),
    ("ecc_uncorrected_volatile_errors", "uncorrectable ECC errors since the driver loaded "
     "(ecc.errors.uncorrected.volatile.total)", "ecc", "ecc.errors.uncorrected.volatile.total",
     1),
    ("ecc_corrected_volatile_errors", "corrected ECC errors since the driver loaded "
     "(ecc.errors.corrected.volatile.total)", "ecc", "ecc.errors.corrected.volatile.total", 1),
    ("retired_pages_double_bit", "pages retired for double-bit ECC errors "
     "(retired_pages.double_bit.count)", "retired_pages", "retired_pages.double_bit.count", 1),
    ("retired_pages_single_bit", "pages retired for single-bit ECC errors "
     "(retired_pages.single_bit_ecc.count)", "retired_pages",
     "retired_pages.single_bit_ecc.count", 1),
    ("retired_pages_pending", "1 when a page retirement waits for a GPU reset "
     "(retired_pages.pending)", "retired_pages", "retired_pages.pending", 1),
    ("remapped_rows_uncorrectable", "rows remapped for uncorrectable errors "
     "(remapped_rows.uncorrectable)", "remapped_rows", "remapped_rows.uncorrectable", 1),
    ("remapped_rows_correctable", "rows remapped for correctable errors "
     "(remapped_rows.correctable)", "remapped_rows", "remapped_rows.correctable", 1),
    ("remapped_rows_pending", "1 when a row remap waits for a GPU reset "
     "(remapped_rows.pending)", "remapped_rows", "remapped_rows.pending", 1),
    ("remapped_rows_failure", "1 when a row remap failed: the GPU needs service "
     "(remapped_rows.failure)", "remapped_rows", "remapped_rows.failure", 1),
)
_FLAGS = {"yes": 1, "no": 0, "enabled": 1, "disabled": 0, "true": 1, "false": 0}

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)(?:\.\d)?\):"
                  r" (\d+)")
_FALLEN_GPU = re.compile(r"NVRM: The NVIDIA GPU ([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)")
_FALLEN_OFF = "fallen off the bus"
FALLEN_OFF_XID = 79  # the multi-line "fallen off the bus" message is XID 79 without its line
# Xid 154 "GPU_RECOVERY_ACTION_CHANGED": "Xid 154 will be seen in conjunction with other Xids and
# summarizes the recovery action required for other Xids ... `GPU recovery action changed from
# 0x0 (None) to 0x2 (Node Reboot Required)`" (NVIDIA Xid catalog,
# https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, row 154; logged from
# R565 on). The number is NVML's nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU reset, 2 node
# reboot, 3 drain P2P, 4 drain and reset (cuda.bindings.nvml.DeviceGpuRecoveryAction).
RECOVERY_ACTION_XID = xids.RECOVERY_ACTION_XID
# XIDs after which the GPU needs a reset or service, not just a look: the defaults of the site's
# health policy (gpuinfra.knowledge.xids: NVIDIA's Xid catalog, row by row; health_xid_policy
# changes them). Xid 154 is not in the list: it only says what another XID needs (row 154:
# "Informational only regarding another Xid"); its recovery action is judged instead
# (RECOVERY_ACTION_XID). Judged per code since boot (the alert on
# gpuinfra_gpu_xid_errors_by_code, and the node health check, gpuinfra.health.judge), never by
# the last XID: R565+ drivers log Xid 154 right after the fatal one (tests/fixtures/kernel-log).
FATAL_XIDS = DEFAULT_DRAIN_XIDS
# What a reader of XIDs says of them (a saved kernel log, `gpuinfra check dmesg`, and the node
# health check): one wording.
XID_FATAL_CAUSE = ("the driver reported a GPU error; a fatal XID means the GPU needs a reset or "
                   "service (79: fallen off the bus; 48/64/95/140: memory errors; 74: NVLink; "
                   "119/120: its GSP firmware)")
XID_FATAL_FIX = ("drain the node, `nvidia-smi -q` on the GPU, reset it (`gpuinfra-health reset-gpu "
                 "<gpu>`: nvidia-smi -r, and its XIDs count from there) or reboot; a repeated "
                 "fatal XID: reseat or RMA the GPU (NVIDIA's XID catalogue)")
XID_OTHER_CAUSE = "the driver reported a GPU error (often an application fault)"
XID_OTHER_FIX = "look up the XID in NVIDIA's catalogue; watch whether it repeats"
# A GPU reset by the node's health program (`gpuinfra-health reset-gpu`, roles/health/program.py)
# is written into the kernel log itself, through /dev/kmsg (root's only; kmsg(4) and the kernel's
# Documentation/ABI/testing/dev-kmsg: userspace can never write the kernel's own facility, so the
# line is never the driver's): "gpuinfra-health GPU reset PCI:00000000:44:00.0 (nvidia-smi -r)".
# No colon after the first word: journald takes a first word ending in ':' as the identifier of
# a kmsg line from userspace and `journalctl -o cat` prints the rest only (systemd's
# syslog_parse_identifier, used by journald-kmsg.c).
# The XIDs of that GPU logged before it are cleared: every reader judges a GPU's XIDs since its
# last reset, or since boot (the log read is this boot's). No driver line marks a reset: NVRM's
# "GPU at PCI:<bdf>: <uuid>" precedes a GPU's first Xid report, not a reset (NVIDIA's Xid guide).
RESET_MARK = "gpuinfra-health GPU reset"
_RESET = re.compile(re.escape(RESET_MARK) + r" PCI:([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)")
_RECOVERY_ACTION = re.compile(r"recovery action changed from 0x[0-9a-fA-F]+ \([^)]*\) "
                              r"to 0x([0-9a-fA-F]+)")
# An XID the driver logs as the consequence of an earlier one: "NVRM: Xid (PCI:0000:dc:00): 45,
# pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149" (R590,
# tests/fixtures/kernel-log/open-gpu-kernel-modules-1150-xid45-caused-by-149-145.txt): Xid 45
# (the process's channels cleaned up) names the XID that caused it.
_CAUSED_BY = re.compile(r"(?:caused by|due to) previous Xid (\d+)", re.IGNORECASE)
# NVML's nvmlDeviceGpuRecoveryAction_t (Xid 154): what the driver asks for, and the fix.
RECOVERY_ACTIONS: dict[int, tuple[str, str]] = {
    1: ("GPU Reset Required", "drain the node, then reset the GPU (`gpuinfra-health reset-gpu "
        "<gpu>`: nvidia-smi -r -i <gpu>) or reboot; replace it if the fault comes back"),
    2: ("Node Reboot Required", "drain the node and reboot it; replace the GPU if the fault "
        "comes back"),
    3: ("Drain P2P", "drain the node: peer-to-peer traffic through this GPU must stop, then "
        "reset it or reboot"),
    4: ("Drain and Reset", "drain the node, then reset the GPU (`gpuinfra-health reset-gpu "
        "<gpu>`: nvidia-smi -r) or reboot"),
}


@dataclass(frozen=True)
class XidEvent:
    """One XID the kernel logged: the GPU's PCI address (domain, bus, device) and the code;
    for Xid 154, the recovery action it changed to (NVML's number; None when unreadable)."""

    address: tuple[int, int, int]
    xid: int
    recovery_action: int | None = None
    caused_by: int | None = None  # "caused by previous Xid N" on the line
    cleared: bool = False  # the GPU was reset after it (RESET_MARK): no longer judged

    def to_json(self) -> dict[str, Any]:
        """``{"pci": "0000:44:00", "xid": 79, "recovery_action": null, "caused_by": null,
        "cleared": false}``."""
        return {"pci": _pci_text(self.address), "xid": self.xid,
                "recovery_action": self.recovery_action, "caused_by": self.caused_by,
                "cleared": self.cleared}


def parse_xids(text: str) -> list[XidEvent]:
    """XID events in kernel log text, in order.

    ``NVRM: Xid (PCI:0000:44:00): 79, ...`` lines, and the driver's multi-line "The NVIDIA GPU
    0000:b3:00.0 ... has fallen off the bus" message (counted as XID 79, which it is without the
    Xid line on some drivers). A :data:`RESET_MARK` line marks the earlier events of its GPU
    ``cleared`` (all are kept: the epilog counts since the prolog). Other lines are ignored: the
    log holds everything the kernel said.
    """
    events: list[XidEvent] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        reset = _RESET.search(line)
        if reset:
            address = _address(reset.groups())
            events = [replace(e, cleared=True) if e.address == address else e for e in events]
            continue
        match = _XID.search(line)
        if match:
            xid = int(match[4])
            action = _RECOVERY_ACTION.search(line) if xid == RECOVERY_ACTION_XID else None
            cause = _CAUSED_BY.search(line)
            events.append(XidEvent(_address(match.groups()[:3]), xid,
                                   int(action[1], 16) if action else None,
                                   int(cause[1]) if cause else None))
            continue
        fallen = _FALLEN_GPU.search(line)
        if fallen and any(_FALLEN_OFF in later for later in lines[number:number + 4]):
            events.append(XidEvent(_address(fallen.groups()), FALLEN_OFF_XID))
    return events


@dataclass(frozen=True)
class XidJudgement:
    """What one GPU's XIDs mean (the one rule of the health check, `gpuinfra check --dmesg`
    and the verify suite; the alert GpuFatalXid says the same in PromQL): ``fatal`` when a
    code of :data:`FATAL_XIDS` was logged or an Xid 154 asked for a recovery action; ``what``
    names the codes, the action and what caused them; ``cause`` and ``fix`` the advice."""

    address: tuple[int, int, int]
    codes: tuple[int, ...]
    fatal: bool
    what: str
    cause: str
    fix: str

    @property
    def pci(self) -> str:
        return _pci_text(self.address)


def judge_xids(events: Iterable[XidEvent],
               fatal: tuple[int, ...] = FATAL_XIDS) -> list[XidJudgement]:
    """One :class:`XidJudgement` per GPU with XIDs in ``events``, in the order first seen.

    Judged per code since boot, never by the last XID (R565+ log Xid 154 after the fatal one,
    and Xid 45 after what killed the process). Xid 154's recovery action other than none fails
    whatever the other codes; Xid 45 "caused by previous Xid N" is said with N. Events a later
    reset of their GPU cleared are not judged (:data:`RESET_MARK`)."""
    by_gpu: dict[tuple[int, int, int], list[XidEvent]] = {}
    for event in (e for e in events if not e.cleared):
        by_gpu.setdefault(event.address, []).append(event)
    found = []
    for address, seen in by_gpu.items():
        codes = tuple(dict.fromkeys(e.xid for e in seen))
        fatal_codes = [c for c in codes if c in fatal]
        causes = tuple(dict.fromkeys(e.caused_by for e in seen if e.caused_by is not None))
        actions = [e.recovery_action for e in seen if e.recovery_action]
        causes_of: dict[int, list[int]] = {}
        for e in seen:
            if e.caused_by is not None and e.caused_by not in causes_of.setdefault(e.xid, []):
                causes_of[e.xid].append(e.caused_by)
        what = "Xid " + ", ".join(
            f"{c} (caused by Xid {'/'.join(map(str, causes_of[c]))})" if causes_of.get(c)
            else str(c) for c in codes)
        if actions:
            name, action_fix = RECOVERY_ACTIONS.get(actions[-1], (f"action {actions[-1]}",
                                                                  XID_FATAL_FIX))
            first = next(i for i, e in enumerate(seen) if e.recovery_action)
            before = list(dict.fromkeys(e.xid for e in seen[:first]))
            found.append(XidJudgement(
                address, codes, True, f"{what}: the driver asks for {name} (Xid 154)",
                "the driver's recovery action" + (
                    f" after Xid {', '.join(map(str, before))}" if before else "")
                + f": {name}; the GPU is unusable until then", action_fix))
        elif fatal_codes:
            mark = " (fatal)" if len(fatal_codes) == len(codes) else \
                " (fatal: " + ", ".join(map(str, fatal_codes)) + ")"
            found.append(XidJudgement(address, codes, True, what + mark, XID_FATAL_CAUSE,
                                      XID_FATAL_FIX))
        elif causes:
            found.append(XidJudgement(
                address, codes, False, what,
                f"a process's GPU channels were cleaned up after Xid "
                f"{', '.join(map(str, causes))}: that earlier error, not the application, "
                "stopped it", f"look up Xid {', '.join(map(str, causes))} in NVIDIA's XID "
                "catalogue (144-150: NVLink; `nvidia-smi nvlink --status`); watch whether it "
                "repeats"))
        else:
            found.append(XidJudgement(address, codes, False, what, XID_OTHER_CAUSE,
                                      XID_OTHER_FIX))
    return found


# Driver failures logged without an Xid line (issue 47), named by the driver's GPU number
# ("NVRM: GPU6 ..."): the GSP firmware's heartbeat lost, a memory subsystem error, an RPC
# timeout banner, a reset-required status. Each leaves the GPU needing a reset, as Xid 119/120
# (GSP) do. Lines as open-gpu-kernel-modules#1230 shows them (595.71.05).
_DRIVER_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"NVRM: GPU(\d+) _kgspIsHeartbeatTimedOut: Heartbeat timed out"),
     "GSP heartbeat timed out"),
    (re.compile(r"NVRM: GPU(\d+) \w*CheckMemSubsysError\w*: Memory Subsystem Error detected"),
     "memory subsystem error"),
    (re.compile(r"NVRM: GPU(\d+) _kgspLogRpcTimeout: \*+ GSP Timeout"), "GSP RPC timeout"),
    (re.compile(r"NVRM: (?:GPU(\d+) )?.*\bNV_ERR_RESET_REQUIRED\b"),
     "the driver says a reset is required (NV_ERR_RESET_REQUIRED)"),
)
DRIVER_FAILURE_CAUSE = ("the GPU's firmware (GSP) or memory subsystem stopped answering the "
                        "driver: the GPU is unusable until it is reset (the driver logged no "
                        "Xid line for it)")


@dataclass(frozen=True)
class DriverFailure:
    """A GPU failure the driver logged without an Xid line: the driver's GPU number (None when
    the line does not say) and what it was."""

    gpu: int | None
    what: str


def parse_driver_failures(text: str) -> list[DriverFailure]:
    """Each driver failure of :data:`_DRIVER_FAILURES` in kernel log text, once per GPU and
    kind, in order."""
    found: list[DriverFailure] = []
    for line in text.splitlines():
        for pattern, what in _DRIVER_FAILURES:
            match = pattern.search(line)
            if match:
                failure = DriverFailure(int(match[1]) if match[1] else None, what)
                if failure not in found:
                    found.append(failure)
                break
    return found


def driver_failure_findings(failures: Iterable[DriverFailure]) -> list[tuple[str, str]]:
    """(subject, what) per GPU with driver failures: the one wording of the health check and
    `check --dmesg` (cause :data:`DRIVER_FAILURE_CAUSE`, fix XID_FATAL_FIX)."""
    by_gpu: dict[int | None, list[str]] = {}
    for failure in failures:
        by_gpu.setdefault(failure.gpu, []).append(failure.what)
    return [(f"driver's GPU{gpu}" if gpu is not None else "a GPU",
             ", ".join(whats) + " (no Xid line)") for gpu, whats in by_gpu.items()]


def _address(parts: Iterable[str]) -> tuple[int, int, int]:
    domain, bus, device = (int(p, 16) for p in parts)
    return domain, bus, device


def bus_address(pci_bus_id: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of nvidia-smi's ``00000000:19:00.0``; None when unreadable."""
    match = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)(?:\.\d)?", pci_bus_id)
    return _address(match.groups()) if match else None


def _pci_text(address: tuple[int, int, int]) -> str:
    return "{:04x}:{:02x}:{:02x}".format(*address)


# ------------------------------------------------------------------------------- the text

class _Metrics:
    """Prometheus text exposition: HELP and TYPE once per metric, samples in order."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, list[str]]] = {}

    def add(self, name: str, help_text: str, labels: Mapping[str, str], value: float) -> None:
        full = f"{PREFIX}_{name}"
        family = self._families.setdefault(full, (help_text, []))
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        family[1].append(f"{full}{{{text}}} {_number(value)}" if text else
                         f"{full} {_number(value)}")

    def text(self) -> str:
        out = []
        for name, (help_text, samples) in self._families.items():
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *samples]
        return "\n".join(out) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _value(raw: object, scale: float) -> float | None:
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, (int, float)):
        return raw * scale
    flag = _FLAGS.get(str(raw).strip().lower())
    return None if flag is None else flag * scale


def parse_query(query: Query, output: Output | None) -> list[Gpu] | None:
    """The rows of one query's output; None when it failed or cannot be read (a field the GPU
    does not have is ``[N/A]``/``[Not Supported]`` in its row, not a failure)."""
    if output is None or not output.ok:
        return None
    try:
        return parse_gpus(output.text, fields=list(query.fields)).gpus
    except ParseError:
        return None


def metrics_text(outputs: Mapping[str, Output], nvlink: Output | None,
                 kernel_log: Output | None, now: float,
                 jobs: Sequence[Holding] = ()) -> str:
    """The collector's metric text from each query's output (keyed by :data:`QUERIES` name),
    ``nvidia-smi nvlink --status`` and the kernel log (the reading
    gpuinfra.health.probes.METRICS gives all three); ``now`` is the run's Unix time;
    ``jobs``: the Slurm jobs holding GPUs (gpuinfra.monitoring.jobmap.holdings of the node's
    mapping folder), one ``job_info`` series each; an idle GPU has none."""
    metrics = _Metrics()
    parsed = {q.name: parse_query(q, outputs.get(q.name)) for q in QUERIES}
    gpus = parsed["gpus"] or []
    labels = {g.index: {"gpu": str(g.index), "uuid": g.uuid or ""} for g in gpus}
    by_uuid = {g.uuid: g.index for g in gpus if g.uuid}

    for gpu in gpus:
        metrics.add("info", "one series per GPU nvidia-smi lists (value 1)",
                    {**labels[gpu.index], "name": gpu.name or "",
                     "pci_bus_id": str(gpu.fields.get("pci.bus_id") or "")}, 1)
    for suffix, help_text, query, field, scale in GAUGES:
        for row in parsed[query] or []:
            index = by_uuid.get(row.uuid) if query == "remapped_rows" else row.index
            value = _value(row.fields.get(field), scale)
            if index in labels and value is not None:
                metrics.add(suffix, help_text, labels[index], value)

    for held in jobs:
        metrics.add("job_info", "one series per Slurm job holding the GPU (value 1): job_id "
                    "and user, from the Prolog's mapping folder", {
                        **labels.get(held.gpu, {"gpu": str(held.gpu), "uuid": ""}),
                        "job_id": held.job, "user": held.user}, 1)
    nvlink_ok = _nvlink(metrics, nvlink, labels)
    xid_ok = _xids(metrics, kernel_log, gpus, labels)
    status = {q.name: parsed[q.name] is not None for q in QUERIES}
    status.update(nvlink=nvlink_ok, kernel_log=xid_ok)
    for name, ok in status.items():
        metrics.add("collector_query_ok", "1 when the query answered and was understood",
                    {"query": name}, 1 if ok else 0)
    metrics.add("collector_last_run_timestamp_seconds", "when the collector last ran", {},
                round(now))
    return metrics.text()


def _nvlink(metrics: _Metrics, output: Output | None,
            labels: Mapping[int, Mapping[str, str]]) -> bool:
    """Active and inactive link counts per GPU, and the slowest active link's rate."""
    if output is None or not output.ok:
        return False
    try:
        status = parse_nvlink(output.text)
    except ParseError:
        return False
    for gpu in status.gpus.values():
        if gpu.index not in labels:
            continue
        active = [link for link in gpu.links.values() if link.active]
        metrics.add("nvlink_links_active", "NVLink links up (nvidia-smi nvlink --status)",
                    labels[gpu.index], len(active))
        metrics.add("nvlink_links_inactive", "NVLink links listed as <inactive>",
                    labels[gpu.index], len(gpu.inactive_links))
        rates = [link.gbytes_per_s for link in active if link.gbytes_per_s is not None]
        if rates:
            metrics.add("nvlink_link_min_gbytes_per_second",
                        "slowest active NVLink link, GB/s (gigabytes) per direction",
                        labels[gpu.index], min(rates))
    return True


def _xids(metrics: _Metrics, output: Output | None, gpus: list[Gpu],
          labels: Mapping[int, Mapping[str, str]]) -> bool:
    """XIDs since boot (or the GPU's last reset) per GPU (0 for a GPU without any), per code,
    the last one, and the last recovery action Xid 154 announced; also per address nvidia-smi
    lost."""
    if output is None or not output.ok:
        return False
    events = [e for e in parse_xids(output.text) if not e.cleared]  # since each GPU's reset
    known = {bus_address(str(g.fields.get("pci.bus_id") or "")): g.index for g in gpus}
    by_address: dict[tuple[int, int, int], list[XidEvent]] = {}
    for event in events:
        by_address.setdefault(event.address, []).append(event)
    for gpu in gpus:
        address = bus_address(str(gpu.fields.get("pci.bus_id") or ""))
        seen = by_address.get(address, []) if address else []
        base = {**labels[gpu.index], "pci_bus_id": _pci_text(address) if address else ""}
        _xid_series(metrics, base, seen)
    for address, seen in by_address.items():
        if address not in known:
            _xid_series(metrics, {"gpu": "", "uuid": "", "pci_bus_id": _pci_text(address)}, seen)
    for failure in parse_driver_failures(output.text):  # no Xid line: the driver's number
        metrics.add("driver_failures", "a GPU failure the driver logged since boot without an "
                    "Xid line (value 1; driver_gpu: the driver's GPU number)",
                    {"driver_gpu": "" if failure.gpu is None else str(failure.gpu),
                     "failure": failure.what}, 1)
    return True


def _xid_series(metrics: _Metrics, base: Mapping[str, str], seen: list[XidEvent]) -> None:
    """The XID series of one GPU (or lost address): ``seen`` are its events, in order."""
    metrics.add("xid_errors", "XID errors the driver logged since boot", base, len(seen))
    if not seen:
        return
    metrics.add("last_xid", "the last XID code logged since boot", base, seen[-1].xid)
    counts: dict[int, int] = {}
    for event in seen:
        counts[event.xid] = counts.get(event.xid, 0) + 1
    for code, count in sorted(counts.items()):
        metrics.add("xid_errors_by_code", "XID errors of one code the driver logged since boot",
                    {**base, "xid": str(code)}, count)
    actions = [e.recovery_action for e in seen if e.recovery_action is not None]
    if actions:
        metrics.add("recovery_action", "the recovery action the last Xid 154 since boot asked "
                    "for (NVML: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and "
                    "reset)", base, actions[-1])
