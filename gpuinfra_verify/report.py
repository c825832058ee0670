"""The verify suite's report: what a finished run's junit XML says, per node and per cause.

Every testcase of the junit XML counts (so the totals are pytest's own): those of a node
(test id ``test_x[node]``) go to the node's card, the others (cluster-wide tests, a module's
"no host of this kind" case) are counted and said apart. Per node: its groups, the GPUs the
spec expects and those nvidia-smi listed, a verdict per test module ("not checked" with the
reason when all of a module's tests skipped: never a pass), the NVLink and P2P matrices, NIC
ports, MIG layout and service states the tests recorded (gpuinfra_verify/matrices.py), and
its failures. Failures are grouped by cause over the whole cluster
(gpuinfra.envelope.group_by_cause), each cause once with its fix and every subject it
explains. Everything comes from the junit XML, so the report says no more than the tests
proved; a job's result (`gpuinfra smoke ... --json`, given with ``--smoke``) is added as
it was judged, and a failed job fails the report. Three renderings: :func:`render` (text,
`gpuinfra report`), :func:`to_json` (the gpuinfra JSON envelope, ``--json``) and
gpuinfra_verify/report_html.py (``--html``).
"""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.envelope import CauseGroup, envelope, group_by_cause
from gpuinfra.logs import journal
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra.verdicts import FABRIC_DOWN_CAUSE
from gpuinfra_verify import matrices
from gpuinfra_verify.expect import NO_HOST

WIDTH = 100  # no text line is longer
# Test module -> its label, in this order (other modules follow, by their name).
SECTIONS = {"test_gpu": "topology", "test_common": "base role"}
_ORDER = list(SECTIONS)
SERVICES = ("chrony", "sshd", "containerd")  # properties holding a service's state
OUTCOMES = ("passed", "failed", "error", "skipped")  # pytest's words, in its summary's order
# A finding's line in test_gpu's failure message (gpuinfra_verify.expect.format_finding).
_CHECK_LINE = re.compile(r"([a-z0-9-]+) (\S+): expected (.*), observed (.*)")


@dataclass(frozen=True)
class JunitCase:
    """One testcase of the junit XML. ``node``: the host of its id, "" for a test that is not
    per node; ``outcome``: "passed", "failed", "error" or "skipped"; ``message``: the failure
    or skip message (junit's message attribute: pytest may cut a long one short)."""

    node: str
    module: str  # e.g. "test_gpu"
    test: str  # e.g. "test_p2p"
    outcome: str
    message: str = ""
    props: dict[str, str] = field(default_factory=dict)
    no_host: bool = False  # the module's one case when no host of the site is of its kind
    detail: str = ""  # the failure element's text (the whole message, or a traceback)

    @property
    def failed(self) -> bool:
        return self.outcome in ("failed", "error")


def read_junit(text: str) -> list[JunitCase]:
    """Every testcase of a pytest junit XML, in file order."""
    cases = []
    for element in ET.fromstring(text).iter("testcase"):
        name = element.get("name", "")
        test, node = (name.split("[", 1) + [""])[:2]
        node = node.rsplit("]", 1)[0]
        outcome, message, detail = "passed", "", ""
        for kind in ("failure", "error", "skipped"):
            child = element.find(kind)
            if child is not None:
                outcome = {"failure": "failed"}.get(kind, kind)
                message = (child.get("message") or child.text or "").strip()
                detail = (child.text or "").strip()
                break
        props = {p.get("name", ""): p.get("value", "") for p in element.iter("property")}
        module = element.get("classname", "").rsplit(".", 1)[-1]
        no_host = node in (NO_HOST, "NOTSET")
        cases.append(JunitCase("" if no_host else node, module, test, outcome, message, props,
                               no_host, detail))
    return cases


def counts(cases: Iterable[JunitCase]) -> dict[str, int]:
    """Testcases per outcome (every outcome, zeros included)."""
    seen = Counter(c.outcome for c in cases)
    return {k: seen.get(k, 0) for k in OUTCOMES}


def said(numbers: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in numbers.items() if n) or "none run"


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    for prefix in ("Failed: ", "Skipped: ", "AssertionError: "):
        line = line.removeprefix(prefix)
    return line


def skip_reason(cases: Sequence[JunitCase]) -> str:
    """The most common skip reason of ``cases`` (and how many others there are)."""
    reasons = Counter(_first_line(c.message) or "skipped" for c in cases if c.outcome == "skipped")
    if not reasons:
        return ""
    top, _ = reasons.most_common(1)[0]
    more = len(reasons) - 1
    return top + (f" (+{more} other reason{'s' * (more > 1)})" if more else "")


@dataclass
class Section:
    """One test module's cases on one node."""

    label: str
    cases: list[JunitCase]

    @property
    def verdict(self) -> str:
        return _verdict(self.cases)


def _verdict(cases: Sequence[JunitCase]) -> str:
    if any(c.failed for c in cases):
        return "fail"
    return "pass" if any(c.outcome == "passed" for c in cases) else "not-checked"


def _json_prop(cases: Iterable[JunitCase], name: str) -> Any:
    for case in cases:
        if name in case.props:
            try:
                return json.loads(case.props[name])
            except ValueError:
                return None
    return None


@dataclass
class NodeReport:
    """One node: its spec, its cases by module, what the tests recorded, its findings."""

    spec: NodeSpec
    cases: list[JunitCase]
    sections: list[Section] = field(default_factory=list)
    findings: list[dict[str, str]] = field(default_factory=list)
    nvlink: dict[str, Any] | None = None
    p2p: dict[str, Any] | None = None
    rdma_ports: list[dict[str, Any]] | None = None
    mig: dict[str, Any] | None = None
    services: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def verdict(self) -> str:
        return _verdict(self.cases)

    @property
    def reason(self) -> str:
        """Why the node was not checked ("" when it was)."""
        if self.verdict != "not-checked":
            return ""
        return skip_reason(self.cases) if self.cases else "no test results for this node"

    @property
    def gpus_expected(self) -> str | None:
        gpus = self.spec.gpus
        return None if gpus is None else f"{gpus.count}x {gpus.model.key} ({gpus.topology.name})"

    @property
    def gpus_seen(self) -> str | None:
        seen = next((c.props["gpus_seen"] for c in self.cases if "gpus_seen" in c.props), None)
        return None if seen in (None, "", "?") else seen

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.name, "groups": list(self.spec.groups), "verdict": self.verdict,
            "reason": self.reason or None, "tests": counts(self.cases),
            "gpus": {"expected": self.gpus_expected, "seen": self.gpus_seen},
            "sections": [{"name": s.label, "verdict": s.verdict, "tests": counts(s.cases),
                          "reason": (skip_reason(s.cases) if s.verdict == "not-checked" else None),
                          "failed": [c.test for c in s.cases if c.failed]}
                         for s in self.sections],
            "nvlink": self.nvlink, "p2p": self.p2p, "rdma_ports": self.rdma_ports,
            "mig": self.mig, "services": self.services,
            "findings": self.findings,
        }


def failure_findings(case: JunitCase) -> list[dict[str, str]]:
    """The failed findings of a failed case: those it recorded (test_gpu), else each
    ``cause:``/``fix:`` block of its message (the suite's failure form), else one finding
    whose cause is the message's first line."""
    recorded = _json_prop([case], matrices.FAILED)
    if isinstance(recorded, dict):
        found = matrices.expand_failed(recorded)
        if found:
            return found
    blocks: list[dict[str, str]] = []
    what = ""
    text = case.detail if "\n  cause: " in case.detail else case.message
    for raw in text.splitlines():
        line = raw.strip()
        if raw.startswith("  cause: "):
            found = _CHECK_LINE.fullmatch(what)
            check, subject, expected, observed = (found.groups() if found
                                                  else (case.test, case.test, "", what))
            blocks.append({"check": check, "subject": subject, "expected": expected,
                           "observed": observed, "severity": "fail",
                           "cause": line.removeprefix("cause: "), "fix": ""})
        elif raw.startswith("  fix: ") and blocks:
            blocks[-1]["fix"] = line.removeprefix("fix: ")
        elif line and not raw.startswith(" "):
            what = _first_line(line)
    if blocks:
        return blocks
    first = _first_line(case.message) or case.outcome
    return [{"check": case.test, "subject": case.test, "expected": "", "observed": first,
             "severity": "fail", "cause": f"{case.test}: {first}", "fix": ""}]


def _fold_fabric(node: NodeReport, findings: list[dict[str, str]]) -> list[dict[str, str]]:
    """Where the verdict library judged the whole NVSwitch fabric down (gpuinfra.verdicts
    gives every pair FABRIC_DOWN_CAUSE), its pairs are shown as one finding, "all 28 pairs",
    and every GPU's inactive links with them: the report decides no cause of its own."""
    pairs = [f for f in findings
             if f["check"] == "nvlink-topology" and f["cause"] == FABRIC_DOWN_CAUSE]
    if len(pairs) < 2:
        return findings
    fix = pairs[0]["fix"]
    links = [f for f in findings
             if f["check"] == "nvlink-links" and f["observed"] == "all links inactive"]
    seen = ", ".join(sorted({f["observed"] for f in pairs}))
    folded = [{"check": "nvlink-topology", "subject": f"all {len(pairs)} pairs",
               "expected": pairs[0]["expected"], "observed": f"{seen} on every pair",
               "severity": "fail", "cause": FABRIC_DOWN_CAUSE, "fix": fix}]
    if links:
        folded.append({"check": "nvlink-links", "subject": f"all {len(links)} GPUs",
                       "expected": links[0]["expected"], "observed": "all links inactive",
                       "severity": "fail", "cause": FABRIC_DOWN_CAUSE, "fix": fix})
    for pair in pairs:  # the matrix's cells name the folded cause
        node.nvlink.setdefault("causes", {})[pair["subject"]] = FABRIC_DOWN_CAUSE
    return folded + [f for f in findings if f not in pairs and f not in links]


def node_report(spec: NodeSpec, cases: list[JunitCase]) -> NodeReport:
    node = NodeReport(spec, cases)
    modules = sorted({c.module for c in cases},
                     key=lambda m: (_ORDER.index(m) if m in SECTIONS else len(_ORDER), m))
    node.sections = [Section(SECTIONS.get(m, m.removeprefix("test_")),
                             [c for c in cases if c.module == m]) for m in modules]
    seen = _json_prop(cases, matrices.NVLINK_SEEN)
    if isinstance(seen, dict):
        wanted = _json_prop(cases, matrices.NVLINK_EXPECTED) or {}
        node.nvlink = {"gpus": seen.get("gpus", []), "seen": seen.get("cells", []),
                       "expected": wanted.get("cells", []), "causes": {}}
    p2p = _json_prop(cases, matrices.P2P)
    node.p2p = p2p if isinstance(p2p, dict) and p2p.get("gpus") else None
    if node.p2p is not None:
        node.p2p["causes"] = {}
    ports = _json_prop(cases, matrices.RDMA_PORTS)
    node.rdma_ports = ports if isinstance(ports, list) else None
    mig = _json_prop(cases, matrices.MIG_LAYOUT)
    node.mig = mig if isinstance(mig, dict) else None
    props = {k: v for c in cases for k, v in c.props.items()}
    node.services = {name: props[name] for name in SERVICES if props.get(name)}
    findings: list[dict[str, str]] = []
    for case in cases:
        if not case.failed:
            continue
        for found in failure_findings(case):
            target = {"nvlink-topology": node.nvlink, "p2p-r": node.p2p,
                      "p2p-w": node.p2p}.get(found["check"])
            if target is not None and found["subject"]:
                causes = target.setdefault("causes", {})
                key = found["subject"] if found["check"] == "nvlink-topology" \
                    else f"{found['check'][-1]}:{found['subject']}"
                causes.setdefault(key, found["cause"])
            findings.append(found)
    node.findings = [{**f, "node": node.name,
                      "subject": f"{node.name} {f['subject']}".strip()}
                     for f in _fold_fabric(node, findings)]
    return node


@dataclass
class Report:
    """The whole run: per node, the cases that are not per node, the causes."""

    source: str
    cases: list[JunitCase]
    nodes: list[NodeReport]
    other: list[JunitCase]  # not per node (cluster-wide tests, no host of a module's kind)
    unknown: list[str]  # hosts with results that the inventory does not name
    jobs: list[JobResult] = field(default_factory=list)  # `--smoke`: jobs run on the cluster
    # The spec's fabric (fabric_switches), leaves first: (switch, "nodes" or "switches", the
    # short names under it), or its NVLink blocks (fabric_blocks): (block, "nodes", ...);
    # empty without one. ``fabric_unit``: what its rows are.
    fabric: list[tuple[str, str, list[str]]] = field(default_factory=list)
    fabric_unit: str = "switches"

    @property
    def findings(self) -> list[dict[str, str]]:
        out = [f for node in self.nodes for f in node.findings]
        for case in self.other + [c for c in self.cases if c.node in self.unknown]:
            if case.failed:
                out += [{**f, "node": case.node or None,
                         "subject": (case.node or "cluster")
                         + (f" {f['subject']}" if f["subject"] else "")}
                        for f in failure_findings(case)]
        for job in self.jobs:
            out += [{**f, "node": None, "subject": f"{job.label} {f['subject']}".strip()}
                    for f in job.findings if f.get("severity") in ("fail", "warn")]
        return out

    @property
    def causes(self) -> list[CauseGroup]:
        return group_by_cause(self.findings)

    @property
    def verdict(self) -> str:
        verdict = _verdict(self.cases)
        if any(job.verdict != "pass" for job in self.jobs) and verdict != "not-checked":
            return "fail"
        return verdict


# ---------------------------------------------------------------------------- jobs


@dataclass(frozen=True)
class JobResult:
    """A job's judged result, from the JSON envelope `gpuinfra smoke run|check --json`
    printed: its verdict, where it ran, its figures and its findings as judged there."""

    source: str  # the file it was read from
    verdict: str  # "pass", "fail" or "not-checked"
    backend: str
    hosts: tuple[str, ...]
    ranks: int
    world_size: int
    inputs: tuple[str, ...]  # e.g. ("job 7 on lab-worker1",)
    busbw_gbytes_per_s: float | None  # the lowest rank's
    step_ms: float | None  # the slowest rank's median step
    findings: tuple[dict[str, Any], ...]

    @property
    def label(self) -> str:
        named = [i for i in self.inputs if i != "-"]  # "-": judged from standard input
        return "smoke job" + (f" ({named[0]})" if named else "")

    def line(self) -> str:
        """``PASS: 2 of 2 ranks on lab-worker1, lab-worker2 (gloo), ...``"""
        figures = [f"{self.ranks} of {self.world_size} ranks on "
                   f"{', '.join(self.hosts) or 'no host'} ({self.backend})"]
        if self.busbw_gbytes_per_s is not None:
            figures.append(f"all-reduce {self.busbw_gbytes_per_s:g} GB/s (lowest rank)")
        if self.step_ms is not None:
            figures.append(f"median step {self.step_ms:g} ms (slowest rank)")
        return f"{self.verdict.upper().replace('-', ' ')}: {', '.join(figures)}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "smoke", "source": self.source, "verdict": self.verdict,
                "backend": self.backend, "hosts": list(self.hosts), "ranks": self.ranks,
                "world_size": self.world_size, "inputs": list(self.inputs),
                "busbw_gbytes_per_s": self.busbw_gbytes_per_s, "step_ms": self.step_ms}


def _numbers(results: Sequence[Any], key: str) -> list[float]:
    return [float(r[key]) for r in results if isinstance(r, dict)
            and isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]


def job_result(data: Any, source: str) -> JobResult:
    """The smoke job's envelope read from ``source``; GpuinfraError naming the file and what
    is wrong when it is not one."""
    from gpuinfra.errors import GpuinfraError

    fix = "give the file `gpuinfra smoke run|check ... --json` printed"
    if not isinstance(data, dict) or data.get("kind") != "smoke":
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise GpuinfraError(f"{source}: not a smoke job's result (kind {kind!r}, expected "
                            f"'smoke'): {fix}")
    verdict, results = data.get("verdict"), data.get("results")
    if verdict not in ("pass", "fail", "not-checked") or not isinstance(results, list) \
            or not isinstance(data.get("findings"), list):
        raise GpuinfraError(f"{source}: a smoke envelope without its verdict, results or "
                            f"findings (verdict {verdict!r}): {fix}")
    ranks = {r.get("rank") for r in results if isinstance(r, dict)}
    world = [int(r["world_size"]) for r in results if isinstance(r, dict)
             and isinstance(r.get("world_size"), int)]
    hosts = data.get("hosts") if isinstance(data.get("hosts"), list) else []
    busbw, steps = _numbers(results, "busbw_gbytes_per_s"), _numbers(results, "step_ms")
    return JobResult(source, str(verdict), str(data.get("backend") or "?"),
                     tuple(str(h) for h in hosts), len(ranks),
                     max(world, default=int(data.get("nodes") or 0)
                         * int(data.get("procs_per_node") or 0)),
                     tuple(str(i) for i in data.get("inputs") or []),
                     min(busbw) if busbw else None, max(steps) if steps else None,
                     tuple(f for f in data["findings"] if isinstance(f, dict)))


def build(spec: ClusterSpec, cases: Sequence[JunitCase], source: str,
          jobs: Sequence[JobResult] = ()) -> Report:
    names = {n.name for n in spec.nodes}
    nodes = [node_report(n, [c for c in cases if c.node == n.name]) for n in spec.nodes]
    unknown = sorted({c.node for c in cases if c.node} - names)
    return Report(source, list(cases), nodes, [c for c in cases if not c.node], unknown,
                  list(jobs), fabric_rows(spec),
                  "switches" if spec.fabric is not None else "NVLink blocks")


def fabric_rows(spec: ClusterSpec) -> list[tuple[str, str, list[str]]]:
    """The fabric as the report shows it: each switch (leaves first, as topology.conf has
    them) and the nodes (short names) or switches under it; or each NVLink block and its
    nodes."""
    from gpuinfra.slurm.topology import topology_lines

    rows = []
    for line in topology_lines(spec):
        name, under = (part.split("=", 1)[1] for part in line.split())
        kind = line.split()[1].split("=", 1)[0].lower()
        rows.append((name, kind, under.split(",")))
    return rows


# ---------------------------------------------------------------------------- text


def where(subjects: Sequence[str], limit: int = 8) -> str:
    """``lab-worker3 GPU0-GPU1, GPU0`` from subjects ``<node> <what>``: each node named once,
    at most ``limit`` subjects (then how many more)."""
    by_node: dict[str, list[str]] = {}
    for subject in subjects:
        node, _, what = subject.partition(" ")
        by_node.setdefault(node, []).append(what)
    parts, shown = [], 0
    for node, whats in by_node.items():
        named = [w for w in whats if w][: max(0, limit - shown)]
        shown += len(named)
        more = len([w for w in whats if w]) - len(named)
        parts.append(node + (f" {', '.join(named)}" if named else "")
                     + (f" (+{more} more)" if more else ""))
    return "; ".join(parts)


def _wrap(text: str, indent: str, first: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first or indent, subsequent_indent=indent,
                         break_on_hyphens=False) or [first.rstrip()]


def _fit(text: str) -> str:
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def _node_lines(node: NodeReport, width: int, numbers: dict[tuple[str, str], int]) -> list[str]:
    head = f"{node.name:<{width}}  "
    total = f"{len(node.cases)} checks: {said(counts(node.cases))}"
    if node.verdict == "not-checked":
        return _wrap(f"not checked ({node.reason})", " " * (width + 2), head)
    if node.verdict == "pass":
        gpus = ""
        if node.gpus_expected:
            seen = (node.gpus_seen or "0").split("x ")[0]
            gpus = f"; GPUs {node.gpus_expected.split(' (')[0]}, {seen} seen"
        return [_fit(f"{head}pass  {total}{gpus}")]
    lines = [_fit(f"{head}FAIL  {total}")]
    pad = "  " + " " * 11
    if node.gpus_expected:
        lines += _wrap(f"expected {node.gpus_expected}, seen {node.gpus_seen or 'nothing'}",
                       pad, f"  {'GPUs':<11}")
    for section in node.sections:
        if section.verdict == "pass":
            text = f"pass ({said(counts(section.cases))})"
        elif section.verdict == "not-checked":
            text = f"not checked ({skip_reason(section.cases)})"
        else:
            refs = sorted({numbers[(f["cause"], f["fix"])] for f in node.findings
                           if (f["cause"], f["fix"]) in numbers
                           and f["check"] in _checks(section)})
            failed = ", ".join(c.test for c in section.cases if c.failed)
            text = f"FAIL {failed}" + (f" (cause {', '.join(map(str, refs))})" if refs else "")
        lines += _wrap(text, pad, f"  {section.label:<11}")
    if node.services:
        services = "; ".join(f"{k} {v}" for k, v in node.services.items())
        lines += _wrap(services, pad, f"  {'services':<11}")
    return lines


def _checks(section: Section) -> set[str]:
    """The check names a section's findings carry (test_gpu's families, else test names)."""
    names = {c.test for c in section.cases}
    for case in section.cases:
        if case.failed:
            names |= {f["check"] for f in failure_findings(case)}
    return names


def render(spec: ClusterSpec, cases: Sequence[JunitCase], source: str) -> tuple[str, int]:
    """(the report text, exit code: 0 no failure, 1 any failure)."""
    report = build(spec, cases, source)
    return render_report(report), 1 if report.verdict == "fail" else 0


def render_report(report: Report) -> str:
    total = counts(report.cases)
    lines = [_fit(f"gpuinfra report: {len(report.nodes)} nodes, {len(report.cases)} checks: "
                  f"{said(total)} ({report.source})")]
    if report.other:
        wide = sum(not c.no_host for c in report.other)
        parts = [f"{wide} cluster-wide"] * bool(wide)
        parts += [f"{len(report.other) - wide} for no host of their kind"] * \
            bool(len(report.other) - wide)
        lines += _wrap(f"{len(report.cases) - len(report.other)} per node, "
                       f"{len(report.other)} not per node ({', '.join(parts)}: "
                       f"{said(counts(report.other))})", "  ", "  ")
    causes = report.causes
    numbers = {(g.cause, g.fix): i for i, g in enumerate(causes, 1)}
    width = max((len(n.name) for n in report.nodes), default=4)
    for node in report.nodes:
        lines += _node_lines(node, width, numbers)
    if report.unknown:
        lines += _wrap(", ".join(report.unknown), "  ", "results for hosts not in the inventory: ")
    if causes:
        failed = sum(c.failed for c in report.cases)
        lines.append(f"failures by cause ({len(causes)} causes, {failed} failed checks):")
        for i, group in enumerate(causes, 1):
            lines += _wrap(group.cause, "    ", f"[{i}] ")
            lines += _wrap(where(group.subjects), "      ", "    on: ")
            if group.fix:
                lines += _wrap(group.fix, "      ", "    fix: ")
    if report.fabric:
        lines.append(f"fabric ({len(report.fabric)} {report.fabric_unit}, as Slurm's "
                     "topology.conf has it):")
        for name, kind, under in report.fabric:
            lines += _wrap(", ".join(under), "      ", f"  {name} ({kind}): ")
    lines += _log_queries(report)
    for job in report.jobs:
        lines += _wrap(job.line(), "    ", f"{job.label}: ")
    lines.append("verdict: " + _verdict_line(report))
    return "\n".join(lines)


def _log_queries(report: Report) -> list[str]:
    """For each failed node that sends its journal to the head (the logs role), the command
    that shows its last hour there (roles/logs/README.md: narrow --since/--until)."""
    failed = [n.spec for n in report.nodes if n.verdict == "fail" and not n.spec.is_head
              and n.spec.settings.get("logs_enabled")]
    if not failed:
        return []
    return ["logs of the failed nodes, their last hour (run on the head):"] + [
        f"  {journal.query(spec.short_name, '-1h')}" for spec in failed]


def _verdict_line(report: Report) -> str:
    nodes = Counter(n.verdict for n in report.nodes)
    said = ", ".join(f"{nodes[k]} {w}" for k, w in
                     (("pass", "passed"), ("fail", "failed"), ("not-checked", "not checked"))
                     if nodes[k])
    head = {"fail": "FAILED", "pass": "all checks passed",
            "not-checked": "NOT CHECKED (nothing ran)"}[report.verdict]
    jobs = Counter(j.verdict for j in report.jobs)
    if report.jobs:
        said += f"; jobs: {', '.join(f'{n} {k}' for k, n in sorted(jobs.items()))}"
    return f"{head} (nodes: {said or 'none'})"


# ---------------------------------------------------------------------------- JSON


def to_json(report: Report, inputs: Sequence[str] = ()) -> dict[str, Any]:
    """The gpuinfra JSON envelope (kind "report"): findings are each passed test (ok) and each
    failed finding; ``tests`` has pytest's counts; ``nodes`` each node's card."""
    findings: list[dict[str, Any]] = []
    for case in report.cases:
        if case.outcome == "passed":
            findings.append({"check": case.test, "subject": case.node or "cluster",
                             "expected": "", "observed": "passed", "severity": "ok",
                             "cause": "", "fix": "", "node": case.node or None})
    findings += report.findings
    skipped = sum(c.outcome == "skipped" for c in report.cases)
    tests = {**counts(report.cases), "total": len(report.cases),
             "not_per_node": len(report.other)}
    return envelope("report", findings, inputs=inputs, skipped=skipped,
                    extra={"tests": tests, "nodes": [n.to_json() for n in report.nodes],
                           "unknown_nodes": report.unknown,
                           "jobs": [j.to_json() for j in report.jobs]})
