"""Judgements shared by the verify suite (a live node) and `gpuinfra check KIND` (a capture
pasted from one): the same code gives the same verdict, cause and fix to both.

A capture is judged block by block (an IOMMU group, a ``hostdev``, a pod row, a section of
``kubectl describe node``); what the capture does not show is a *cut*. A capture with a cut can
fail, never pass: its verdict is ``incomplete: N complete blocks judged, no failure found``.
A capture in which nothing known was found (a log with no message this project knows) has the
verdict ``no verdict``, never ``pass``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuinfra.capture_verdict import (  # noqa: F401  (the words, for the judges)
    FAIL,
    NO_VERDICT,
    PASS,
    capture_json,
    verdict_of,
)
from gpuinfra.verdicts import Finding


@dataclass
class CaptureVerdict:
    """The judgement of one capture.

    kind: what was captured (``iommu-groups``, ``describe-node``...). host: the node it came
    from, when known. expectation: what it was judged against, and where that came from.
    blocks: the complete blocks judged. cuts: what the capture did not show. judged: False
    when nothing in it could be judged (an unknown log).
    """

    kind: str
    host: str | None
    expectation: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    blocks: int = 0
    cuts: list[str] = field(default_factory=list)
    judged: bool = True

    @property
    def failed(self) -> bool:
        return any(f.failed for f in self.findings)

    @property
    def verdict(self) -> str:
        return verdict_of(self.failed, self.judged, self.cuts, self.blocks)

    def to_json(self) -> dict[str, Any]:
        return capture_json(self.host, self.kind, self.expectation, self.verdict,
                            self.verdict, self.blocks, self.cuts,
                            [f.to_json() for f in self.findings])
