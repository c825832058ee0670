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

import pytest
from testinfra.host import Host

from gpuinfra.errors import GpuinfraError
from gpuinfra.health.judge import judge
from gpuinfra.health.probes import GPU_QUERY_FIELDS, describe, probes
from gpuinfra.parsers.gpus import parse_gpus
from gpuinfra.spec import NodeSpec
from gpuinfra.verdicts import Finding
from gpuinfra_verify.expect import family, format_failures, format_finding, smi_failure
from gpuinfra_verify.reading import node_reading, spec_expectation

VERIFY_NODES = "gpu"
Note = Callable[[str, object], None]
# The outputs these tests judge: a command among them that failed fails every test, with
# nvidia-smi's own reason (the other families cannot be judged without it).
GPU_OUTPUTS = ("gpus", "topo", "p2p-r", "p2p-w", "nvlink", "fabric")


@dataclass(frozen=True)
class GpuVerdict:
    """The findings for one host, or why there are none (nvidia-smi missing or failing)."""

    findings: tuple[Finding, ...] = ()
    error: str = ""
    seen: str = "?"


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
    return GpuVerdict(tuple(findings), seen=_seen(taken.reading["gpus"].text))


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
        note("failure", format_finding(failed[0]).split("\n")[0] + "; " + failed[0].cause)
        pytest.fail(format_failures(node.name, failed), pytrace=False)


def test_gpu_count(verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    assert node.gpus is not None
    note("gpus_expected", f"{node.gpus.count}x {node.gpus.model.key} ({node.gpus.topology.name})")
    note("gpus_seen", verdict.seen)
    _check_family("gpu-count", verdict, node, note)


def test_nvlink_topology(verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    _check_family("nvlink-topology", verdict, node, note)


def test_p2p(verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    _check_family("p2p", verdict, node, note)


def test_nvlink_links(verdict: GpuVerdict, node: NodeSpec, note: Note) -> None:
    _check_family("nvlink-links", verdict, node, note)
