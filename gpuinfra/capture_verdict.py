"""The one verdict of a judged capture, and its JSON, for every kind `gpuinfra check` judges
(gpuinfra.captures: RDMA and kernel captures; gpuinfra.judge: VFIO and Kubernetes ones).

Precedence: a failure shown fails the capture, cut or not; a cut capture (a poster's ``...``,
a grep, a last block cut mid-way, a missing header) with no failure is "incomplete: N complete
block(s) judged, no failure found" (what to ask for: the whole output); a whole capture in which
nothing the expectation asks about was found is "no verdict"; only a whole capture with no
failure, that showed what was asked, passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PASS, FAIL, NO_VERDICT = "pass", "fail", "no verdict"
INCOMPLETE = "incomplete"


def verdict_of(failed: bool, judged: bool, cuts: Sequence[str], blocks: int) -> str:
    if failed:
        return FAIL
    if cuts:
        return f"{INCOMPLETE}: {blocks} complete block(s) judged, no failure found"
    if not judged:
        return NO_VERDICT
    return PASS


def capture_json(host: str | None, kind: str, expectation: dict[str, Any], verdict: str,
                 summary: str, blocks: int, cuts: Sequence[str],
                 findings: list[dict[str, Any]]) -> dict[str, Any]:
    """`check --json`'s object for one capture, the same keys for every kind."""
    return {"host": host, "kind": kind, "expectation": expectation, "verdict": verdict,
            "summary": summary, "blocks_judged": blocks, "cuts": list(cuts),
            "findings": findings}
