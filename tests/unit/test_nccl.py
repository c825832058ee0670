"""The NCCL all-reduce check: parser on real outputs, floors per topology, verdicts, the job.

Inputs marked DERIVED are real fixtures edited in the test (the edit is named); everything else
is a verbatim public output (tests/fixtures/nccl/INDEX.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuinfra.errors import GpuinfraError, ParseError
from gpuinfra.jobs.nccl import JobSettings, ScriptError, sbatch_script
from gpuinfra.jobs.nccl_verdict import judge_all_reduce
from gpuinfra.knowledge.gpus import GPU_MODELS
from gpuinfra.knowledge.nccl import (
    MEASURED,
    PCIE_GEN,
    SWEEP_MAX_BYTES,
    NcclThresholdError,
    min_busbw,
    node_min_busbw,
)
from gpuinfra.knowledge.topology import PROFILES, gpu_count_problem
from gpuinfra.parsers.nccl import parse_all_reduce
from tests.conftest import REPO

NCCL = REPO / "tests" / "fixtures" / "nccl"
A3MEGA = NCCL / "2node-16x-h100-80gb-hbm3-gcp-a3mega-tcpxo-8G.txt"
A100 = NCCL / "1node-8x-a100-sxm4-80gb-nvswitch-g8-4G-UNRESOLVED-SOURCE.txt"
AUTODL = NCCL / "1node-2x-rtx2080ti-pcie-gen3-p2p-NS-1G.txt"
V100 = NCCL / "1node-4x-v100-pcie-32gb-old-format-error-column-128M.txt"
OCI_8G = NCCL / "2node-16x-a100-sxm4-40gb-oci-oke-rdma-8G.txt"
OCI_4G = NCCL / "2node-16x-a100-sxm4-40gb-oci-oke-rdma-nccl2.25-4G.txt"
FIXTURES = sorted(NCCL.glob("*.txt"))

# file -> (rows, largest size, out-of-place busbw, in-place busbw there, ranks, hosts, avg)
EXPECTED = {
    A3MEGA: (31, 8589934592, 338.82, 337.35, 16, 2, 70.742),
    OCI_8G: (31, 8589934592, 237.94, 237.52, 16, 2, 66.4834),
    OCI_4G: (3, 4294967296, 190.02, 190.09, 16, 2, 188.648),
    A100: (30, 4294967296, 232.44, 231.59, 8, 1, 66.2058),
    AUTODL: (28, 1073741824, 4.00, 4.00, 2, 1, 2.05774),
    V100: (25, 134217728, 11.18, 11.20, 4, 1, 4.42606),
}


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def by_check(findings):
    return {f.check: f for f in findings}


def failed(findings):
    return {f.check for f in findings if f.severity == "fail"}


# ---------------------------------------------------------------------------- parser

def test_every_fixture_has_expectations():
    assert set(FIXTURES) == set(EXPECTED)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_parser_reads_every_real_output(path):
    rows, largest, oop, ip, ranks, hosts, avg = EXPECTED[path]
    result = parse_all_reduce(text(path))
    assert len(result.rows) == rows
    assert result.largest.size == largest
    assert (result.largest.oop_busbw, result.largest.ip_busbw) == (oop, ip)
    assert len(result.ranks) == ranks and len(result.hosts) == hosts
    assert result.avg_busbw == avg and result.out_of_bounds == 0
    sizes = [row.size for row in result.rows]
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
    assert result.to_json()["hosts"] == list(result.hosts)


def test_rank_lines_with_and_without_group():
    new, old = parse_all_reduce(text(A3MEGA)), parse_all_reduce(text(V100))
    assert new.ranks[8].host == "ztan-mig-gq73" and new.ranks[8].device == 0
    assert new.ranks[8].gpu == "NVIDIA H100 80GB HBM3" and new.ranks[8].bus == "0000:04:00"
    assert old.ranks[3].gpu == "Tesla V100-PCIE-32GB" and old.ranks[3].bus == "0x40"


def test_old_layout_has_no_wrong_counts_but_is_checked():
    result = parse_all_reduce(text(V100))
    row = result.rows[0]
    assert (row.oop_wrong, row.ip_wrong, row.redop, row.count) == (None, None, "sum", 2)
    assert result.checked


def test_mpirun_tagged_output_reads_the_same():
    # DERIVED: every line of the A100 output prefixed as `mpirun --tag-output` prints it.
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in text(A100).splitlines())
    assert parse_all_reduce(tagged).rows == parse_all_reduce(text(A100)).rows


def test_nccl_info_lines_give_the_network_and_version():
    # DERIVED: NCCL_DEBUG=INFO lines (as NCCL prints them) inserted before the table.
    extra = ("ztan-mig-235z:6899:6899 [0] NCCL INFO Bootstrap : Using enp0s12:10.0.0.2<0>\n"
             "NCCL version 2.19.3+cuda12.3\n"
             "ztan-mig-235z:6899:7001 [0] NCCL INFO Using network Socket\n")
    result = parse_all_reduce(extra + text(A3MEGA))
    assert result.networks == ("Socket",) and result.nccl_version == "2.19.3+cuda12.3"


@pytest.mark.parametrize(("derive", "words"), [
    (lambda t: "", "no result rows"),
    (lambda t: "srun: error: hgx01: task 3: Exited with exit code 1\n", "srun: error"),
    # DERIVED: the run cut off after the 1 GiB row (no summary lines)
    (lambda t: t.split("  2147483648")[0], "did not finish"),
    # DERIVED: two copies of the run in one log, as a non-MPI build writes them
    (lambda t: t + t, "MPI=1"),
    # DERIVED: a busbw cell replaced by garbage
    (lambda t: t.replace("232.44", "23x.44"), "unreadable result row"),
], ids=["empty", "srun-error", "truncated", "two-runs", "garbage"])
def test_unreadable_outputs_raise_parse_error(derive, words):
    with pytest.raises(ParseError) as err:
        parse_all_reduce(derive(text(A100)))
    assert words in str(err.value) and "all_reduce_perf" in str(err.value)


def test_garbage_row_error_names_the_line():
    broken = text(A100).replace("232.44", "23x.44")  # DERIVED
    with pytest.raises(ParseError) as err:
        parse_all_reduce(broken)
    line = next(i for i, s in enumerate(broken.splitlines(), 1) if "23x.44" in s)
    assert err.value.line == line


# ---------------------------------------------------------------------------- floors

def test_every_gpu_model_has_a_pcie_generation():
    assert set(PCIE_GEN) == set(GPU_MODELS)


@pytest.mark.parametrize(("profile", "model", "gpus"), list(MEASURED))
def test_measured_floors_are_possible_systems(profile, model, gpus):
    assert gpu_count_problem(PROFILES[profile], GPU_MODELS[model], gpus) is None


@pytest.mark.parametrize(("profile", "model", "gpus", "floor", "source"), [
    ("nvswitch-all-to-all", "H100-SXM5-80GB", 8, 460.0, "nd96isr_h100_v5"),
    ("nvswitch-all-to-all", "H200-SXM-141GB", 8, 431.0, "nd96isr_h200_v5"),
    ("nvswitch-all-to-all", "A100-SXM4-80GB", 8, 228.0, "nd96amsr_a100_v4.conf (16G)"),
    ("nvswitch-all-to-all", "A100-SXM4-40GB", 8, 228.0, "nd96asr_v4"),
    ("bridged-pairs", "A100-PCIE-80GB", 2, 193.0, "nc48ads_a100_v4"),
    ("bridged-pairs", "A100-PCIE-80GB", 4, 25.0, "nc96ads_a100_v4"),
    ("bridged-pairs", "H100-NVL-94GB", 2, 208.0, "nc80adis_h100_v5"),
    ("bridged-pairs", "H100-PCIE-80GB", 2, 177.0, "UNMEASURED on H100 PCIe"),
    ("fixed-mesh", "V100-SXM2-32GB", 8, 110.0, "nd40rs_v2.conf (8G)"),
    ("fixed-mesh", "V100-SXM2-16GB", 8, 110.0, "inferred from"),
    ("nvlink-domain", "GB200-186GB", 4, 432.0, "nd128isr_ndr_gb200_v6"),
    ("nvswitch-all-to-all", "H800-SXM5-80GB", 8, 193.5, "nccl#1374"),
    ("nvswitch-all-to-all", "A800-SXM4-80GB", 8, 144.0, "nccl#412"),
    ("direct-all-to-all", "A100-SXM4-40GB", 4, 210.0, "12 NVLinks x 25 GB/s x 0.7"),
    ("direct-all-to-all", "H100-SXM5-80GB", 4, 334.7, "18 NVLinks"),
    ("bridged-pairs", "A30", 2, 64.0, "4 bridge links"),
    ("bridged-pairs", "RTX-A6000", 2, 36.0, "4 bridge links x 14.062"),
    ("bridged-pairs", "H100-PCIE-80GB", 4, 49.8, "Gen5 x16 63 GB/s x 0.79"),
    ("bridged-pairs", "RTX-3090", 4, 6.3, "P2P not required"),
    ("pcie-only", "L40S", 8, 6.3, "Gen4 x16 31.5 GB/s x 0.2"),
    ("pcie-only", "H100-PCIE-80GB", 2, 12.6, "Gen5"),
])
def test_node_floor_per_profile_and_model(profile, model, gpus, floor, source):
    value, where = node_min_busbw(profile, model, gpus)
    assert value == floor and source in where


def test_floors_follow_the_topology_not_one_number():
    h100_pcie = [node_min_busbw("bridged-pairs", "H100-PCIE-80GB", n)[0] for n in (2, 4)]
    assert h100_pcie[0] > h100_pcie[1]  # a second pair puts PCIe into the ring
    assert node_min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8)[0] > \
        node_min_busbw("direct-all-to-all", "H100-SXM5-80GB", 4)[0]  # no NVLink SHARP


def test_pcie_floor_does_not_fail_a_healthy_box_without_p2p():
    # The 2080 Ti is not in gpus.py; T4 stands in as another PCIe Gen3 x16 card.
    floor = min_busbw("pcie-only", "T4", 2)
    assert floor.min_busbw < parse_all_reduce(text(AUTODL)).largest.busbw


def test_busbw_between_nodes_exceeds_the_nics_rate_on_a_real_run():
    """Why the NICs give a floor between nodes only from below, never the expected speed: the
    project's own 2-node run moves more busbw than its nodes' NICs carry (8 x 200 Gb/s = 200
    GB/s)."""
    busbw = parse_all_reduce(text(A3MEGA)).largest.busbw
    assert busbw > 8 * 200 / 8 * 1.5


@pytest.mark.parametrize(("nodes", "gbps", "floor", "words"), [
    (2, 200, 304.9, "338.8 GB/s (fixture 2node-16x-h100"),
    (2, 400, 387.0, "430 GB/s (nccl#1221 (RoCE); lowest of 2"),
    (4, 400, 288.0, "320 GB/s (nccl#1221"),
])
def test_multi_node_floor_comes_from_a_measurement_of_the_fabric(nodes, gbps, floor, words):
    t = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=nodes, nics=8,
                  nic_gbps=gbps)
    assert (t.min_busbw, t.bound, t.network, t.ranks) == (floor, "network", "rdma", nodes * 8)
    assert words in t.source and "x 0.9" in t.source


def test_nvls_floor_names_its_condition_and_carries_the_ring_floor():
    one = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8)
    assert (one.min_busbw, one.condition, one.ring_floor) == (460.0, "NVLink SHARP (NVLS) in use",
                                                              333.0)
    assert "nccl-tests#212" in one.ring_source
    two = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8, nic_gbps=400)
    assert (two.condition, two.ring_floor) == ("NVLink SHARP (NVLS) in use", 297.0)
    a100 = min_busbw("nvswitch-all-to-all", "A100-SXM4-80GB", 8)  # no NVLS on A100
    assert (a100.condition, a100.ring_floor) == ("", None)


def test_unmeasured_fabric_gets_a_floor_derived_from_its_nics_and_says_so():
    # 2 x 400 Gb/s per 8x H100 node: nobody has published that fabric.
    t = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=2, nic_gbps=400)
    assert (t.min_busbw, t.bound, t.network, t.condition, t.ring_floor) == (
        70.0, "network", "rdma", "", None)  # 2 x 400 / 8 x 0.70; assumes nothing about NVLS
    assert t.source.startswith("DERIVED, not measured: 2 NIC(s) x 400 Gb/s / 8 x 0.7")
    for words in ("no public measurement of this fabric", "a pass does not prove full speed",
                  "Measured on similar fabrics: 470 GB/s on 2 nodes x 8 H100-SXM5-80GB, 8 x 400",
                  "338.8 GB/s on 2 nodes", "0.82 of the NICs' rate, NVLS off"):
        assert words in t.derived


def test_derived_floor_never_exceeds_the_nodes_own_ring_floor():
    # 8 x 800 Gb/s would allow 560 GB/s; the data also crosses each node's NVLink, whose ring
    # floor (NVLS off: nothing about NVLS is assumed) is 333.
    t = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8, nic_gbps=800)
    assert (t.min_busbw, t.condition) == (333.0, "")
    assert "the node's own floor (ring (NVLS off)" in t.source and t.derived


def test_measured_fabric_has_no_derived_note():
    t = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8, nic_gbps=400)
    assert t.derived == "" and not t.source.startswith("DERIVED")


def test_derived_floor_passes_every_public_run_as_if_unmeasured(monkeypatch):
    """The independent check of DERIVED_NET_EFFICIENCY: each public multi-node run, its own
    measurement hidden, clears the floor the NICs give its fabric."""
    from gpuinfra.knowledge import nccl

    runs = nccl.NETWORK_MEASURED
    monkeypatch.setattr(nccl, "NETWORK_MEASURED", ())
    for m in runs:
        t = min_busbw("nvswitch-all-to-all", m.model, m.gpus_per_node, nodes=m.nodes,
                      nics=m.nics, nic_gbps=m.nic_gbps)
        assert t.derived and t.min_busbw < m.busbw, (m, t.min_busbw)


def test_one_gpu_per_node_is_network_only():
    t = min_busbw("pcie-only", "L40S", 1, nodes=4, nics=1, nic_gbps=100)
    assert (t.min_busbw, t.bound) == (10.6, "network")


def test_explicit_floor_wins():
    t = min_busbw("pcie-only", "L40S", 8, nodes=2, explicit=12.5)
    assert (t.min_busbw, t.bound, t.network) == (12.5, "explicit", "socket")


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"profile": "nvlink-ring"}, "unknown topology profile"),
    ({"model_key": "H100-SXM"}, "did you mean: H100-SXM5-80GB"),
    ({"model_key": "L40S"}, "gpu_topology = 'nvswitch-all-to-all' with 8x L40S"),
    ({"gpus_per_node": 4}, "hold 8 GPUs, not 4"),
    ({"gpus_per_node": 1}, "at least 2 GPUs"),
    ({"nodes": 2}, "TCP sockets"),
    ({"nodes": 2, "nics": 8}, "--nic-gbps is required"),
    ({"nodes": 2, "nics": 8, "nic_gbps": 0}, "--nic-gbps is required"),
    ({"explicit": -1}, "positive"),
])
def test_floor_errors_name_the_field_and_the_fix(kwargs, words):
    args = {"profile": "nvswitch-all-to-all", "model_key": "H100-SXM5-80GB", "gpus_per_node": 8}
    with pytest.raises(NcclThresholdError) as err:
        min_busbw(**{**args, **kwargs})
    assert words in str(err.value)
    assert isinstance(err.value, GpuinfraError)


def test_socket_error_asks_for_an_explicit_floor():
    with pytest.raises(NcclThresholdError) as err:
        min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2)
    assert "--min-busbw" in str(err.value) and "rdma_nics" in str(err.value)


# ---------------------------------------------------------------------------- verdicts

def test_healthy_a100_node_passes_every_check():
    findings = judge_all_reduce(parse_all_reduce(text(A100)),
                                min_busbw("nvswitch-all-to-all", "A100-SXM4-80GB", 8))
    assert [f.check for f in findings] == ["ranks", "data-errors", "sizes", "busbw"]
    assert all(f.severity == "ok" for f in findings), findings
    assert "232.01 GB/s at 4 GiB" in by_check(findings)["busbw"].observed


def test_a3mega_passes_with_its_200g_nics():
    findings = judge_all_reduce(
        parse_all_reduce(text(A3MEGA)),
        min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8, nic_gbps=200),
        SWEEP_MAX_BYTES)
    assert not failed(findings)
    assert by_check(findings)["transport"].severity == "warn"  # no NCCL_DEBUG lines in it


@pytest.mark.parametrize("log", [OCI_8G, OCI_4G])
def test_real_two_node_a100_runs_pass_the_derived_floor(log):
    """OCI BM.GPU4.8 (16 x 100 Gb/s RDMA per node, from OCI's shape; the logs do not say):
    no measured floor for that fabric, judged against the derived one, said so."""
    t = min_busbw("nvswitch-all-to-all", "A100-SXM4-40GB", 8, nodes=2, nics=16, nic_gbps=100)
    findings = judge_all_reduce(parse_all_reduce(text(log)), t)
    assert not failed(findings)
    assert t.min_busbw == 140.0
    floor = by_check(findings)["floor"]
    assert floor.severity == "warn" and "derived from the NICs, 140 GB/s" in floor.observed
    assert "--min-busbw" in floor.fix
    assert ">= 140 GB/s (network: DERIVED, not measured" in by_check(findings)["busbw"].expected


def test_derived_floor_fails_a_slow_real_run_with_network_causes():
    # The NCCL 2.25 run (190 GB/s) judged as if each node had 16 x 200 Gb/s: 280 GB/s from the
    # NICs, capped by the A100 40GB node's own 228 GB/s: 190 fails.
    t = min_busbw("nvswitch-all-to-all", "A100-SXM4-40GB", 8, nodes=2, nics=16, nic_gbps=200)
    assert t.min_busbw == 228.0
    findings = judge_all_reduce(parse_all_reduce(text(OCI_4G)), t)
    assert failed(findings) == {"busbw"}
    assert "inside a node" in by_check(findings)["busbw"].cause


def test_real_output_below_the_network_floor_fails_with_network_causes():
    # The same 2-node output judged as if each node had 8 x 400 Gb/s NICs (floor 387 GB/s).
    findings = judge_all_reduce(
        parse_all_reduce(text(A3MEGA)),
        min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8, nic_gbps=400))
    assert failed(findings) == {"busbw"}
    busbw = by_check(findings)["busbw"]
    assert "338.09 GB/s at 8 GiB" in busbw.observed and ">= 387 GB/s (network" in busbw.expected
    for words in ("NET/Socket", "NET/IB", "nvidia-peermem", "ACS/IOMMU"):
        assert words in busbw.cause
    assert "ibstat" in busbw.fix and "nvidia_peermem" in busbw.fix


NVLS_OFF = "a3mega-0:1234:1240 [0] NCCL INFO NVLS multicast support is not available on dev 0"
NVLS_ON = "a3mega-0:1234:1240 [0] NCCL INFO NVLS multicast support is available on dev 0"


def with_line(line: str) -> str:
    """DERIVED: the A3 Mega log with one NCCL_DEBUG=INFO line (as NCCL prints it) before it."""
    return line + "\n" + text(A3MEGA)


def test_nvls_use_is_read_from_the_log():
    assert parse_all_reduce(text(A3MEGA)).nvls is None  # NCCL_DEBUG was not set
    assert parse_all_reduce(with_line(NVLS_OFF)).nvls is False
    assert parse_all_reduce(with_line(NVLS_ON)).nvls is True
    assert parse_all_reduce(with_line(
        "n1:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.")).nvls is False


def test_nvls_off_is_judged_against_the_ring_floor():
    threshold = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8,
                          nic_gbps=400)
    findings = by_check(judge_all_reduce(parse_all_reduce(with_line(NVLS_OFF)), threshold))
    assert findings["nvls"].severity == "warn"
    assert "ring floor 297 GB/s" in findings["nvls"].observed
    assert "NCCL_NVLS_ENABLE" in findings["nvls"].fix
    assert findings["busbw"].severity == "ok" and ">= 297 GB/s" in findings["busbw"].expected


@pytest.mark.parametrize(("line", "severity"), [(NVLS_ON, "ok"), ("", "warn")])
def test_nvls_on_or_unsaid_keeps_the_nvls_floor(line, severity):
    threshold = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8,
                          nic_gbps=400)
    findings = by_check(judge_all_reduce(parse_all_reduce(with_line(line)), threshold))
    assert findings["nvls"].severity == severity
    assert findings["busbw"].failed and ">= 387 GB/s" in findings["busbw"].expected


def test_floors_without_an_nvls_condition_get_no_nvls_finding():
    findings = judge_all_reduce(parse_all_reduce(text(A100)),
                                min_busbw("nvswitch-all-to-all", "A100-SXM4-80GB", 8))
    assert "nvls" not in by_check(findings)


def test_real_output_below_the_nvswitch_floor_names_fabric_manager():
    # The healthy A100 output judged against the H100 NVSwitch floor (460 GB/s).
    findings = judge_all_reduce(parse_all_reduce(text(A100)),
                                min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8))
    busbw = by_check(findings)["busbw"]
    assert busbw.failed and "Fabric Manager" in busbw.cause
    assert "nvidia-fabricmanager" in busbw.fix and "nvlink --status" in busbw.fix


def test_out_of_bounds_values_fail_as_data_corruption():
    # DERIVED: the A100 run with 12 wrong values at 4 GiB and the summary saying so.
    broken = text(A100).replace("# Out of bounds values : 0 OK",
                                "# Out of bounds values : 12 FAILED")
    broken = broken.replace("232.44      0", "232.44     12")
    findings = judge_all_reduce(parse_all_reduce(broken),
                                min_busbw("nvswitch-all-to-all", "A100-SXM4-80GB", 8))
    data = by_check(findings)["data-errors"]
    assert data.failed and "out of bounds 12, #wrong 12 (at 4 GiB)" in data.observed
    assert "corruption" in data.cause and "ECC" in data.fix
    assert failed(findings) == {"data-errors"}


def _unchecked(line: str) -> str:
    """A result row with both #wrong cells set to N/A (other lines unchanged)."""
    fields = line.split()
    if " float " not in line or len(fields) != 13:
        return line
    fields[8] = fields[12] = "N/A"
    return " ".join(fields)


def test_unchecked_run_warns():
    # DERIVED: every #wrong cell turned into N/A, as all_reduce_perf -c 0 prints them.
    result = parse_all_reduce("\n".join(map(_unchecked, text(A100).splitlines())))
    assert not result.checked
    data = by_check(judge_all_reduce(result, min_busbw("nvswitch-all-to-all",
                                                       "A100-SXM4-80GB", 8)))["data-errors"]
    assert data.severity == "warn" and "-c 0" in data.observed


def test_too_few_ranks_fail():
    findings = judge_all_reduce(
        parse_all_reduce(text(A100)),
        min_busbw("nvswitch-all-to-all", "A100-SXM4-80GB", 8, nodes=2, nics=4, nic_gbps=200,
                  explicit=150))
    ranks = by_check(findings)["ranks"]
    assert ranks.failed and (ranks.expected, ranks.observed) == (
        "16 ranks on 2 node(s), 8 per node", "8 ranks on 1 node(s), 8 per node")
    assert "MPI=1" in ranks.cause + ranks.fix


def test_short_sweep_fails_the_sizes_check():
    findings = judge_all_reduce(parse_all_reduce(text(V100)), min_busbw("pcie-only", "T4", 4))
    sizes = by_check(findings)["sizes"]
    assert sizes.failed and "128 MiB" in sizes.observed and "plateau" in sizes.cause


def test_sweep_must_reach_the_scripts_8g_when_asked():
    result = parse_all_reduce(text(A100))
    threshold = min_busbw("nvswitch-all-to-all", "A100-SXM4-80GB", 8)
    assert not failed(judge_all_reduce(result, threshold))
    assert failed(judge_all_reduce(result, threshold, SWEEP_MAX_BYTES)) == {"sizes"}


def test_socket_transport_between_nodes_fails():
    # DERIVED: the a3mega run with NCCL's own line saying it used sockets.
    log = "host:1:2 [0] NCCL INFO Using network Socket\n" + text(A3MEGA)
    findings = judge_all_reduce(
        parse_all_reduce(log),
        min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8, nic_gbps=200))
    transport = by_check(findings)["transport"]
    assert transport.failed and "NET/Socket" in transport.cause and "ibv_devinfo" in transport.fix


def test_every_failure_carries_cause_and_fix():
    broken = text(V100).replace("# Out of bounds values : 0 OK",
                                "# Out of bounds values : 3 FAILED")  # DERIVED
    findings = judge_all_reduce(
        parse_all_reduce(broken),
        min_busbw("pcie-only", "V100-SXM2-16GB", 2, nodes=2, nics=1, nic_gbps=100, explicit=5))
    assert failed(findings) == {"ranks", "data-errors", "sizes"}
    assert all(f.cause and f.fix for f in findings if f.failed)


# ---------------------------------------------------------------------------- the job

def two_hgx(nic_gbps: float = 400):
    return min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, nodes=2, nics=8,
                     nic_gbps=nic_gbps)


def test_script_asks_slurm_for_whole_gpu_nodes():
    script = sbatch_script("hgx", two_hgx(), "h100-sxm5-80gb", ["mlx5_0", "mlx5_1"])
    for line in ("#!/bin/bash", "#SBATCH --partition=hgx", "#SBATCH --nodes=2",
                 "#SBATCH --ntasks-per-node=8", "#SBATCH --gres=gpu:h100-sxm5-80gb:8",
                 "#SBATCH --exclusive", "#SBATCH --time=00:30:00",
                 "export NCCL_IB_HCA='=mlx5_0,mlx5_1'", "MIN_BUSBW=387", "RANKS=16",
                 'srun --mpi=pmix all_reduce_perf -b 8 -e 8G -f 2 -g 1 2>&1 | tee "$LOG"'):
        assert line in script.splitlines(), line
    assert "--nics 8 --nic-gbps 400" in script and "--exclude" not in script
    assert "\nexport NCCL_DEBUG=INFO " in script


def test_single_node_script_leaves_nics_out():
    script = sbatch_script("hgx", min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8),
                           "h100-sxm5-80gb", ["mlx5_0"],
                           JobSettings(mpi="pmi2", binary="/opt/nccl tests/all_reduce_perf",
                                       time_limit="1-00:00:00", exclude=("hgx02",)))
    assert "NCCL_IB_HCA" not in script and "#SBATCH --exclude=hgx02" in script
    assert "srun --mpi=pmi2 '/opt/nccl tests/all_reduce_perf' -b 8" in script
    assert "#SBATCH --time=1-00:00:00" in script


@pytest.mark.parametrize(("args", "words"), [
    ({"partition": "gpu;reboot"}, "partition"),
    ({"partition": "gpu\n#SBATCH --nodes=99"}, "partition"),
    ({"gpu_type": "h100:8"}, "GRES type"),
    ({"ib_hcas": ["mlx5_0 --x"]}, "RDMA device"),
    ({"settings": JobSettings(mpi="pmix; rm")}, "--mpi"),
    ({"settings": JobSettings(time_limit="soon")}, "--time"),
    ({"settings": JobSettings(job_name="a b")}, "job name"),
    ({"settings": JobSettings(exclude=("n1,n2",))}, "excluded node"),
])
def test_script_refuses_odd_values(args, words):
    call = {"partition": "hgx", "threshold": two_hgx(), "gpu_type": "h100-sxm5-80gb",
            "ib_hcas": ["mlx5_0"], **args}
    with pytest.raises(ScriptError) as err:
        sbatch_script(**call)
    assert words in str(err.value)


BASH = shutil.which("bash")


def run_job(tmp_path: Path, script: str, log: str, srun_exit: int = 0):
    """Run the script with bash (its #SBATCH lines are comments) and a stub srun that prints
    ``log``: what the job does on a cluster, minus the cluster."""
    stub = tmp_path / "bin" / "srun"
    stub.parent.mkdir(exist_ok=True)
    (tmp_path / "srun-output.txt").write_text(log)
    stub.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/srun-args"\n'
                    f'cat "{tmp_path}/srun-output.txt"\nexit {srun_exit}\n')
    stub.chmod(0o755)
    (tmp_path / "job.sbatch").write_text(script)
    env = {**os.environ, "PATH": f"{stub.parent}:{os.environ['PATH']}"}
    env.pop("SLURM_JOB_ID", None)
    return subprocess.run([BASH, "job.sbatch"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)


pytestmark_bash = pytest.mark.skipif(BASH is None, reason="bash not installed")


@pytestmark_bash
def test_job_passes_on_a_healthy_run(tmp_path):
    out = run_job(tmp_path, sbatch_script("hgx", two_hgx(200), "h100-sxm5-80gb", ["mlx5_0"]),
                  text(A3MEGA))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "NCCL all_reduce PASS: busbw 338.09 GB/s at 8589934592 B, floor 304.9 GB/s" in \
        out.stdout
    assert (tmp_path / "nccl-all-reduce-local.log").read_text() == text(A3MEGA)
    assert (tmp_path / "srun-args").read_text().split() == \
        ["--mpi=pmix", "all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
    assert "diagnosis: gpuinfra nccl check nccl-all-reduce-local.log" in out.stdout


@pytestmark_bash
@pytest.mark.parametrize(("log", "srun_exit", "words"), [
    (text(A3MEGA), 0, "busbw below the floor"),  # 338 < 387 with 8 x 400 Gb/s NICs
    # DERIVED: 12 wrong values at 8 GiB
    (text(A3MEGA).replace("0 OK", "12 FAILED").replace("338.82      0", "338.82     12"), 0,
     "wrong values: out of bounds 12, #wrong 12"),
    (text(A3MEGA).split("  4294967296")[0], 0, "did not finish"),  # DERIVED: cut off at 2 GiB
    (text(A100), 0, "8 ranks instead of 16"),
    (text(V100), 0, "sweep stopped at 134217728 B"),
    ("srun: error: Unable to allocate resources\n", 1, "no result rows"),
], ids=["slow", "wrong-values", "truncated", "one-node", "old-short-sweep", "no-output"])
def test_job_fails_and_says_why(tmp_path, log, srun_exit, words):
    out = run_job(tmp_path, sbatch_script("hgx", two_hgx(400), "h100-sxm5-80gb", ["mlx5_0"]),
                  log, srun_exit)
    assert out.returncode == 1, out.stdout
    verdict = [line for line in out.stdout.splitlines() if line.startswith("NCCL all_reduce")]
    assert verdict and verdict[-1].startswith("NCCL all_reduce FAIL") and words in verdict[-1]


@pytestmark_bash
def test_job_fails_when_srun_fails_after_a_passing_table(tmp_path):
    out = run_job(tmp_path, sbatch_script("hgx", two_hgx(200), "h100-sxm5-80gb", ["mlx5_0"]),
                  text(A3MEGA), srun_exit=3)
    assert out.returncode == 1 and "srun exited 3 after a passing table" in out.stdout
