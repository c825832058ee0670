"""The verdict on one reading of a node (gpuinfra.health.collect) against its expectation.

Every rule here is the verify suite's own (one reading of a node, one copy of each rule):
GPU count, model, NVLink topology, P2P and links by :func:`gpuinfra.verdicts.check_system`;
the NVSwitch fabric by :func:`gpuinfra.verdicts.check_fabric` (through check_system); XIDs
by :func:`gpuinfra.monitoring.gpumetrics.parse_xids` and its fatal list (the alert's);
RDMA ports by gpuinfra.rdma.verdicts; MIG by gpuinfra.sharing.verdicts. Added here: what
only a running node shows (remapped rows pending or failed, persistence mode, a unit that
must run, DCGM's diagnostic). A reading that cannot be had (a command missing or failing)
is a failure naming the command, never a pass on nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.health import thresholds
from gpuinfra.health.collect import Output
from gpuinfra.health.expectation import Expectation
from gpuinfra.health.probes import DCGM_ABSENT, GPU_QUERY_FIELDS, REMAP_FIELDS
from gpuinfra.monitoring.gpumetrics import (
    DRIVER_FAILURE_CAUSE,
    FATAL_XIDS,
    XID_FATAL_FIX,
    bus_address,
    driver_failure_findings,
    judge_xids,
    parse_driver_failures,
    parse_xids,
)
from gpuinfra.parsers.fabric import parse_fabric
from gpuinfra.parsers.gpus import Gpu, parse_gpus
from gpuinfra.parsers.nvlink import parse_nvlink
from gpuinfra.parsers.p2p import parse_p2p
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.rdma.verdicts import (
    port_findings,
    ports_from_sysfs,
    presence_findings,
    rate_findings,
)
from gpuinfra.sharing.migplan import node_state, split_sections
from gpuinfra.sharing.verdicts import ADVICE, instance_findings, mig_mode_findings
from gpuinfra.spec.model import RdmaNic
from gpuinfra.verdicts import Finding, check_system

# The longest cause the scheduler is handed (Slurm keeps the whole reason; `sinfo -R` shows it
# in one line: long enough for what and where, short enough to read).
REASON_LIMIT = 120
PREFIX = "gpuinfra: "
DRIVER_CAUSE = ("the NVIDIA driver is not loaded or a GPU stopped answering (fallen off the "
                "bus, XID 79), so nvidia-smi cannot read the GPUs")
DRIVER_FIX = ("`nvidia-smi`; `journalctl -k -b | grep -i nvrm`; reboot; if a GPU stays "
              "missing, reseat or replace it")


@dataclass
class Verdict:
    """The findings on one node (passes included); ``failed`` are the ones that count.
    ``context``: said before the cause (``job 42``: the prolog's and epilog's verdicts)."""

    node: str
    findings: list[Finding] = field(default_factory=list)
    context: str = ""

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if f.failed]

    @property
    def healthy(self) -> bool:
        return not self.failed

    def reason(self) -> str:
        """One line for the scheduler: ``gpuinfra: <the first failure>`` (and how many more)."""
        failed = self.failed
        if not failed:
            return ""
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        text = (f"{self.context}: " if self.context else "") + headline(failed[0])
        room = REASON_LIMIT - len(PREFIX) - len(more)
        if len(text) > room:
            text = text[:room - 3].rstrip() + "..."
        return PREFIX + text + more

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "healthy": self.healthy, "reason": self.reason(),
                "findings": [f.to_json() for f in self.findings]}


def headline(finding: Finding) -> str:
    """``GPU0-GPU1 nvlink-topology: SYS, want NV12``: what failed, where, seen against asked."""
    want = f", want {finding.expected}" if finding.expected else ""
    return f"{finding.subject} {finding.check}: {finding.observed}{want}"


def judge(expect: Expectation, reading: Mapping[str, Output]) -> Verdict:
    verdict = Verdict(expect.node)
    if expect.gpus is not None:
        verdict.findings += _gpus(expect, reading)
    if expect.nics:
        verdict.findings += _nics(expect, reading.get("ib-ports"))
    if expect.services:
        verdict.findings += _services(expect.services, reading.get("services"))
    if "dcgm" in reading:
        verdict.findings.append(_dcgm(reading["dcgm"], expect.dcgm_diag_level))
    return verdict


def _unread(check: str, command: str, output: Output | None, cause: str, fix: str) -> Finding:
    why = "not run" if output is None else (output.error or f"exit {output.rc}")
    return Finding(check, "node", f"`{command}` answers", f"`{command}` failed: {why}", "fail",
                   cause, fix)


def _gpus(expect: Expectation, reading: Mapping[str, Output]) -> list[Finding]:
    want = expect.gpus
    assert want is not None
    gpus, unreadable = _listing(reading, f"{want.count} GPUs")
    if unreadable is not None:
        return [unreadable]
    findings: list[Finding] = []
    # Each topology capture parsed once; one that was asked for and cannot be had is named.
    # The GPU count and model are check_system's (the list's count and names among them).
    parsed: dict[str, Any] = {}
    for name, parse in _PARSERS.items():
        output = reading.get(name)
        if output is None:
            continue
        parsed[name] = _parsed(output, parse)
        if parsed[name] is None:
            findings.append(_unread("nvlink-topology" if name != "fabric" else "fabric",
                                    " ".join(name.split("-")), output, DRIVER_CAUSE, DRIVER_FIX))
    if not findings:
        p2p = [parsed[m] for m in ("p2p-r", "p2p-w") if parsed.get(m) is not None]
        findings += check_system(want.topology, want.count, want.model, topo=parsed.get("topo"),
                                 p2p=p2p, nvlink=parsed.get("nvlink"),
                                 fabric=parsed.get("fabric"),
                                 gpu_names=[g.name or "" for g in gpus])
    if want.persistence_mode:
        findings += _persistence(gpus)
    findings += thresholds.findings(expect, reading)
    findings += _remapped(gpus, reading.get("remapped"))
    findings += _xids(gpus, reading.get("kernel-log"), expect.drain_xids)
    if expect.mig is not None:
        findings += _mig(expect.mig, reading.get("mig"))
    return findings


_PARSERS = {"topo": parse_topo, "p2p-r": lambda t: parse_p2p(t, "r"),
            "p2p-w": lambda t: parse_p2p(t, "w"), "nvlink": parse_nvlink,
            "fabric": parse_fabric}


def _parsed(output: Output, parse: Any) -> Any:
    """The parsed capture; None when the command failed or its output cannot be read."""
    if not output.ok:
        return None
    try:
        return parse(output.text)
    except GpuinfraError:
        return None


def _listing(reading: Mapping[str, Output], expected: str) -> tuple[list[Gpu], Finding | None]:
    """The GPUs nvidia-smi lists, or the failure saying why they cannot be read."""
    listing = reading.get("gpus")
    if listing is None or not listing.ok:
        return [], _unread("gpu-count", "nvidia-smi --query-gpu", listing, DRIVER_CAUSE,
                           DRIVER_FIX)
    try:
        return parse_gpus(listing.text, fields=list(GPU_QUERY_FIELDS)).gpus, None
    except GpuinfraError as exc:
        return [], Finding("gpu-count", "node", expected, f"unreadable: {exc}", "fail",
                           DRIVER_CAUSE, DRIVER_FIX)


def _persistence(gpus: list[Gpu]) -> list[Finding]:
    off = [f"GPU{g.index}" for g in gpus if g.fields.get("persistence_mode") != "Enabled"]
    if not off:
        return [Finding("persistence", "node", "Enabled", "Enabled", "ok")]
    return [Finding("persistence", ",".join(off), "Enabled", "persistence mode off", "fail",
                    "nvidia-persistenced is not running with --persistence-mode: each job pays "
                    "the driver's start-up and a driver fault hides",
                    "`systemctl status nvidia-persistenced`; deploy the nvidia_driver role")]


def _remapped(gpus: list[Gpu], output: Output | None) -> list[Finding]:
    """Row remapping (Ampere and later): pending waits for a GPU reset; failure needs
    service. A GPU without remapping fails the query: nothing to judge there."""
    if output is None or not output.ok:
        return []
    try:
        rows = parse_gpus(output.text, fields=list(REMAP_FIELDS)).gpus
    except GpuinfraError:
        return []
    index = {g.uuid: g.index for g in gpus if g.uuid}
    found = []
    for row in rows:
        name = f"GPU{index.get(row.uuid, '?')}"
        if str(row.fields.get("remapped_rows.failure")) == "Yes":
            found.append(Finding(
                "remapped-rows", name, "no remapping failure", "row remapping failed", "fail",
                "an uncorrectable memory error could not be remapped: the GPU's memory is "
                "failing", "drain the node and replace the GPU (NVIDIA's row remapping guide)"))
        elif str(row.fields.get("remapped_rows.pending")) == "Yes":
            found.append(Finding(
                "remapped-rows", name, "no remapping pending", "row remapping pending", "fail",
                "a row was remapped after a memory error; it takes effect only after a GPU reset",
                "drain, then reset the idle GPU (`nvidia-smi -r -i N`) or reboot the node"))
    return found


def _xids(gpus: list[Gpu], output: Output | None,
          drain: tuple[int, ...] = FATAL_XIDS) -> list[Finding]:
    if output is None or not output.ok:
        return [_unread("xid", "journalctl -k", output, "the kernel log cannot be read, so "
                        "XIDs would go unseen", "run the check as root; `journalctl -k -b`")]
    return xid_findings(parse_xids(output.text), gpus, drain) + [
        Finding("xid", subject, "no fatal XID", what, "fail",
                DRIVER_FAILURE_CAUSE, XID_FATAL_FIX)
        for subject, what in driver_failure_findings(parse_driver_failures(output.text))]


def xid_findings(events: list[Any], gpus: list[Gpu], fatal: tuple[int, ...]) -> list[Finding]:
    """A failure per GPU whose XIDs among ``events`` (since boot, or during a job) are fatal:
    a code of ``fatal`` (the site's policy), or Xid 154 asking for a recovery action (the
    library's one rule, :func:`gpuinfra.monitoring.gpumetrics.judge_xids`); a warning per GPU
    whose XIDs the policy only warns on (said, never drained)."""
    names = {bus_address(str(g.fields.get("pci.bus_id") or "")): f"GPU{g.index}" for g in gpus}
    found = []
    for judged in judge_xids(events, fatal):
        name = names.get(judged.address)
        subject = f"{name} ({judged.pci})" if name else judged.pci
        found.append(Finding("xid", subject, "no fatal XID", judged.what,
                             "fail" if judged.fatal else "warn", judged.cause, judged.fix))
    return found


def _mig(layout: tuple[Mapping[str, int], ...], output: Output | None) -> list[Finding]:
    if output is None or not output.ok:
        return [_unread("mig", "nvidia-smi mig -lgi", output, DRIVER_CAUSE, DRIVER_FIX)]
    states = node_state(split_sections(output.text))
    found = []
    for kind, line in mig_mode_findings(states, layout):
        cause, fix = ADVICE[kind]
        found.append(Finding("mig", line.split(":")[0], "the spec's MIG mode", line, "fail",
                             cause, fix))
    for line in instance_findings(states, layout):
        cause, fix = ADVICE["instances"]
        subject, _, observed = line.partition(": ")
        found.append(Finding("mig", subject, "the spec's MIG devices", observed, "fail",
                             cause, fix))
    return found or [Finding("mig", "node", "the spec's layout", "the spec's layout", "ok")]


def _nics(expect: Expectation, output: Output | None) -> list[Finding]:
    if output is None or not output.ok:
        return [_unread("rdma", "ports in /sys/class/infiniband", output,
                        "the RDMA stack is not loaded", "`ibv_devices`; deploy the rdma role")]
    ports = ports_from_sysfs(output.text)
    nics = [RdmaNic(n.name, link_layer=n.link_layer, rate_gbps=n.rate_gbps)
            for n in expect.nics]
    found = [*presence_findings(nics, ports), *port_findings(nics, ports),
             *rate_findings(nics, ports)]
    return [replace(f, expected="ACTIVE at the spec's rate") for f in found] or \
        [Finding("rdma", "node", "ports up", "ports up", "ok")]


def _services(units: tuple[str, ...], output: Output | None) -> list[Finding]:
    states = (output.text.split() if output is not None else [])
    found = []
    for i, unit in enumerate(units):
        state = states[i] if i < len(states) else "unknown"
        if state != "active":
            found.append(Finding(
                "service", unit, "active", state, "fail",
                f"{unit} is not running" + (": the NVSwitch fabric is not managed, new CUDA "
                                           "contexts fail" if "fabric" in unit else ""),
                f"`systemctl status {unit}`, `journalctl -u {unit}` (a version differing from "
                "the driver's is the usual cause); deploy again"))
    return found


def _dcgm(output: Output, level: int) -> Finding:
    if output.ok and output.text.startswith(DCGM_ABSENT):
        return Finding("dcgm-diag", "node", f"dcgmi diag -r {level} passes",
                       "DCGM is not installed: no diagnostic run", "warn",
                       "health_dcgm_diag_level asks for DCGM's diagnostic on a node without it",
                       "install DCGM (the monitoring role's DCGM exporter brings it), or set "
                       "health_dcgm_diag_level = 0")
    if output.ok:
        return Finding("dcgm-diag", "node", f"dcgmi diag -r {level} passes", "passed", "ok")
    failed = [line.strip(" |") for line in output.text.splitlines() if "Fail" in line]
    return Finding("dcgm-diag", "node", f"dcgmi diag -r {level} passes",
                   (failed[0] if failed else output.error or f"exit {output.rc}")[:80], "fail",
                   "DCGM's diagnostic found a GPU fault", f"`dcgmi diag -r {level} -v` on the "
                   "node; NVIDIA's DCGM diagnostics guide for the failed test")


def xid_count(output: Output | None) -> int | None:
    """How many XIDs the kernel logged since boot (the prolog's mark for the epilog)."""
    if output is None or not output.ok:
        return None
    return len(parse_xids(output.text))


def job_verdict(expect: Expectation, reading: Mapping[str, Output], indices: list[int] | None,
                job: str, since: int | None) -> Verdict:
    """The prolog's (``since`` None: fatal XIDs since boot) or the epilog's (``since``: the
    XIDs after the prolog's count) verdict on the job's GPUs (``indices``; None: all)."""
    verdict = Verdict(expect.node, context=f"job {job}")
    gpus, unreadable = _listing(reading, "the job's GPUs")
    if unreadable is not None:
        verdict.findings.append(unreadable)
        return verdict
    present = {g.index for g in gpus}
    wanted = set(indices) if indices is not None else present
    for index in sorted(wanted - present):
        verdict.findings.append(Finding(
            "gpu-count", f"GPU{index}", "listed by nvidia-smi", "missing", "fail",
            "the job's GPU is gone from the driver's list: fallen off the bus (XID 79), or "
            "the driver lost it", DRIVER_FIX))
    mine = [g for g in gpus if g.index in wanted]
    verdict.findings += _remapped(mine, reading.get("remapped"))
    output = reading.get("kernel-log")
    if output is None or not output.ok:
        verdict.findings.append(_unread("xid", "journalctl -k", output, "the kernel log cannot "
                                        "be read, so XIDs would go unseen", "run as root"))
        return verdict
    events = parse_xids(output.text)
    if since is not None:
        events = events[since:]
    # The job's GPUs' XIDs, and those of an address nvidia-smi no longer lists (a GPU that
    # fell off the bus is a node fault, whoever held it); other jobs' GPUs are theirs.
    others = {bus_address(str(g.fields.get("pci.bus_id") or "")) for g in gpus if g not in mine}
    events = [e for e in events if e.address not in others]
    verdict.findings += xid_findings(events, gpus, expect.drain_xids)
    return verdict
