"""Topology profiles: what `nvidia-smi topo -m` and `topo -p2p` must show for a known system.

Expectations come from the system's design, never from fixed numbers (see docs/field.md:
Azure's fixed "all 18 links" rule fails H100 PCIe bridged pairs, which use 12 by design).

- ``nvswitch-all-to-all``: HGX/DGX baseboards. Every GPU pair is ``NV#`` with at least the
  model's full link count (NV12 on A100, NV18 on H100/H200, NV8 on the A800/H800 cut-down
  parts), because traffic goes through the switches [fm-guide]; P2P must be OK between every
  pair; Fabric Manager is required.
- ``direct-all-to-all``: 4-GPU SXM baseboards without NVSwitch (e.g. HGX A100 4-GPU, ALCF
  Polaris): every pair joined directly, links split over the 3 peers (NV4 on A100).
- ``bridged-pairs``: PCIe cards joined two by two with NVLink bridges: GPU 2k and 2k+1 show
  ``NV#`` with at least the model's bridge link count; other pairs may be anything.
- ``fixed-mesh``: boards whose NVLinks form a fixed, known matrix, held in :data:`BOARD_MESHES`
  (one entry per board, no new profile per board): each listed pair must show its ``NV#``
  (NV1 and NV2 on the DGX-1 hybrid cube-mesh), unlisted pairs are not NVLink by design, and
  each GPU must show as many active links as its row of the matrix adds up to. A mesh built
  on NVSwitches (HGX-2) needs Fabric Manager.
- ``nvlink-domain``: rack-scale NVLink domains (GB200 NVL72): the node's GPUs reach each other
  and the rest of the rack through the rack's NVLink switch trays: every pair of the node
  ``NV#`` with the full link count, P2P OK, and the GPU fabric (``nvidia-smi -q``: State
  Completed, Status Success, one CliqueId and ClusterUUID on every GPU) registered with the
  domain; memory shared across nodes needs the IMEX daemon (``nvidia-imex``).
- ``pcie-only``: no NVLink expected; P2P is not required (consumer and many PCIe SKUs report
  ``NS``/``CNS``), so nothing about pairs is checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

from gpuinfra.knowledge.gpus import GpuModel


@dataclass(frozen=True)
class TopologyProfile:
    name: str
    summary: str
    needs_nvswitch: bool = False
    needs_bridge: bool = False
    needs_direct_mesh: bool = False
    needs_mesh: bool = False
    needs_nvl_domain: bool = False
    requires_fabric_manager: bool = False

    @property
    def checks_pairs(self) -> bool:
        """Whether the profile expects NVLink between some GPU pairs."""
        return (self.needs_nvswitch or self.needs_direct_mesh or self.needs_bridge
                or self.needs_mesh or self.needs_nvl_domain)


PROFILES: dict[str, TopologyProfile] = {
    p.name: p
    for p in (
        TopologyProfile(
            "nvswitch-all-to-all",
            "every GPU pair NVLink through NVSwitch, full link count, P2P OK everywhere",
            needs_nvswitch=True,
            requires_fabric_manager=True,
        ),
        TopologyProfile(
            "direct-all-to-all",
            "every GPU pair NVLink directly (no switch), links split over the peers, P2P OK",
            needs_direct_mesh=True,
        ),
        TopologyProfile(
            "bridged-pairs",
            "GPU 2k and 2k+1 joined by an NVLink bridge, P2P OK within each pair",
            needs_bridge=True,
        ),
        TopologyProfile(
            "fixed-mesh",
            "GPU pairs joined as the board's known NVLink matrix (DGX-1 hybrid cube-mesh: NV1/"
            "NV2, some pairs unlinked; H200 NVL 4-way bridge; HGX-2)",
            needs_mesh=True,
        ),
        TopologyProfile(
            "nvlink-domain",
            "GPUs of a rack-scale NVLink domain (GB200 NVL72): every pair of the node NVLink, "
            "fabric registered (nvidia-smi -q), IMEX across nodes",
            needs_nvl_domain=True,
        ),
        TopologyProfile("pcie-only", "no NVLink expected; only the GPU count is checked"),
    )
}


@dataclass(frozen=True)
class NvlinkMesh:
    """A board whose NVLinks form a fixed, known matrix.

    models: the GPU model keys it is built with. links: (a, b, NV#) for every linked pair, a < b;
    pairs not listed are not NVLink on this board. switched: the links go to NVSwitches (every
    GPU uses all its links, Fabric Manager routes them).
    """

    name: str
    models: tuple[str, ...]
    gpus: int
    links: tuple[tuple[int, int, int], ...]
    switched: bool = False
    source: str = ""

    def active_links(self, gpu: int) -> int:
        """Links GPU ``gpu`` has towards the other GPUs of the board (its row of the matrix)."""
        return sum(n for a, b, n in self.links if gpu in (a, b))


def _all_pairs(gpus: int, links: int) -> tuple[tuple[int, int, int], ...]:
    return tuple((a, b, links) for a, b in combinations(range(gpus), 2))


# The DGX-1 hybrid cube-mesh (8x V100 SXM2; also AWS p3.16xlarge/p3dn and Azure NDv2): GPU0 is
# NV1 to GPU1/2, NV2 to GPU3/4, no NVLink to GPU5-7; 6 links per GPU. Sources: Microway's DGX-1
# `nvidia-smi topo -m` ("nvidia-smi: Control Your GPUs"), the same matrix captured on a rented
# 8x V100-SXM2-32GB (tests/fixtures/boards/INDEX.md), NVIDIA/nccl#671 (DGX-1V link counts).
_DGX1 = ((0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 4, 2), (1, 2, 2), (1, 3, 1), (1, 5, 2),
         (2, 3, 2), (2, 6, 1), (3, 7, 1), (4, 5, 1), (4, 6, 1), (4, 7, 2), (5, 6, 2), (5, 7, 1),
         (6, 7, 2))

BOARD_MESHES: tuple[NvlinkMesh, ...] = (
    NvlinkMesh("dgx1-hybrid-cube-mesh", ("V100-SXM2-16GB", "V100-SXM2-32GB"), 8, _DGX1,
               source="Microway DGX-1 topo -m; tests/fixtures/boards; NVIDIA/nccl#671"),
    # Half of it, GPUs 0-3 (AWS p3.8xlarge): fixture
    # nvidia-smi-topo-m/aws-p3.8xlarge-4x-v100-sxm2-nv1-nv2.txt shows exactly this submatrix.
    # Links to the other half are outside the node, so a GPU's row adds up to 4 or 5.
    NvlinkMesh("dgx1-half-4-gpus", ("V100-SXM2-16GB", "V100-SXM2-32GB"), 4,
               tuple(link for link in _DGX1 if link[1] < 4),
               source="fixture aws-p3.8xlarge-4x-v100-sxm2-nv1-nv2.txt"),
    # HGX-2 / DGX-2: 16 V100 SXM3 on 12 NVSwitches, NV6 on every pair (NVIDIA/nccl-tests#78).
    NvlinkMesh("hgx2-16-gpus", ("V100-SXM3-32GB",), 16, _all_pairs(16, 6), switched=True,
               source="NVIDIA/nccl-tests#78"),
    # H200 NVL 4-way NVLink bridge: the 4 cards fully meshed, 18 links over 3 peers (inferred
    # from NVIDIA's 900 GB/s per GPU; no capture found).
    # UNVERIFIED (knowledge audit 9735030 row 28): no `topo -m` or `nvlink -s` of a bridged H200 NVL
    # found (NV6 per pair here, NV18 on the 2-way bridge).
    NvlinkMesh("h200-nvl-4-way-bridge", ("H200-NVL-141GB",), 4, _all_pairs(4, 6),
               source="inferred: NVIDIA H200 NVL brief, 4-way bridge, 900 GB/s per GPU"),
)


def board_mesh(model: GpuModel, count: int) -> NvlinkMesh | None:
    """The known fixed NVLink matrix of ``count`` GPUs of ``model``, or None."""
    return next((m for m in BOARD_MESHES if model.key in m.models and m.gpus == count), None)


@dataclass(frozen=True)
class PairExpectation:
    """One GPU pair that must be NVLink-connected (and P2P OK)."""

    a: int
    b: int
    min_links: int

    @property
    def subject(self) -> str:
        return f"GPU{self.a}-GPU{self.b}"


def gpu_count_problem(profile: TopologyProfile, model: GpuModel | None, count: int) -> str | None:
    """Why ``count`` GPUs of ``model`` cannot form ``profile``, or None when they can."""
    if profile.needs_nvswitch:
        if model is not None and not model.nvswitch:
            return f"{model.key} is not built into NVSwitch baseboards"
        allowed = model.nvswitch_gpu_counts if model is not None else (8,)
        if count not in allowed:
            return f"NVSwitch baseboards of this model hold {_or(allowed)} GPUs, not {count}"
    if profile.needs_direct_mesh:
        if model is not None and not model.direct_all_to_all_counts:
            return f"{model.key} has no directly meshed multi-GPU baseboard"
        allowed = model.direct_all_to_all_counts if model is not None else (4,)
        if count not in allowed:
            return f"directly meshed baseboards of this model hold {_or(allowed)} GPUs, not {count}"
    if profile.needs_bridge:
        if model is not None and model.bridge_links is None:
            return f"{model.key} has no NVLink bridge"
        if count < 2 or count % 2:
            return f"bridged pairs need an even number of GPUs (2, 4, 6, 8), not {count}"
    if profile.needs_mesh:
        problem = _mesh_problem(model, count)
        if problem:
            return problem
    if profile.needs_nvl_domain:
        if model is not None and not model.nvl_domain_gpu_counts:
            return f"{model.key} is not built into rack-scale NVLink domains"
        allowed = model.nvl_domain_gpu_counts if model is not None else (4,)
        if count not in allowed:
            return f"NVLink-domain nodes of this model hold {_or(allowed)} GPUs, not {count}"
    if count < 1:
        return "a GPU node needs at least one GPU"
    if not profile.checks_pairs and model is not None and model.has_nvlink \
            and model.bridge_links is None:
        # SXM GPUs and superchips sit on NVLink baseboards (no bridge to leave out): where a
        # board of this size is known, pcie-only would accept the node with every NVLink down.
        fits = [p.name for p in PROFILES.values()
                if p.checks_pairs and gpu_count_problem(p, model, count) is None]
        if fits:
            return (f"{count}x {model.key} sit on an NVLink baseboard ({' or '.join(fits)}): "
                    f"{profile.name} would check none of their NVLinks")
    return None


def _mesh_problem(model: GpuModel | None, count: int) -> str | None:
    if model is None:
        return "a fixed NVLink matrix is known per GPU model: name the model"
    if board_mesh(model, count) is not None:
        return None
    sizes = [m.gpus for m in BOARD_MESHES if model.key in m.models]
    if not sizes:
        return f"no fixed NVLink matrix is known for {model.key}"
    return f"the fixed NVLink matrices of {model.key} hold {_or(tuple(sizes))} GPUs, not {count}"


def nvlink_pairs(profile: TopologyProfile, model: GpuModel, count: int) -> list[PairExpectation]:
    """The pairs ``profile`` requires to be NVLink, with their minimum link counts."""
    if profile.needs_nvswitch or profile.needs_nvl_domain:
        return [PairExpectation(a, b, model.nvlink_links) for a, b in combinations(range(count), 2)]
    if profile.needs_direct_mesh:
        per_peer = max(1, model.nvlink_links // max(1, count - 1))
        return [PairExpectation(a, b, per_peer) for a, b in combinations(range(count), 2)]
    if profile.needs_bridge:
        links = model.bridge_links or 1
        return [PairExpectation(a, a + 1, links) for a in range(0, count - 1, 2)]
    if profile.needs_mesh:
        mesh = board_mesh(model, count)
        return [PairExpectation(a, b, n) for a, b, n in mesh.links] if mesh else []
    return []


def expected_active_links(profile: TopologyProfile, model: GpuModel, count: int) -> list[int]:
    """Active NVLink links each GPU (by index) must show in `nvidia-smi nvlink --status`."""
    if profile.needs_nvswitch or profile.needs_direct_mesh or profile.needs_nvl_domain:
        return [model.nvlink_links] * count
    if profile.needs_bridge:
        return [model.bridge_links or 0] * count
    if profile.needs_mesh:
        mesh = board_mesh(model, count)
        if mesh is None:
            return [0] * count
        if mesh.switched:
            return [model.nvlink_links] * count
        return [mesh.active_links(gpu) for gpu in range(count)]
    return [0] * count


def mesh_numbering(mesh: NvlinkMesh, observed: Callable[[int, int], int]) -> tuple[int, ...]:
    """How the node numbers the board's GPUs: ``numbering[board GPU] = node GPU index``.

    GPU indices follow PCI enumeration, which differs between vendors' boards: public 8x V100
    SXM2 captures show the hybrid cube-mesh under other numberings than the DGX-1's. The
    numbering chosen is the one under which most of the board's links appear in ``observed``
    (the node's NV# count between two of its GPUs, 0 for none), the board's own numbering when
    it does as well as any other: with one GPU's links down, the pairs named are then the
    board's.
    """
    n, links = mesh.gpus, mesh.links
    seen = Counter(observed(a, b) for a, b in combinations(range(n), 2))
    best: list[tuple[int, tuple[int, ...]]] = [(-1, tuple(range(n)))]

    def bound(node: int, matched: Counter[int]) -> int:
        """Links that can still match: per NV#, open links and unused observed links."""
        open_links = Counter(k for a, b, k in links if max(a, b) >= node)
        return sum(min(count, seen[k] - matched[k]) for k, count in open_links.items())

    def extend(assigned: list[int], matched: Counter[int]) -> None:
        node, score = len(assigned), sum(matched.values())
        if score + bound(node, matched) <= best[0][0]:
            return
        if node == n:
            best[0] = (score, tuple(assigned))
            return
        for candidate in [node] + [i for i in range(n) if i != node]:
            if candidate in assigned:
                continue
            gained = Counter(k for a, b, k in links if max(a, b) == node
                             and observed(assigned[min(a, b)], candidate) == k)
            extend([*assigned, candidate], matched + gained)
            if best[0][0] == len(links):
                return

    extend([], Counter())
    return best[0][1]


def fabric_manager_needed(profile: TopologyProfile, model: GpuModel, count: int) -> bool:
    """Whether ``count`` GPUs of ``model`` joined as ``profile`` need Fabric Manager."""
    if profile.requires_fabric_manager:
        return True
    mesh = board_mesh(model, count) if profile.needs_mesh else None
    return bool(mesh and mesh.switched)


def _or(values: tuple[int, ...]) -> str:
    return " or ".join(str(v) for v in values)
