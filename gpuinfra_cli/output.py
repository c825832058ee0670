"""What `check`, `nccl check` and `perftest check` print: text a person pastes into a ticket,
and the JSON envelope (gpuinfra.envelope) a program reads.

The text fits 100 columns. Its first line says what was judged and the verdict; then one line
per check and outcome, its subjects counted ("28 pairs: NV18"), never one row per pair; then
each cause once, with its fix and every subject it explains ("all 28 pairs"). Where an
expectation carries its provenance in parentheses, that goes on its own ``source:`` line.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuinfra.captures import CaptureVerdict
from gpuinfra.envelope import envelope, group_by_cause, summary, verdict

WIDTH = 100
MARKS = {"ok": "ok", "warn": "warn", "fail": "FAIL"}
VERDICT_WORDS = {"pass": "PASS", "fail": "FAIL", "not-checked": "NOT CHECKED (never a pass)"}
_PAIR = re.compile(r"GPU(\d+)-GPU(\d+)")
_NOUNS = ((_PAIR, "pairs"), (re.compile(r"GPU\d+"), "GPUs"),
          (re.compile(r"GPU\d+ link \d+"), "links"))
SOURCE_MIN = 30  # a parenthesised provenance shorter than this stays in its line


def field(finding: Any, name: str) -> str:
    value = finding.get(name, "") if isinstance(finding, Mapping) else getattr(finding, name, "")
    return str(value or "")


def wrap(text: str, indent: int) -> list[str]:
    """``text`` in lines of at most WIDTH columns (a word longer than that stays whole), each
    line after the first indented by ``indent``."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=" " * indent, break_long_words=False,
                         break_on_hyphens=False) or [""]


def split_source(expected: str) -> tuple[str, str]:
    """``">= 180 Gb/s for a 200 Gb/s NIC (Azure HPC ... 180.0)"`` -> (the expectation, its
    source) when the text ends in a long parenthesis; else (expected, "")."""
    if not expected.endswith(")"):
        return expected, ""
    depth = 0
    for index in range(len(expected) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(expected[index], 0)
        if depth == 0:
            main, source = expected[:index].rstrip(), expected[index + 1:-1]
            if main and len(source) >= SOURCE_MIN:
                return main, source
            break
    return expected, ""


def _noun(subjects: Sequence[str]) -> str:
    for pattern, noun in _NOUNS:
        if all(pattern.fullmatch(s) for s in subjects):
            return noun
    return ""


def subjects_text(subjects: Sequence[str], of_check: int, severity: str) -> str:
    """Subjects said compactly: one by name, all of a check's counted ("all 28 pairs"), the
    pairs of one GPU as such ("GPU3 with GPU0,1,2 (3 pairs)"), else listed."""
    if len(subjects) == 1:
        return subjects[0]
    noun = _noun(subjects)
    if severity == "ok" and not noun and len(subjects) > 3:
        return f"{len(subjects)} subjects"
    if noun and (severity == "ok" or len(subjects) == of_check):
        return f"{'all ' if severity != 'ok' else ''}{len(subjects)} {noun}"
    if noun == "pairs":
        pairs = [tuple(map(int, _PAIR.fullmatch(s).groups())) for s in subjects]  # type: ignore
        shared = set(pairs[0]).intersection(*map(set, pairs))
        if shared:
            gpu = min(shared)
            others = ",".join(str(b if a == gpu else a) for a, b in pairs)
            return f"GPU{gpu} with GPU{others} ({len(pairs)} pairs)"
    return ", ".join(subjects)


def _rows(findings: Sequence[Any]) -> list[tuple[str, str, str, str, list[str]]]:
    """(severity, check, expected, observed, subjects) per check and outcome: a check's passes
    on one row (its values counted where they differ), then each distinct failure or warning;
    checks in the order first seen."""
    order = {"ok": 0, "warn": 1, "fail": 2}
    rows: dict[tuple[str, str, str, str, str], list[Any]] = {}
    for f in findings:
        severity = field(f, "severity")
        key = (field(f, "check"), severity, "", "", "") if severity == "ok" else (
            field(f, "check"), severity, field(f, "expected"), field(f, "observed"),
            field(f, "cause"))
        rows.setdefault(key, []).append(f)
    checks = list(dict.fromkeys(key[0] for key in rows))
    out = []
    for (check, severity, *_), group in sorted(
            rows.items(), key=lambda kv: (checks.index(kv[0][0]), order.get(kv[0][1], 3))):
        out.append((severity, check, _values(group, "expected"), _values(group, "observed"),
                    [field(f, "subject") for f in group]))
    return out


def _values(group: Sequence[Any], name: str, most: int = 3) -> str:
    """The one value of ``name`` in ``group``, or each with its count ("NV1 (6), NV2 (6)")."""
    counts: dict[str, int] = {}
    for f in group:
        counts[field(f, name)] = counts.get(field(f, name), 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    said = [f"{value} ({n})" for value, n in list(counts.items())[:most]]
    return ", ".join(said) + (f" and {len(counts) - most} more" if len(counts) > most else "")


def _per_check(findings: Iterable[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in findings:
        counts[field(f, "check")] = counts.get(field(f, "check"), 0) + 1
    return counts


def head_line(what: str, counts: Mapping[str, int], causes: int, forced: str | None = None
              ) -> str:
    """``what: FAIL, 28 of 30 checks failed (1 cause)``."""
    word = VERDICT_WORDS[forced or verdict(counts)]
    judged = sum(n for k, n in counts.items() if k != "skipped")
    parts = [f"{judged} checks"]
    if counts.get("fail"):
        parts = [f"{counts['fail']} of {judged} checks failed"]
    if counts.get("warn"):
        parts.append(f"{counts['warn']} warning(s)")
    if counts.get("skipped"):
        parts.append(f"{counts['skipped']} not judged")
    tail = f" ({causes} cause{'s' if causes != 1 else ''})" if causes else ""
    return f"{what}: {word}, {', '.join(parts)}{tail}"


def render(findings: Sequence[Any], what: str, skipped: int = 0,
           forced: str | None = None, head: str | None = None) -> str:
    """The ticket text of ``findings`` (Finding objects or dicts) judged as ``what`` (``head``:
    the first line instead of the one said from the counts)."""
    causes = group_by_cause(findings)
    lines = wrap(head or head_line(what, summary(findings, skipped), len(causes), forced), 4)
    per_check = _per_check(findings)
    width = max((len(field(f, "check")) for f in findings), default=0)
    for severity, check, expected, observed, subjects in _rows(findings):
        main, source = split_source(expected)
        said = subjects_text(subjects, per_check[check], severity)
        body = f"{said}: {observed}" + (f" (expected {main})" if main and main != observed
                                        else "")
        lines += wrap(f"{MARKS.get(severity, severity):5} {check:{width}}  {body}", width + 8)
        if source:
            lines += wrap(f"{'':{width + 8}}source: {source}", width + 16)
    for group in causes:
        lines.append("")
        lines += wrap(f"{MARKS[group.severity]:5} {group.cause}", 6)
        on = "; ".join(check if subjects in (["node"], ["job"]) else
                       f"{check}: {subjects_text(subjects, per_check[check], group.severity)}"
                       for check, subjects in _subjects_of(findings, group).items())
        lines += wrap(f"      on:  {on}", 11)
        lines += wrap(f"      fix: {group.fix}", 11)
    return "\n".join(lines)


def _subjects_of(findings: Sequence[Any], group: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in findings:
        if (field(f, "severity"), field(f, "cause"), field(f, "fix")) == \
                (group.severity, group.cause, group.fix):
            out.setdefault(field(f, "check"), []).append(field(f, "subject"))
    return out


def matrix(findings: Sequence[Any], check: str, gpus: int, title: str) -> list[str]:
    """A GPU x GPU grid of one pair check: '.' as expected, the cell seen where not, '-' not
    required, 'X' itself."""
    cells: dict[tuple[int, int], str] = {}
    for f in findings:
        found = _PAIR.fullmatch(field(f, "subject"))
        if field(f, "check") != check or not found:
            continue
        a, b = map(int, found.groups())
        seen = "." if field(f, "severity") == "ok" else field(f, "observed").split()[0][:4]
        cells[a, b] = cells[b, a] = seen
    if not cells:
        return []
    lines = [title, "      " + "".join(f"{f'GPU{j}':>5}" for j in range(gpus))]
    for i in range(gpus):
        row = "".join(f"{'X' if i == j else cells.get((i, j), '-'):>5}" for j in range(gpus))
        lines.append(f"  {f'GPU{i}':4}{row}")
    return lines


# ---------------------------------------------------------------------------- judged captures

def capture_findings(verdict: CaptureVerdict) -> tuple[list[dict[str, Any]], bool]:
    """The envelope's findings of one judged capture, and whether it was judged whole: a pass
    without findings of its own gets one "ok" finding (the capture's summary); a cut or
    unjudged capture none (not complete). A finding said in a sentence (the RDMA and kernel
    captures) is of the capture's kind, and of its host when the sentence names no subject."""
    out: list[dict[str, Any]] = []
    subject = verdict.host or "node"
    for f in verdict.findings:
        found = f.to_json()
        if verdict.sentences:
            found.update(check=verdict.kind, subject=f.subject or subject)
        out.append(found)
    state = verdict.verdict
    if state == "pass" and not any(f["severity"] == "ok" for f in out):
        out.append({"check": verdict.kind, "subject": subject, "expected": "",
                    "observed": f"pass: {verdict.blocks} complete block(s) judged",
                    "severity": "ok", "cause": "", "fix": ""})
    return out, state in ("pass", "fail")


def capture_envelope(verdicts: Sequence[CaptureVerdict], host: str | None, inputs: list[str],
                     profile: str | None = None, model: str | None = None) -> dict[str, Any]:
    """The JSON envelope of judged captures; each capture's own verdict, expectation, blocks
    and cuts under "captures"."""
    findings: list[dict[str, Any]] = []
    complete, skipped = True, 0
    for judged in verdicts:
        found, whole = capture_findings(judged)
        findings += found
        if not whole:
            complete, skipped = False, skipped + 1
    return envelope("check", findings, host=host, inputs=inputs, profile=profile, model=model,
                    skipped=skipped, complete=complete,
                    extra={"captures": [v.to_json() for v in verdicts]})


def render_captures(verdicts: Sequence[CaptureVerdict], what: str) -> str:
    """The ticket text of judged captures: one verdict for all, each cut said."""
    findings: list[dict[str, Any]] = []
    complete = True
    skipped = 0
    notes = []
    for judged in verdicts:
        found, whole = capture_findings(judged)
        findings += found
        if not whole:
            complete = False
            skipped += 1
            notes.append(f"{judged.kind}: {judged.summary}")
        notes += [f"{judged.kind}: cut: {cut}" for cut in judged.cuts]
    word = VERDICT_WORDS[verdict(summary(findings, skipped), complete)]
    said = "; ".join(f"{v.kind} {_said(v)}" for v in verdicts)
    head = f"{what}: {word} ({said})"
    text = render(findings, what, head=head)
    return "\n".join([text] + [line for note in notes for line in wrap(f"note  {note}", 6)])


def _said(judged: CaptureVerdict) -> str:
    """One capture's outcome in a few words: failures and complete blocks judged."""
    failed = len(judged.failed)
    blocks = f"{judged.blocks} complete block(s)"
    if failed:
        return f"{failed} failure(s) in {blocks}"
    return f"{judged.verdict.split(':')[0]}, {blocks}"


def emit_script(text: str, output: str | None, summary: str) -> None:
    """A generated batch script: written to ``output`` (naming how to submit it) or printed
    on stdout, the one-line summary on stderr (`nccl script`, `smoke script`)."""
    import sys
    from pathlib import Path

    if output:
        Path(output).write_text(text, encoding="utf-8")
        print(f"{output}: {summary}; submit with `sbatch {output}`", file=sys.stderr)
    else:
        sys.stdout.write(text)
        print(summary, file=sys.stderr)
