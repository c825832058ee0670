"""Issue 45 item 4: the spec's own hardware (node_hardware) in every preview, never another
machine's; the node's facts win at deploy and differences from the spec are said."""

from __future__ import annotations

from typing import Any

import pytest

from gpuinfra.parsers.cpus import CpuTopology
from gpuinfra.slurm.nodes import node_hardware, node_line
from gpuinfra.spec import HostInput
from gpuinfra_deploy.render.answers import spec_cpus, spec_hardware
from gpuinfra_deploy.run.knobs import build_spec, spec_problems

BIG = {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2, "memory_gb": 2048}
L40S = {"gpu_model": "L40S", "gpu_count": 4, "gpu_topology": "pcie-only"}


def hosts(worker: dict[str, Any]) -> list[HostInput]:
    return [HostInput("head01", ("head",), {"node_address": "10.0.0.1"}),
            HostInput("gpu01", ("workers",), {"node_address": "10.0.0.2", **worker})]


def test_the_spec_hardware_is_what_a_preview_reads() -> None:
    facts = spec_cpus({"node_hardware": BIG})
    layout = CpuTopology.from_json(facts["gpuinfra_deploy.facts.system.CpuLayout"])
    assert (layout.cpu_count, layout.sockets, layout.cores_per_socket,
            layout.threads_per_core) == (224, 2, 56, 2)
    assert facts["gpuinfra_deploy.facts.system.MemTotalMb"] == 2048 * 1024
    node = build_spec(hosts({**L40S, "node_hardware": BIG})).node("gpu01")
    line = node_line(node, "10.0.0.2", node_hardware(layout, 2048 * 1024, 2), "l40s")
    assert "CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2055208" \
        in line.text and line.notes == ()


def test_without_the_spec_hardware_a_preview_assumes_no_machine() -> None:
    """Not the lab's CPUs=2 and 24 GB: no CPU facts, so slurm.conf says CPUs=1 with a note."""
    facts = spec_hardware(L40S)
    assert facts["gpuinfra_deploy.facts.system.CpuLayout"] == {}
    assert facts["gpuinfra_deploy.facts.system.MemTotalMb"] is None
    node = build_spec(hosts(L40S)).node("gpu01")
    line = node_line(node, None, None, "l40s")
    assert " CPUs=1 " in line.text and "node_hardware" in line.notes[0]


def test_the_nodes_own_hardware_wins_and_the_difference_is_said() -> None:
    node = build_spec(hosts({**L40S, "node_hardware": BIG})).node("gpu01")
    small = CpuTopology.from_json(spec_cpus({"node_hardware": {
        "sockets": 1, "cores_per_socket": 32, "threads_per_core": 2,
        "memory_gb": 512}})["gpuinfra_deploy.facts.system.CpuLayout"])
    line = node_line(node, None, node_hardware(small, 512 * 1024, 2), "l40s")
    assert "CPUs=64 " in line.text
    assert any("node reports CPUs=64" in n and "says CPUs=224" in n for n in line.notes)
    assert any("says 2048 GB" in n for n in line.notes)


@pytest.mark.parametrize("value", [
    {**BIG, "cpus": 224}, {k: v for k, v in BIG.items() if k != "memory_gb"},
    {**BIG, "memory_gb": 0}, {**BIG, "sockets": "2"}, {**BIG, "threads_per_core": 16},
    "2x56", [2, 56, 2, 2048],
])
def test_a_hardware_spec_slurm_could_not_use_is_refused(value: Any) -> None:
    found = [e for e in spec_problems(hosts({**L40S, "node_hardware": value}))
             if e.field.startswith("node_hardware")]
    assert found and found[0].host == "gpu01" and found[0].fix
