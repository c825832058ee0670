"""Boards and GPU facts: the model table, the fixed NVLink matrices, and the checks on real
DGX-1-class captures (tests/fixtures/boards/INDEX.md).

Inputs marked SYNTHESIZED or DERIVED are real captures with a named edit; every other input is
a verbatim public capture.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from gpuinfra.knowledge.gpus import (
    GPU_MODELS,
    branch_problem,
    gpu_model,
    model_for_pci_id,
    model_for_smi_name,
)
from gpuinfra.knowledge.topology import (
    BOARD_MESHES,
    PROFILES,
    board_mesh,
    expected_active_links,
    fabric_manager_needed,
    gpu_count_problem,
    mesh_numbering,
)
from gpuinfra.parsers.nvlink import NvlinkStatus, parse_nvlink
from gpuinfra.parsers.topo import TopoMatrix, parse_topo
from gpuinfra.verdicts import Finding, check_system, failures
from tests.conftest import REAL, REPO

BOARDS = REPO / "tests" / "fixtures" / "boards"
DGX1_TOPO = "dgx1-8x-v100-sxm2-32gb-topo-m-drv580.txt"
DGX1_NVLINK = "dgx1-8x-v100-sxm2-32gb-nvlink-s-drv580.txt"
DGX1_DOWN_TOPO = "dgx1-8x-v100-sxm2-32gb-gpu3-nvlinks-down-SYNTHESIZED-topo-m.txt"
DGX1_DOWN_NVLINK = "dgx1-8x-v100-sxm2-32gb-gpu3-nvlinks-down-SYNTHESIZED-nvlink-s.txt"
MICROWAY_TOPO = "dgx1-microway-8x-v100-sxm2-4x-mlx5-topo-m.txt"
P3_8XL_TOPO = "aws-p3.8xlarge-4x-v100-sxm2-nv1-nv2.txt"
V100 = "V100-SXM2-32GB"


def board_topo(name: str) -> TopoMatrix:
    return parse_topo((BOARDS / name).read_text())


def board_nvlink(name: str) -> NvlinkStatus:
    return parse_nvlink((BOARDS / name).read_text())


def checks(findings: list[Finding], name: str) -> list[Finding]:
    return [f for f in findings if f.check == name]


# ---------------------------------------------------------------------------- the model table

def test_model_keys_names_and_pci_ids_are_unique():
    names = Counter(n for m in GPU_MODELS.values() for n in m.smi_names)
    ids = Counter(i for m in GPU_MODELS.values() for i in m.pci_ids)
    assert [n for n, c in names.items() if c > 1] == []
    assert [i for i, c in ids.items() if c > 1] == []
    for model in GPU_MODELS.values():
        assert gpu_model(model.key) is model
        assert all(len(i) == 4 and i == i.lower() for i in model.pci_ids), model.key


@pytest.mark.parametrize(("name", "key"), [
    # Fixed: 80GB SXM systems print "NVIDIA A100-SXM-80GB" too (MLCommons SUT descriptions:
    # GIGABYTE G492 "NVIDIA A100-SXM-80GB (400W)"; Dell XE8545 node descriptions).
    ("NVIDIA A100-SXM-80GB", "A100-SXM4-80GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),  # tests/fixtures/boards DGX1_NVLINK
    ("Tesla V100-SXM3-32GB", "V100-SXM3-32GB"),
    ("NVIDIA H800", "H800-SXM5-80GB"),
    ("NVIDIA H20", "H20-96GB"),
    ("NVIDIA H200 NVL", "H200-NVL-141GB"),
    ("NVIDIA GH200 480GB", "GH200-96GB"),
    ("NVIDIA B200", "B200-180GB"),
    ("NVIDIA GB200", "GB200-186GB"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-ADA"),
    ("NVIDIA L40", "L40"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-BSE"),
])
def test_names_as_nvidia_smi_prints_them(name, key):
    model = model_for_smi_name(name)
    assert model is not None and model.key == key


@pytest.mark.parametrize(("pci", "key"), [
    # Fixed: pci.ids names 20b1 "A100 PCIe 40GB" and 1df5 "Tesla V100 SXM2 16GB" beside 20f1/1db1.
    ("20b1", "A100-PCIE-40GB"), ("20f1", "A100-PCIE-40GB"),
    ("1df5", "V100-SXM2-16GB"), ("1db1", "V100-SXM2-16GB"),
    ("1db8", "V100-SXM3-32GB"), ("1db6", "V100-PCIE-32GB"), ("20f3", "A800-SXM4-80GB"),
    ("2324", "H800-SXM5-80GB"), ("2901", "B200-180GB"), ("2941", "GB200-186GB"),
    ("26b1", "RTX-6000-ADA"), ("26b5", "L40"), ("2bb5", "RTX-PRO-6000-BSE"),
])
def test_pci_ids(pci, key):
    model = model_for_pci_id(f"10de:{pci}")
    assert model is not None and model.key == key


def test_dgx_v100_lspci_capture_maps_to_its_model():
    text = (REAL / "lspci" / "dgx-8x-v100-sxm2-10de-1db1-lspci-nnk-vfio-pci.txt").read_text()
    assert "[10de:1db1]" in text and model_for_pci_id("1db1").key == "V100-SXM2-16GB"


@pytest.mark.parametrize(("key", "links", "gbytes_per_s"), [
    ("V100-SXM2-32GB", 6, 25.781),  # DGX1_NVLINK: 6 links per GPU at 25.781
    ("A800-SXM4-80GB", 8, 25.0),  # NV8: the export part's cut link count
    ("H800-SXM5-80GB", 8, 26.562),
    ("H20-96GB", 18, 26.562),
    ("B200-180GB", 18, 53.125),
    ("GB200-186GB", 18, 53.125),
])
def test_link_counts_and_rates(key, links, gbytes_per_s):
    model = GPU_MODELS[key]
    assert (model.nvlink_links, model.link_gbytes_per_s) == (links, gbytes_per_s)


def test_real_dgx1_capture_shows_six_links_at_the_v100_rate():
    status = board_nvlink(DGX1_NVLINK)
    assert len(status.gpus) == 8
    for gpu in status.gpus.values():
        assert len(gpu.active_links) == GPU_MODELS[V100].nvlink_links
        rates = {link.gbytes_per_s for link in gpu.links.values()}
        assert rates == {GPU_MODELS[V100].link_gbytes_per_s}


def test_media_extension_profiles_are_marked():
    a30 = GPU_MODELS["A30"].mig_profiles
    # Fixed: the MIG guide's A30 table has 2g.12gb+me (R525 and later).
    assert a30["2g.12gb+me"].media_extensions and a30["2g.12gb+me"].max_instances == 1
    pro = GPU_MODELS["RTX-PRO-6000-BSE"].mig_profiles
    assert pro["1g.24gb+me.all"].media_extensions
    assert not pro["1g.24gb-me"].media_extensions and not pro["1g.24gb+gfx"].media_extensions
    assert GPU_MODELS["RTX-PRO-6000-BSE"].mig_slices == (4, 4)


def test_every_mig_profile_fits_its_gpu():
    for model in GPU_MODELS.values():
        for profile in model.mig_profiles.values():
            compute, memory = model.mig_slices
            assert profile.compute_slices <= compute and profile.memory_slices <= memory, \
                (model.key, profile.name)


# ---------------------------------------------------------------------------- driver branches

@pytest.mark.parametrize(("key", "branch", "words"), [
    ("B200-180GB", 535, "needs driver branch 570 or newer"),
    ("GB200-186GB", 550, "needs driver branch 570 or newer"),
    ("RTX-PRO-6000-BSE", 570, "needs driver branch 575 or newer"),
    ("V100-SXM2-32GB", 590, "up to 580 only"),
])
def test_a_branch_that_cannot_drive_the_board_is_named(key, branch, words):
    problem = branch_problem(GPU_MODELS[key], branch)
    assert problem is not None and words in problem


@pytest.mark.parametrize(("key", "branch"), [("B200-180GB", 570), ("V100-SXM2-16GB", 580),
                                             ("H100-SXM5-80GB", 535), ("GB200-186GB", 580)])
def test_branches_that_drive_the_board(key, branch):
    assert branch_problem(GPU_MODELS[key], branch) is None


# ---------------------------------------------------------------------------- fixed meshes

def test_every_mesh_is_well_formed_and_names_known_models():
    for mesh in BOARD_MESHES:
        assert mesh.models and all(key in GPU_MODELS for key in mesh.models), mesh.name
        pairs = [(a, b) for a, b, _ in mesh.links]
        assert all(0 <= a < b < mesh.gpus for a, b in pairs), mesh.name
        assert len(pairs) == len(set(pairs)), mesh.name
        for gpu in range(mesh.gpus if not mesh.switched else 0):
            for key in mesh.models:  # direct links: no GPU uses more links than it has
                assert mesh.active_links(gpu) <= GPU_MODELS[key].nvlink_links, (mesh.name, gpu)


def test_dgx1_mesh_is_the_hybrid_cube_mesh():
    mesh = board_mesh(GPU_MODELS[V100], 8)
    assert mesh is not None and mesh.name == "dgx1-hybrid-cube-mesh"
    assert [mesh.active_links(g) for g in range(8)] == [6] * 8
    assert Counter(n for _, _, n in mesh.links) == {1: 8, 2: 8}
    assert len(mesh.links) == 16  # 12 of the 28 pairs have no NVLink by design


def test_the_mesh_matches_both_real_dgx1_captures():
    """The table's matrix is read off neither capture alone: both show exactly it."""
    mesh = board_mesh(GPU_MODELS[V100], 8)
    table = {(a, b): n for a, b, n in mesh.links}
    for name in (DGX1_TOPO, MICROWAY_TOPO):
        topo = board_topo(name)
        seen = {(a, b): topo.nvlink_count(a, b) for a, b in combinations(range(8), 2)}
        assert {pair: n for pair, n in seen.items() if n} == table, name


def test_p3_8xlarge_is_the_half_mesh():
    topo = parse_topo((REAL / "nvidia-smi-topo-m" / P3_8XL_TOPO).read_text())
    mesh = board_mesh(GPU_MODELS["V100-SXM2-16GB"], 4)
    assert mesh is not None and mesh.name == "dgx1-half-4-gpus"
    assert {(a, b): n for a, b, n in mesh.links} == \
        {(a, b): topo.nvlink_count(a, b) for a, b in combinations(range(4), 2)}
    assert expected_active_links(PROFILES["fixed-mesh"], GPU_MODELS["V100-SXM2-16GB"], 4) == \
        [4, 4, 5, 5]


def test_one_profile_expresses_other_fixed_meshes():
    hgx2 = GPU_MODELS["V100-SXM3-32GB"]
    h200nvl = GPU_MODELS["H200-NVL-141GB"]
    mesh = PROFILES["fixed-mesh"]
    assert board_mesh(hgx2, 16).switched and fabric_manager_needed(mesh, hgx2, 16)
    assert not fabric_manager_needed(mesh, GPU_MODELS[V100], 8)
    assert expected_active_links(mesh, hgx2, 16) == [6] * 16
    assert board_mesh(h200nvl, 4) is not None
    assert gpu_count_problem(mesh, h200nvl, 4) is None
    assert gpu_count_problem(mesh, GPU_MODELS[V100], 6) == \
        "the fixed NVLink matrices of V100-SXM2-32GB hold 8 or 4 GPUs, not 6"
    assert "no fixed NVLink matrix" in gpu_count_problem(mesh, GPU_MODELS["H100-SXM5-80GB"], 8)


def test_pcie_only_is_refused_for_an_nvlink_baseboard():
    """pcie-only would accept a DGX-1 with every NVLink down (it checks no pair)."""
    problem = gpu_count_problem(PROFILES["pcie-only"], GPU_MODELS[V100], 8)
    assert problem is not None and "fixed-mesh" in problem
    problem = gpu_count_problem(PROFILES["pcie-only"], GPU_MODELS["H100-SXM5-80GB"], 8)
    assert problem is not None and "nvswitch-all-to-all" in problem
    # No known board of that size, or a PCIe card: pcie-only stays allowed.
    assert gpu_count_problem(PROFILES["pcie-only"], GPU_MODELS[V100], 1) is None
    assert gpu_count_problem(PROFILES["pcie-only"], GPU_MODELS["H100-PCIE-80GB"], 2) is None


def test_mesh_numbering_finds_another_vendors_gpu_order():
    """GPU indices follow PCI enumeration: a board that numbers the same mesh differently is
    matched, and the pairs are then named in its numbering."""
    real = board_topo(DGX1_TOPO)
    order = (0, 1, 3, 2, 7, 6, 4, 5)  # board GPU b is node GPU order[b]
    back = {node: board for board, node in enumerate(order)}

    def relabelled(a: int, b: int) -> int:  # DERIVED: the real matrix under another numbering
        return real.nvlink_count(back[a], back[b])

    mesh = board_mesh(GPU_MODELS[V100], 8)
    assert mesh_numbering(mesh, real.nvlink_count) == tuple(range(8))
    numbering = mesh_numbering(mesh, relabelled)
    assert all(relabelled(numbering[a], numbering[b]) == n for a, b, n in mesh.links)


# ---------------------------------------------------------------------------- DGX-1 checks

def test_dgx1_with_all_links_active_passes_fixed_mesh():
    findings = check_system("fixed-mesh", 8, V100, topo=board_topo(DGX1_TOPO),
                            nvlink=board_nvlink(DGX1_NVLINK))
    assert failures(findings) == []
    pairs = checks(findings, "nvlink-topology")
    assert len(pairs) == 16
    assert (pairs[0].subject, pairs[0].expected, pairs[0].observed) == ("GPU0-GPU1", "NV>=1",
                                                                        "NV1")
    links = checks(findings, "nvlink-links")
    assert [f.expected for f in links] == [">=6 active links at 25.781 GB/s"] * 8


def test_microway_dgx1_passes_fixed_mesh():
    assert failures(check_system("fixed-mesh", 8, V100, topo=board_topo(MICROWAY_TOPO))) == []


def test_p3_8xlarge_passes_the_half_mesh():
    topo = parse_topo((REAL / "nvidia-smi-topo-m" / P3_8XL_TOPO).read_text())
    findings = check_system("fixed-mesh", 4, "V100-SXM2-16GB", topo=topo)
    assert failures(findings) == [] and len(checks(findings, "nvlink-topology")) == 6


def test_dgx1_with_one_gpus_links_down_fails_naming_its_pairs():
    findings = check_system("fixed-mesh", 8, V100, topo=board_topo(DGX1_DOWN_TOPO),
                            nvlink=board_nvlink(DGX1_DOWN_NVLINK))
    failed = failures(findings)
    assert [(f.check, f.subject) for f in failed] == [
        ("nvlink-topology", "GPU0-GPU3"), ("nvlink-topology", "GPU1-GPU3"),
        ("nvlink-topology", "GPU2-GPU3"), ("nvlink-topology", "GPU3-GPU7"),
        ("nvlink-links", "GPU3"),
    ]
    assert failed[0].expected == "NV>=2" and failed[0].observed == "NODE"
    assert all("board wires together" in f.cause for f in failed)
    assert "reseat or replace" in failed[0].fix
    assert failed[-1].observed == "all links inactive"


def test_dgx1_renumbered_is_matched_and_still_checked():
    """DERIVED: the real drv580 matrix with GPUs 2/3 and 4-7 renumbered as another vendor's
    board enumerates them; the check passes and says which numbering it matched."""
    text = (BOARDS / DGX1_TOPO).read_text()
    order = [0, 1, 3, 2, 7, 6, 4, 5]
    lines = text.splitlines()
    header, rows = lines[0].split("\t"), [line.split("\t") for line in lines[1:9]]
    new_rows = []
    for node in range(8):
        board = order.index(node)
        row = rows[board]
        cells = [row[1 + order.index(col)] for col in range(8)]
        new_rows.append("\t".join([f"GPU{node}", *cells, *row[9:]]))
    renumbered = "\n".join(["\t".join(header), *new_rows, *lines[9:]]) + "\n"
    findings = check_system("fixed-mesh", 8, V100, topo=parse_topo(renumbered))
    assert failures(findings) == []
    numbering = checks(findings, "mesh-numbering")
    assert len(numbering) == 1 and "board GPU2=GPU3" in numbering[0].observed


def test_dgx1_as_pcie_only_fails_the_profile():
    findings = check_system("pcie-only", 8, V100, topo=board_topo(DGX1_DOWN_TOPO))
    profile = checks(findings, "profile")[0]
    assert profile.severity == "fail" and "fixed-mesh" in profile.observed


def test_dgx1_as_nvswitch_fails_every_unlinked_pair():
    """The old profiles cannot express the board: every pair without NVLink fails."""
    findings = check_system("nvswitch-all-to-all", 8, topo=board_topo(DGX1_TOPO))
    assert len(failures(findings)) == 12
