"""`gpuinfra report --html`: the report (gpuinfra_verify/report.py) as one self-contained page.

Inline CSS, no script, no external asset: the file opens anywhere, offline, and can be
attached to a ticket. Top: the cluster's verdict and counts (pytest's); then the failures
grouped by cause, each cause once with its fix and what it explains; then one card per node:
its verdict, GPUs, a verdict per test module, the NVLink matrix expected against seen and the
P2P matrices (a failed pair red, its cause under the matrix and on hover), NIC ports against
the spec, the MIG layout and the service states. Every value is escaped: text only enters the
page through :func:`el` (html.escape), never pasted.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuinfra.envelope import SCHEMA, VERSION
from gpuinfra_verify.report import (
    NodeReport,
    Report,
    counts,
    said,
    skip_reason,
    where,
)


class Markup(str):
    """Text that is already HTML (made by :func:`el`): not escaped again."""


def el(tag: str, *children: Any, **attrs: Any) -> Markup:
    """``<tag attrs>children</tag>``: str children and every attribute value escaped;
    Markup children kept; None and False dropped. ``class_`` is ``class``."""
    parts = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        parts.append(f' {key.rstrip("_").replace("_", "-")}="{html.escape(str(value))}"')
    body = "".join(c if isinstance(c, Markup) else html.escape(str(c))
                   for c in _flat(children) if c is not None and c is not False)
    return Markup(f"<{tag}{''.join(parts)}>{body}</{tag}>")


def _flat(items: Iterable[Any]) -> Iterable[Any]:
    for item in items:
        if isinstance(item, list | tuple):
            yield from _flat(item)
        else:
            yield item


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d1f23}
header{padding:16px 24px;color:#fff}
header.pass{background:#1f7a3a} header.fail{background:#b42318}
header.not-checked{background:#6b7280}
header h1{margin:0 0 4px;font-size:22px} header p{margin:0}
section,article{background:#fff;margin:16px 24px;padding:12px 16px;border-radius:6px;
box-shadow:0 1px 2px #0002} main{display:grid;gap:16px;margin:16px 24px;
grid-template-columns:repeat(auto-fill,minmax(560px,1fr))} main article{margin:0}
article.fail{grid-column:1/-1}
h2{font-size:17px;margin:4px 0 8px} h3{font-size:14px;margin:12px 0 4px}
.badge{font-size:12px;padding:2px 8px;border-radius:10px;color:#fff;vertical-align:middle}
.badge.pass{background:#1f7a3a} .badge.fail{background:#b42318}
.badge.not-checked{background:#6b7280}
article.fail{border-left:6px solid #b42318} article.pass{border-left:6px solid #1f7a3a}
article.not-checked{border-left:6px solid #6b7280}
ol.causes li{margin-bottom:10px} .cause-text{font-weight:600}
.fix{color:#333} .where{color:#555} code{font-size:13px}
table{border-collapse:collapse;margin:4px 0}
td,th{border:1px solid #d0d4da;padding:2px 6px;text-align:left;font-size:13px}
table.matrix td{text-align:center;min-width:44px;font-family:ui-monospace,monospace}
table.matrix td.ok{background:#d9f2df} table.matrix td.bad{background:#f8c9c4;color:#7a0e05;
font-weight:700} table.matrix td.self{background:#e5e7eb;color:#6b7280}
table.matrix td.free{background:#fff;color:#6b7280}
td small{display:block;font-weight:400;color:#555;font-size:11px}
.matrices{display:flex;flex-wrap:wrap;gap:24px} .pair-causes{color:#7a0e05;font-size:13px}
.muted{color:#6b7280} td.fail{color:#b42318;font-weight:700} td.pass{color:#1f7a3a}
footer{margin:16px 24px;color:#6b7280;font-size:12px}
"""

_WORD = {"pass": "PASS", "fail": "FAIL", "not-checked": "NOT CHECKED"}


def render_html(report: Report) -> str:
    """The page (a complete HTML document)."""
    verdict = report.verdict
    nodes = {k: sum(n.verdict == k for n in report.nodes) for k in _WORD}
    node_line = ", ".join(f"{n} {_WORD[k].lower()}" for k, n in nodes.items() if n)
    header = el("header", el("h1", f"Cluster verdict: {_WORD[verdict]}"),
                el("p", f"{len(report.nodes)} nodes ({node_line or 'none'}); "
                        f"{len(report.cases)} checks: {said(counts(report.cases))}; "
                        f"{len(report.other)} not per node"),
                id="verdict", class_=verdict, data_verdict=verdict)
    failed = [n for n in report.nodes if n.verdict == "fail"]  # the failed nodes first
    ordered = failed + [n for n in report.nodes if n.verdict != "fail"]
    body = [header, _causes(report), el("main", [_node(n) for n in ordered])]
    if report.fabric:
        body.append(_fabric(report))
    if report.jobs:
        body.append(_jobs(report))
    if report.other:
        body.append(_other(report))
    body.append(el("footer", f"gpuinfra {VERSION} ({SCHEMA}); from {report.source}"))
    page = el("html", el("head", Markup('<meta charset="utf-8">'),
                         el("title", f"gpuinfra report: {_WORD[verdict]}"),
                         el("style", Markup(CSS))),
              el("body", body), lang="en")
    return "<!DOCTYPE html>\n" + page + "\n"


def _causes(report: Report) -> Markup:
    groups = report.causes
    if not groups:
        return el("section", el("h2", "Failures by cause"), el("p", "none", class_="muted"),
                  id="causes")
    items = [el("li", el("div", g.cause, class_="cause-text"),
                el("div", "where: ", where(g.subjects, limit=12), class_="where"),
                el("div", "fix: ", el("code", g.fix), class_="fix") if g.fix else None,
                class_="cause", data_severity=g.severity, data_subjects=len(g.subjects))
             for g in groups]
    return el("section", el("h2", f"Failures by cause ({len(groups)})"),
              el("ol", items, class_="causes"), id="causes")


def _node(node: NodeReport) -> Markup:
    verdict = node.verdict
    title = el("h2", node.name, " ", el("span", _WORD[verdict], class_=f"badge {verdict}"))
    facts = [el("tr", el("th", "groups"), el("td", ", ".join(node.spec.groups) or "none"))]
    if node.gpus_expected:
        facts.append(el("tr", el("th", "GPUs"),
                        el("td", f"expected {node.gpus_expected}; seen "
                                 f"{node.gpus_seen or 'nothing'}")))
    if node.reason:
        facts.append(el("tr", el("th", "not checked"), el("td", node.reason)))
    if node.services:
        facts.append(el("tr", el("th", "services"),
                        el("td", "; ".join(f"{k} {v}" for k, v in node.services.items()))))
    parts = [title, el("table", facts, class_="facts")]
    if node.sections:
        rows = [el("tr", el("th", "module"), el("th", "verdict"), el("th", "checks"),
                    el("th", "failed / why not checked"))]
        for s in node.sections:
            why = (", ".join(c.test for c in s.cases if c.failed) if s.verdict == "fail"
                   else skip_reason(s.cases) if s.verdict == "not-checked" else "")
            rows.append(el("tr", el("td", s.label),
                           el("td", _WORD[s.verdict], class_=s.verdict),
                           el("td", said(counts(s.cases))), el("td", why)))
        parts.append(el("table", rows, class_="sections"))
    matrices = []
    if node.nvlink:
        matrices.append(_nvlink(node.nvlink))
    if node.p2p:
        matrices += [_p2p(node.p2p, mode) for mode in ("r", "w") if node.p2p.get(mode)]
    if matrices:
        parts.append(el("div", matrices, class_="matrices"))
    if node.rdma_ports:
        parts.append(_ports(node.rdma_ports))
    if node.mig:
        parts.append(_mig(node.mig))
    return el("article", parts, class_=f"node {verdict}", id=f"node-{node.name}",
              data_node=node.name, data_verdict=verdict)


def _grid(kind: str, title: str, gpus: Sequence[str], cell: Any, causes: Mapping[str, str],
          ) -> Markup:
    head = el("tr", el("th", ""), [el("th", g) for g in gpus])
    rows = [el("tr", el("th", a), [cell(i, j) for j in range(len(gpus))])
            for i, a in enumerate(gpus)]
    listed = [el("li", f"{pair}: {cause}") for pair, cause in sorted(causes.items())]
    return el("div", el("h3", title), el("table", head, rows, class_="matrix",
                                         data_matrix=kind),
              el("ul", listed, class_="pair-causes") if listed else None, class_="matrix-box")


def _nvlink(nvlink: Mapping[str, Any]) -> Markup:
    gpus = list(nvlink.get("gpus") or [])
    seen, want = nvlink.get("seen") or [], nvlink.get("expected") or []
    causes: Mapping[str, str] = nvlink.get("causes") or {}

    def cell(i: int, j: int) -> Markup:
        got = _at(seen, i, j) or "?"
        if i == j:
            return el("td", "X", class_="self")
        expected = _at(want, i, j)
        pair = f"{gpus[min(i, j)]}-{gpus[max(i, j)]}"
        cause = causes.get(pair)
        state = "bad" if cause else ("ok" if expected else "free")
        tip = (f"{pair}: expected {expected}, seen {got}" if expected
               else f"{pair}: seen {got} (no requirement)") + (f"; {cause}" if cause else "")
        return el("td", got, el("small", f"want {expected}") if expected else None,
                  class_=state, title=tip, data_pair=pair)

    return _grid("nvlink", "NVLink (topo -m): seen, against expected", gpus, cell, causes)


def _p2p(p2p: Mapping[str, Any], mode: str) -> Markup:
    gpus = list(p2p.get("gpus") or [])
    codes = p2p.get(mode) or []
    causes = {k.split(":", 1)[1]: v for k, v in (p2p.get("causes") or {}).items()
              if k.startswith(f"{mode}:")}

    def cell(i: int, j: int) -> Markup:
        code = _at(codes, i, j) or "?"
        if i == j:
            return el("td", "X", class_="self")
        pair = f"{gpus[min(i, j)]}-{gpus[max(i, j)]}"
        cause = causes.get(pair)
        state = "bad" if cause else ("ok" if code == "OK" else "free")
        return el("td", code, class_=state, data_pair=pair,
                  title=f"{pair} {mode}: {code}" + (f"; {cause}" if cause else ""))

    word = {"r": "read", "w": "write"}.get(mode, mode)
    return _grid(f"p2p-{mode}", f"P2P {word} (topo -p2p {mode})", gpus, cell, causes)


def _at(rows: Sequence[Sequence[Any]], i: int, j: int) -> Any:
    try:
        return rows[i][j]
    except (IndexError, TypeError):
        return None


def _ports(ports: Sequence[Mapping[str, Any]]) -> Markup:
    rows = [el("tr", [el("th", h) for h in ("NIC", "link layer", "state", "rate Gb/s",
                                             "spec Gb/s")])]
    for port in ports:
        up = port.get("state") == "ACTIVE" and port.get("physical_state") == "LinkUp"
        rate, spec = port.get("rate_gbps"), port.get("spec_rate_gbps")
        slow = rate is not None and spec is not None and rate < spec
        state = f"{port.get('state')}/{port.get('physical_state') or '-'}"
        rows.append(el("tr", el("td", port.get("nic")), el("td", port.get("link_layer")),
                       el("td", state, class_="pass" if up else "fail"),
                       el("td", "-" if rate is None else f"{rate:g}",
                          class_="fail" if slow else None),
                       el("td", "not checked" if spec is None else f"{spec:g}")))
    return el("div", el("h3", "RDMA ports"), el("table", rows, class_="ports"))


def _mig(mig: Mapping[str, Any]) -> Markup:
    expected = mig.get("expected") or []
    rows = [el("tr", [el("th", h) for h in ("GPU", "MIG mode", "expected", "seen")])]
    for i, gpu in enumerate(mig.get("seen") or []):
        want = expected[i] if i < len(expected) else {}
        mode = {True: "Enabled", False: "Disabled", None: "N/A"}.get(gpu.get("mode"), "?")
        if gpu.get("pending") not in (None, gpu.get("mode")):
            mode += " (change pending)"
        rows.append(el("tr", el("td", f"GPU{gpu.get('gpu')}"), el("td", mode),
                       el("td", ", ".join(f"{n}x {p}" for p, n in want.items()) or "none"),
                       el("td", ", ".join(gpu.get("devices") or []) or "none")))
    return el("div", el("h3", "MIG layout"), el("table", rows, class_="mig"))


def _fabric(report: Report) -> Markup:
    """The spec's fabric: each switch and what hangs on it, each node with its verdict."""
    verdicts = {n.name.split(".")[0]: n.verdict for n in report.nodes}
    rows = [el("tr", el("td", name), el("td", kind),
               el("td", [el("span", child + " ", class_=verdicts.get(child))
                         for child in under]))
            for name, kind, under in report.fabric]
    unit = "switch" if report.fabric_unit == "switches" else "block"
    return el("section", el("h2", f"Fabric ({len(report.fabric)} {report.fabric_unit})"),
              el("table", el("tr", el("th", unit), el("th", "holds"), el("th", "under it")),
                 rows), id="fabric")


def _jobs(report: Report) -> Markup:
    """Jobs run on the cluster (`--smoke`): each one's verdict line and what failed in it."""
    items = []
    for job in report.jobs:
        failed = [f for f in job.findings if f.get("severity") in ("fail", "warn")]
        rows = [el("tr", el("td", str(f.get("check", ""))), el("td", str(f.get("subject", ""))),
                   el("td", str(f.get("cause", "")) or str(f.get("observed", "")),
                      class_="fail" if f.get("severity") == "fail" else None))
                for f in failed]
        items.append(el("article", el("h3", job.label), el("p", job.line()),
                        el("table", rows) if rows else None,
                        el("p", "from ", el("code", job.source), class_="muted"),
                        class_=f"job {job.verdict}", data_verdict=job.verdict))
    return el("section", el("h2", f"Jobs ({len(report.jobs)})"), items, id="jobs")


def _other(report: Report) -> Markup:
    rows = [el("tr", el("td", f"{c.module}.{c.test}"),
               el("td", {"passed": "PASS", "skipped": "skipped"}.get(c.outcome, "FAIL"),
                  class_={"passed": "pass", "skipped": None}.get(c.outcome, "fail")),
               el("td", "" if c.outcome == "passed" else (c.message.splitlines() or [""])[0]))
            for c in report.other]
    return el("section", el("h2", f"Not per node ({len(report.other)})"),
              el("details", el("summary", said(counts(report.other))),
                 el("table", rows)), id="other")
