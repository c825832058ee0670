"""Judging a pasted capture: one reading of a node, whatever printed it (`gpuinfra check`).

Each kind's judge parses a capture, judges every complete block with the same functions the
verify suite uses on a live node, and returns a :class:`CaptureVerdict`: the host, the kind,
the expectation it was judged against, each finding with its cause and fix, how many complete
blocks were judged and what was cut.

- :mod:`gpuinfra.captures.rdma`: ``ibstat``, ``ibv_devinfo``, ``show_gids``, ``mlxconfig``,
  ``lspci -vvv`` (with :mod:`gpuinfra.rdma.verdicts`, as gpuinfra_verify/test_rdma.py);
- :mod:`gpuinfra.captures.kernel`: ``lsmod``, ``dmesg``, ``/proc/cmdline``;
- :mod:`gpuinfra.captures.vfio`: IOMMU groups, ``lspci -nnk``, a VM's hostdevs (with
  :mod:`gpuinfra.vfio`; gpuinfra_verify/test_vfio.py calls these judgements too);
- :mod:`gpuinfra.captures.kubernetes`: ``kubectl describe node``, the GPU pods, a device
  plugin's log (gpuinfra_verify/kubernetes_expect.py calls these judgements too).

Precedence: a failure shown fails the capture, cut or not; a cut capture (a poster's ``...``,
a grep, a last block cut mid-way, a missing header) with no failure is "incomplete: N complete
block(s) judged, no failure found" (what to ask for: the whole output); a whole capture in which
nothing the expectation asks about was found is "no verdict"; only a whole capture with no
failure, that showed what was asked, passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.verdicts import Finding

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


@dataclass
class CaptureVerdict:
    """The judgement of one capture.

    kind: what was captured (``ibstat``, ``iommu-groups``, ``describe-node``...). host: the
    node it came from, when known. expectation: what it was judged against, and where that
    came from. findings: :class:`gpuinfra.verdicts.Finding` ("warn" ones do not fail).
    blocks: the complete blocks judged. cuts: what the capture did not show, said for the
    operator. judged: False when nothing the expectation asks about was in the capture.
    sentences: the RDMA and kernel captures' form (their findings said in one sentence,
    :meth:`Finding.said`): the capture's JSON gives each finding as severity, what, cause and
    fix, and its summary counts in words; the other kinds give each finding whole, and their
    verdict as the summary.
    """

    kind: str
    host: str | None
    expectation: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    blocks: int = 0
    cuts: list[str] = field(default_factory=list)
    judged: bool = True
    sentences: bool = False

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if f.failed]

    @property
    def verdict(self) -> str:
        return verdict_of(bool(self.failed), self.judged, self.cuts, self.blocks)

    @property
    def summary(self) -> str:
        """The verdict; in words, with the count of failures or of blocks judged, for the
        sentence form."""
        verdict = self.verdict
        if not self.sentences:
            return verdict
        if verdict == FAIL:
            return f"fail: {len(self.failed)} failure(s) in {self.blocks} complete block(s)"
        if verdict.startswith(INCOMPLETE):
            return f"{verdict} (the capture is cut: it cannot pass)"
        if verdict == NO_VERDICT:
            return "no verdict: the capture shows nothing the expectation asks about"
        return f"pass: {self.blocks} complete block(s) judged"

    def to_json(self) -> dict[str, Any]:
        """`check --json`'s object for one capture, the same keys for every kind."""
        findings = [{"severity": f.severity, "what": f.what, "cause": f.cause, "fix": f.fix}
                    if self.sentences else f.to_json() for f in self.findings]
        return {"host": self.host, "kind": self.kind, "expectation": self.expectation,
                "verdict": self.verdict, "summary": self.summary, "blocks_judged": self.blocks,
                "cuts": list(self.cuts), "findings": findings}
