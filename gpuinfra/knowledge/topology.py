"""Topology profiles: what `nvidia-smi topo -m` and `topo -p2p` must show for a known system.

Expectations come from the system's design, never from fixed numbers (see docs/field.md:
Azure's fixed "all 18 links" rule fails H100 PCIe bridged pairs, which use 12 by design).

- ``nvswitch-all-to-all``: HGX/DGX baseboards. Every GPU pair is ``NV#`` with at least the
  model's full link count (NV12 on A100, NV18 on H100/H200), because traffic goes through the
  switches [fm-guide]; P2P must be OK between every pair; Fabric Manager is required.
- ``direct-all-to-all``: 4-GPU SXM baseboards without NVSwitch (e.g. HGX A100 4-GPU, ALCF
  Polaris): every pair joined directly, links split over the 3 peers (NV4 on A100).
- ``bridged-pairs``: PCIe cards joined two by two with NVLink bridges: GPU 2k and 2k+1 show
  ``NV#`` with at least the model's bridge link count; other pairs may be anything.
- ``pcie-only``: no NVLink expected; P2P is not required (consumer and many PCIe SKUs report
  ``NS``/``CNS``), so nothing about pairs is checked.
"""

from __future__ import annotations

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
    requires_fabric_manager: bool = False


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
        TopologyProfile("pcie-only", "no NVLink expected; only the GPU count is checked"),
    )
}


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
    if count < 1:
        return "a GPU node needs at least one GPU"
    return None


def nvlink_pairs(profile: TopologyProfile, model: GpuModel, count: int) -> list[PairExpectation]:
    """The pairs ``profile`` requires to be NVLink, with their minimum link counts."""
    if profile.needs_nvswitch:
        return [PairExpectation(a, b, model.nvlink_links) for a, b in combinations(range(count), 2)]
    if profile.needs_direct_mesh:
        per_peer = max(1, model.nvlink_links // max(1, count - 1))
        return [PairExpectation(a, b, per_peer) for a, b in combinations(range(count), 2)]
    if profile.needs_bridge:
        links = model.bridge_links or 1
        return [PairExpectation(a, a + 1, links) for a in range(0, count - 1, 2)]
    return []


def expected_active_links(profile: TopologyProfile, model: GpuModel) -> int:
    """Active NVLink links each GPU must show in `nvidia-smi nvlink --status`."""
    if profile.needs_nvswitch or profile.needs_direct_mesh:
        return model.nvlink_links
    if profile.needs_bridge:
        return model.bridge_links or 0
    return 0


def _or(values: tuple[int, ...]) -> str:
    return " or ".join(str(v) for v in values)
