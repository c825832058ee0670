"""Judging a pasted capture (issue 24, sections 2 and 3): one reading of a node.

Each kind's judge (:mod:`gpuinfra.captures.rdma`, :mod:`gpuinfra.captures.kernel`) parses a
capture, judges every complete block with the same functions the verify suite uses on a live
node (:mod:`gpuinfra.rdma.verdicts`, :mod:`gpuinfra.vfio`), and returns a
:class:`CaptureVerdict`: the host, the kind, the expectation it was judged against, each
finding with its cause and fix, how many complete blocks were judged and what was cut.

The verdict is honest about cuts: a capture a poster shortened (``...``), filtered with grep,
cut in its last block or missing its header can **fail** on what it shows, but never
**pass**: "incomplete: N complete blocks judged, no failure found". A capture that shows
nothing the expectation asks about is "no verdict", never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuinfra.capture_verdict import (  # noqa: F401  (the words, for the judges)
    FAIL,
    INCOMPLETE,
    NO_VERDICT,
    PASS,
    capture_json,
    verdict_of,
)
from gpuinfra.rdma.verdicts import Finding


@dataclass
class CaptureVerdict:
    """What a capture says about a host against an expectation.

    findings: :class:`gpuinfra.rdma.verdicts.Finding` (what, cause, fix; ``warning`` ones do
    not fail). blocks: the complete blocks judged. cuts: each cut seen, said for the
    operator. judged: False when nothing the expectation asks about was in the capture.
    """

    host: str
    kind: str
    expectation: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    blocks: int = 0
    cuts: list[str] = field(default_factory=list)
    judged: bool = True

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if not f.warning]

    @property
    def verdict(self) -> str:
        return verdict_of(bool(self.failed), self.judged, self.cuts, self.blocks)

    @property
    def summary(self) -> str:
        """The verdict in words, with the count of failures or of blocks judged."""
        verdict = self.verdict
        if verdict == FAIL:
            return f"fail: {len(self.failed)} failure(s) in {self.blocks} complete block(s)"
        if verdict.startswith(INCOMPLETE):
            return f"{verdict} (the capture is cut: it cannot pass)"
        if verdict == NO_VERDICT:
            return "no verdict: the capture shows nothing the expectation asks about"
        return f"pass: {self.blocks} complete block(s) judged"

    def to_json(self) -> dict[str, Any]:
        return capture_json(
            self.host, self.kind, self.expectation, self.verdict, self.summary, self.blocks,
            self.cuts, [{"severity": "warn" if f.warning else "fail", "what": f.what,
                         "cause": f.cause, "fix": f.fix} for f in self.findings])


def message(verdict: CaptureVerdict) -> str:
    """The operator's text: host and kind, the verdict, each finding with cause and fix, the
    cuts."""
    lines = [f"{verdict.host}: {verdict.kind}: {verdict.summary}"]
    for found in verdict.findings:
        mark = "warn" if found.warning else "FAIL"
        lines += [f"  {mark} {found.what}", f"      cause: {found.cause}",
                  f"      fix:   {found.fix}"]
    lines += [f"  cut: {cut}" for cut in verdict.cuts]
    return "\n".join(lines)
