"""The Slurm/munge verify judgements (gpuinfra_verify/slurm_expect.py) pass healthy input and fail,
with the right cause, on broken input. Slurm outputs are real lab captures (Slurm 22.05.8)."""

from __future__ import annotations

from pathlib import Path

from gpuinfra.parsers.slurm import GresRecord, SlurmNode, parse_sinfo_nodes
from gpuinfra.parsers.topo import parse_topo
from gpuinfra_verify.slurm_expect import (
    expected_gres,
    gres_problems,
    isolation_problems,
    links_problems,
    node_state_problem,
    reason_advice,
)

HARDWARE = Path(__file__).resolve().parents[2] / "gpuinfra_lab" / "hardware"
SINFO = ("lab-worker1|idle|gpu:h100-sxm5-80gb:8|none\n"
         "lab-worker2|idle|gpu:h100-pcie-80gb:2|none\n")


def _topo(profile: str):
    return parse_topo((HARDWARE / profile / "topo-m.txt").read_text())


def _records(links: list[tuple[int, ...]]) -> list[GresRecord]:
    return [GresRecord("gpu", "t", 1, i, f"/dev/nvidia{i}", None, row)
            for i, row in enumerate(links)]


def test_idle_node_takes_jobs_and_unknown_node_is_named():
    nodes = parse_sinfo_nodes(SINFO)
    assert node_state_problem("lab-worker1", nodes["lab-worker1"]) is None
    missing = node_state_problem("lab-worker3", nodes.get("lab-worker3"))
    assert missing and "does not know this node" in missing


def test_drained_for_gpu_count_names_the_spec_hardware_mismatch():
    node = SlurmNode("gpu01", "drained", "gpu:h100:8",
                     "gres/gpu count reported lower than configured (7 < 8)")
    message = node_state_problem("gpu01", node)
    assert message and "spec's gpu_count disagrees with the hardware" in message
    assert "state=resume" in message and "gpu01" in message


def test_down_not_responding_node_says_slurmd_unreachable():
    message = node_state_problem("gpu02", SlurmNode("gpu02", "down*", "gpu:h100:8", "none"))
    assert message and "cannot reach slurmd" in message
    assert reason_advice("something new")[0].startswith("slurmctld set the node unusable")


def test_gres_counts_compare_both_ways():
    want = expected_gres(["gpu:h100-sxm5-80gb:8", "mps:800"])
    assert want == {"gpu:h100-sxm5-80gb": 8, "mps": 800}
    assert gres_problems(want, {"gpu:h100-sxm5-80gb": 8, "mps": 800}) == []
    assert gres_problems(want, {"gpu:h100-sxm5-80gb": 7}) == [
        "gpu:h100-sxm5-80gb: expected 8, Slurm has 7", "mps: expected 800, Slurm has 0"]
    assert gres_problems({}, {"shard": 4}) == ["shard: expected 0, Slurm has 4"]
    # sinfo on the lab's MPS worker: the mps GRES typed with the GPU's type.
    assert gres_problems({"gpu:h100-pcie-80gb": 2, "mps": 200},
                         {"gpu:h100-pcie-80gb": 2, "mps:h100-pcie-80gb": 200}) == []
    assert gres_problems({"mps": 200}, {"mps:h100-pcie-80gb": 100}) == [
        "mps: expected 200, Slurm has 100"]


def test_links_match_the_nvswitch_and_bridged_topologies():
    eight = [tuple(-1 if i == j else 18 for j in range(8)) for i in range(8)]
    assert links_problems(_records(eight), _topo("8x-h100-sxm-nvswitch")) == []
    assert links_problems(_records([(-1, 12), (12, -1)]), _topo("2x-h100-pcie-bridged")) == []


def test_links_that_disagree_with_the_topology_are_named():
    wrong = links_problems(_records([(-1, 4), (12, -1)]), _topo("2x-h100-pcie-bridged"))
    assert wrong == ["GPU0: Links=-1,4, topology says -1,12"]
    # the broken lab worker: PCIe only (PIX), so a bridge-style Links=12 is wrong
    wrong = links_problems(_records([(-1, 12), (12, -1)]), _topo("2x-a100-pcie-bridge-missing"))
    assert len(wrong) == 2 and "topology says -1,0" in wrong[0]
    short = links_problems(_records([(-1,)] * 2), _topo("8x-h100-sxm-nvswitch"))
    assert "2 GPU records" in short[0]


def test_isolation_accepts_only_the_allocated_gpu():
    fenced = {"/dev/nvidia0": "No such device or address",
              "/dev/nvidia1": "Operation not permitted"}
    assert isolation_problems(fenced, "/dev/nvidia0") == []
    open_all = {"/dev/nvidia0": "No such device or address",
                "/dev/nvidia1": "No such device or address"}
    assert isolation_problems(open_all, "/dev/nvidia0") == [
        "/dev/nvidia1: a GPU the job was not given is reachable (No such device or address)"]
    swapped = isolation_problems(fenced, "/dev/nvidia1")
    assert any("own GPU is refused" in line for line in swapped) and len(swapped) == 2
