"""GPU hardware on hosts whose spec lists GPUs: nvidia-smi's view against the spec's topology.

The node is read once (gpuinfra_verify/reading.py: the health check's own reading, one SSH
round trip) and judged by gpuinfra.health.judge, which runs gpuinfra.verdicts.check_system
on the parsed outputs: the health check's rules and these tests' are one copy. One test per
check family, so a failure names its family in the test id; its message lists every failed
finding with cause and fix. In the lab, nvidia-smi replays captures (gpuinfra_lab/README.md):
these tests prove their logic there, and the hardware only on a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pytest
from testinfra.host import Host

from gpuinfra.errors import GpuinfraError
from gpuinfra.health.collect import Output
from gpuinfra.health.judge import judge
from gpuinfra.health.probes import GPU_QUERY_FIELDS, describe, probes
from gpuinfra.parsers.gpus import parse_gpus
from gpuinfra.parsers.p2p import P2PMatrix, parse_p2p
from gpuinfra.parsers.topo import TopoMatrix, parse_topo
from gpuinfra.spec import NodeSpec
from gpuinfra.verdicts import Finding
from gpuinfra_verify import matrices
from gpuinfra_verify.expect import family, format_failures, format_finding, smi_failure
from gpuinfra_verify.reading import node_reading, spec_expectation

VERIFY_NODES = "gpu"
Note = Callable[[str, object], None]
T = TypeVar("T")
# The outputs these tests judge: a command among them that failed fails every test, with
# nvidia-smi's own reason (the other families cannot be judged without it).
GPU_OUTPUTS = ("gpus", "topo", "p2p-r", "p2p-w", "nvlink", "fabric")


@dataclass(frozen=True)
class GpuVerdict:
    """The findings for one host, or why there are none (nvidia-smi missing or failing);
    the ``topo -m`` and ``topo -p2p`` matrices read (for the report's matrices)."""

    findings: tuple[Finding, ...] = ()
    error: str = ""
    seen: str = "?"
    topo: TopoMatrix | None = None
    p2p: tuple[P2PMatrix, ...] = ()


def _seen(text: str) -> str:
    """``2x NVIDIA H100 PCIe`` from the reading's GPU list, or ``?`` when it cannot be read."""
    try:
        gpus = parse_gpus(text, fields=list(GPU_QUERY_FIELDS)).gpus
    except GpuinfraError:
        gpus = []
    names = sorted({gpu.name or "?" for gpu in gpus})
    return f"{len(gpus)}x {', '.join(names)}" if gpus else "?"


@pytest.fixture(scope="module")
def verdict(host: Host, node: NodeSpec) -> GpuVerdict:
    """The node's reading (once per host), judged against the node's GPU spec."""
    assert node.gpus is not None
    taken = node_reading(host, node)
    if taken.error:
        return GpuVerdict(error=taken.error)
    expect = spec_expectation(node)
    lines = describe(probes(expect))
    for name in GPU_OUTPUTS:
        out = taken.reading.get(name)
        if out is not None and not out.ok:
            rc = 127 if out.rc is None and "not found" in out.error else (out.rc or -1)
            return GpuVerdict(error=smi_failure(lines.get(name) or name, rc, out.error))
    findings = judge(expect, taken.reading).findings
    topo = _parsed(taken.reading.get("topo"), parse_topo)
    p2p = tuple(m for mode in ("r", "w")
                if (m := _parsed(taken.reading.get(f"p2p-{mode}"),
                                 lambda text, mode=mode: parse_p2p(text, mode))) is not None)
    return GpuVerdict(tuple(findings), seen=_seen(taken.reading["gpus"].text), topo=topo,
                      p2p=p2p)


def _parsed(output: Output | None, parse: Callable[[str], T]) -> T | None:
    """The parsed output, or None when absent or unreadable (judge() names that failure)."""
    if output is None or not output.ok or not output.text:
        return None
    try:
        return parse(output.text)
    except GpuinfraError:
        return None


def _check_family(name: str, verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    if verdict.error:
        note("failure", verdict.error.splitlines()[0])
        pytest.fail(f"{node.name}: cannot read the GPUs: {verdict.error}", pytrace=False)
    findings = family(verdict.findings, name)
    if not findings:
        reason = next((f.cause for f in verdict.findings if f.check == "pair-checks"),
                      f"{node.gpus.topology.name if node.gpus else '?'}: no {name} checks")
        pytest.skip(reason)
    failed = [f for f in findings if f.failed]
    if failed:
        note(matrices.FAILED, matrices.dump(matrices.failed_findings(failed)))
        note("failure", format_finding(failed[0]).split("\n")[0] + "; " + failed[0].cause)
        pytest.fail(format_failures(node.name, failed), pytrace=False)


def test_gpu_count(verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    assert node.gpus is not None
    note("gpus_expected", f"{node.gpus.count}x {node.gpus.model.key} ({node.gpus.topology.name})")
    note("gpus_seen", verdict.seen)
    _check_family("gpu-count", verdict, node, note)


def test_nvlink_topology(verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    if verdict.topo is not None:  # what was seen, and asked, for the report's matrix
        seen = matrices.nvlink_seen(verdict.topo)
        note(matrices.NVLINK_SEEN, matrices.dump(seen))
        note(matrices.NVLINK_EXPECTED,
             matrices.dump(matrices.nvlink_expected(verdict.findings, seen["gpus"])))
    _check_family("nvlink-topology", verdict, node, note)


def test_p2p(verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    if verdict.p2p:
        note(matrices.P2P, matrices.dump(matrices.p2p_matrix(verdict.p2p)))
    _check_family("p2p", verdict, node, note)


def test_nvlink_links(verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    _check_family("nvlink-links", verdict, node, note)
