"""GPU hardware on hosts whose spec lists GPUs: nvidia-smi's view against the spec's topology.

The outputs are read on the host, parsed by gpuinfra.parsers and judged by
gpuinfra.verdicts.check_system. One test per check family, so a failure names its family in the
test id; its message lists every failed finding with cause and fix. In the lab, nvidia-smi
replays captures (gpuinfra_lab/README.md): these tests prove their logic there, and the hardware
only on a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from testinfra.host import Host

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.gpus import parse_gpus
from gpuinfra.parsers.nvlink import parse_nvlink
from gpuinfra.parsers.p2p import parse_p2p
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.spec import NodeSpec
from gpuinfra.verdicts import Finding, check_system
from gpuinfra_verify.expect import PROBES, family, format_failures, format_finding, smi_failure

VERIFY_NODES = "gpu"
Note = Callable[[str, object], None]


@dataclass(frozen=True)
class GpuVerdict:
    """The findings for one host, or why there are none (nvidia-smi missing or failing)."""

    findings: tuple[Finding, ...] = ()
    error: str = ""
    seen: str = "?"


def _run(host: Host, command: str) -> str:
    """stdout of ``command``; raises RuntimeError with the reason when it fails."""
    result = host.run(command)
    if result.rc != 0:
        raise RuntimeError(smi_failure(command, result.rc, result.stderr or result.stdout))
    return result.stdout


def _gpu_list(host: Host) -> str:
    """``2x NVIDIA H100 PCIe`` from `nvidia-smi -L`, or ``?`` when it cannot be read."""
    result = host.run("nvidia-smi -L")
    try:
        gpus = parse_gpus(result.stdout).gpus if result.rc == 0 else []
    except GpuinfraError:
        gpus = []
    names = sorted({gpu.name or "?" for gpu in gpus})
    return f"{len(gpus)}x {', '.join(names)}" if gpus else "?"


@pytest.fixture(scope="module")
def verdict(host: Host, node: NodeSpec) -> GpuVerdict:
    """Run the probes once per host and judge them against the node's GPU spec."""
    assert node.gpus is not None
    try:
        out = {name: _run(host, command) for name, command in PROBES.items()}
        findings = check_system(
            node.gpus.topology.name, node.gpus.count, node.gpus.model.key,
            topo=parse_topo(out["topo"]),
            p2p=[parse_p2p(out["p2p-r"], "r"), parse_p2p(out["p2p-w"], "w")],
            nvlink=parse_nvlink(out["nvlink"]),
        )
    except (RuntimeError, GpuinfraError) as exc:
        return GpuVerdict(error=str(exc))
    return GpuVerdict(tuple(findings), seen=_gpu_list(host))


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
