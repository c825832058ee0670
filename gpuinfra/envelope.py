"""The JSON envelope every `--json` output of gpuinfra shares, and findings grouped by cause.

A consumer (a ticket bot, a dashboard, a fleet script) reads one shape whatever printed it::

    {"schema": "gpuinfra/v1", "tool": "gpuinfra 0.1.0", "kind": "check",
     "host": "hgx01" | null, "inputs": ["topo.txt", ...], "profile": ... | null,
     "model": ... | null, "summary": {"ok": 26, "warn": 0, "fail": 2, "skipped": 0},
     "verdict": "fail", "causes": [{"cause": ..., "fix": ..., "severity": "fail",
     "subjects": ["GPU0-GPU1", ...]}], "findings": [...], ...}

verdict: "pass" (something was judged and nothing failed), "fail" (anything failed),
"not-checked" (nothing was judged: never a pass). ``causes`` holds each distinct cause once
with every subject it explains (a whole-fabric failure is one cause over 28 pairs, not 28
copies of one fix). docs/json.md documents the fields. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SCHEMA = "gpuinfra/v1"
VERSION = "0.1.0"  # pyproject.toml's [project] version (a unit test holds them equal)
VERDICTS = ("pass", "fail", "not-checked")


@dataclass(frozen=True)
class CauseGroup:
    """One cause and its fix, with every subject it explains, in the order first seen."""

    cause: str
    fix: str
    severity: str  # "fail" or "warn"
    checks: tuple[str, ...]
    subjects: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "fix": self.fix, "severity": self.severity,
                "checks": list(self.checks), "subjects": list(self.subjects)}


def _field(finding: Any, name: str) -> str:
    value = finding.get(name, "") if isinstance(finding, Mapping) else getattr(finding, name, "")
    return str(value or "")


def group_by_cause(findings: Iterable[Any]) -> list[CauseGroup]:
    """The failed and warned findings (objects or dicts with check, subject, severity, cause,
    fix) grouped by (severity, cause, fix): failures first, then warnings, each in the order
    first seen."""
    groups: dict[tuple[str, str, str], tuple[list[str], list[str]]] = {}
    for finding in findings:
        severity = _field(finding, "severity")
        if severity not in ("fail", "warn"):
            continue
        key = (severity, _field(finding, "cause"), _field(finding, "fix"))
        checks, subjects = groups.setdefault(key, ([], []))
        for seq, value in ((checks, _field(finding, "check")),
                           (subjects, _field(finding, "subject"))):
            if value and value not in seq:
                seq.append(value)
    ordered = sorted(groups.items(), key=lambda kv: kv[0][0] != "fail")  # stable
    return [CauseGroup(cause, fix, severity, tuple(checks), tuple(subjects))
            for (severity, cause, fix), (checks, subjects) in ordered]


def summary(findings: Sequence[Any], skipped: int = 0) -> dict[str, int]:
    """Counts per severity ("ok", "warn", "fail") and ``skipped`` (judged by nobody)."""
    counts = {"ok": 0, "warn": 0, "fail": 0}
    for finding in findings:
        severity = _field(finding, "severity")
        counts[severity] = counts.get(severity, 0) + 1
    counts["skipped"] = skipped
    return counts


def verdict(counts: Mapping[str, int], complete: bool = True) -> str:
    """"fail" if anything failed, "not-checked" if nothing was judged (or, ``complete`` False,
    part of the input could not be: a cut capture), else "pass"."""
    if counts.get("fail", 0):
        return "fail"
    judged = sum(n for k, n in counts.items() if k != "skipped")
    return "pass" if judged and complete else "not-checked"


def envelope(kind: str, findings: Sequence[Any], *, host: str | None = None,
             inputs: Sequence[str] = (), profile: str | None = None,
             model: str | None = None, skipped: int = 0, complete: bool = True,
             extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The envelope of one output of ``kind`` ("check", "nccl", "perftest", "report", ...).
    ``findings``: Finding objects (with ``to_json``) or dicts. ``complete``: False when part of
    the input could not be judged (a cut capture): no failure then reads "not-checked", never
    "pass". ``extra``: kind-specific fields, added after the common ones (they may not replace
    one)."""
    counts = summary(findings, skipped)
    body: dict[str, Any] = {
        "schema": SCHEMA, "tool": f"gpuinfra {VERSION}", "kind": kind, "host": host,
        "inputs": list(inputs), "profile": profile, "model": model, "summary": counts,
        "verdict": verdict(counts, complete),
        "causes": [g.to_json() for g in group_by_cause(findings)],
        "findings": [f.to_json() if hasattr(f, "to_json") else dict(f) for f in findings],
    }
    clash = sorted(set(extra or {}) & set(body))
    if clash:
        raise ValueError(f"extra fields may not replace the envelope's own: {clash}")
    body.update(extra or {})
    return body
