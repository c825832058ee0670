"""GPU models: NVLink, NVSwitch, MIG and PCI facts per model.

Sources (keys as in docs/hardware-reference.md):
- NVLink generation, links per GPU and the per-link rate that `nvidia-smi nvlink --status`
  prints: docs/hardware-reference.md 8.3 [nvlink-wiki] [hwloc-574] [nvl-a100] [ga102] [siboehm].
  H100 PCIe + bridge: 12 of 18 links active at 26.562 GB/s (fixture
  nvidia-smi-nvlink/hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt). A100 PCIe + bridges:
  NV12 (fixture nvidia-smi-topo-m/4x-a100-80gb-pcie-2-nvlink-bridged-pairs-...).
- MIG profiles and instance counts: NVIDIA MIG user guide, "Supported MIG profiles"
  [mig-profiles], and the GPU Operator's default mig-parted ConfigMap [gpuop-migcm]
  (docs/hardware-reference.md 7.1; the errors listed in 7.2 are NOT copied). A30: fixture
  nvidia-smi-mig-lgip/a30-24gb-mig-lgip-all-slices-in-use.txt.
- PCI device IDs: the MIG guide's table and pci.ids (10de:2330 H100 SXM5, 10de:2331 H100 PCIe,
  10de:20b2 A100 SXM4 80GB, 10de:1db1 V100 SXM2 16GB, 10de:2236 A10, 10de:26b9 L40S are also
  in the lspci fixtures).
- Fabric Manager: required on NVSwitch systems only [fm-guide] (docs/hardware-reference.md 1.6).
- MPS client limit 48 per device on Volta and newer [mps-doc] (docs/hardware-reference.md 7.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import get_close_matches


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile: its name as `nvidia-smi mig -lgip` prints it (without "MIG ")."""

    name: str
    compute_slices: int
    memory_slices: int
    max_instances: int
    media_extensions: bool = False


@dataclass(frozen=True)
class GpuModel:
    """What the project knows about one GPU model.

    key: the name used in cluster specs (e.g. ``H100-SXM5-80GB``).
    smi_names: names `nvidia-smi` prints for it (``--query-gpu=name``, ``-L``).
    pci_ids: PCI device IDs (lower-case hex, vendor 10de implied).
    nvlink_gen: NVLink generation, 0 when the model has none.
    nvlink_links: NVLink links per GPU (all links of the GPU).
    bridge_links: links a GPU uses towards its bridged peer (NVLink bridge), None if no bridge.
    link_gbps: per-link, per-direction rate printed by `nvidia-smi nvlink --status` (GB/s).
    nvswitch: the model is built into NVSwitch baseboards (HGX), where Fabric Manager is needed.
    nvswitch_gpu_counts: GPUs per NVSwitch baseboard.
    direct_all_to_all_counts: GPU counts of baseboards that join every pair directly (no switch).
    mig_slices: (compute, memory) slices of a full GPU; (0, 0) when MIG is not supported.
    mig_profiles: profile name -> MigProfile.
    """

    key: str
    smi_names: tuple[str, ...]
    pci_ids: tuple[str, ...]
    memory_gb: int
    form_factor: str
    nvlink_gen: int = 0
    nvlink_links: int = 0
    bridge_links: int | None = None
    link_gbps: float = 0.0
    nvswitch: bool = False
    nvswitch_gpu_counts: tuple[int, ...] = ()
    direct_all_to_all_counts: tuple[int, ...] = ()
    mig_slices: tuple[int, int] = (0, 0)
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)
    mps: bool = True

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink_gen > 0

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)


def _mig(*rows: tuple[str, int, int, int]) -> dict[str, MigProfile]:
    return {
        name: MigProfile(name, c, m, n, media_extensions=name.endswith("+me"))
        for name, c, m, n in rows
    }


# Memory slices are eighths of the GPU's memory (1g 1/8, 1g-large and 2g 2/8, 3g/4g 4/8, 7g 8/8)
# and compute slices sevenths of its SMs [mig-profiles].
def _mig_7(g1: str, g1_large: str, g2: str, g3: str, g4: str, g7: str) -> dict[str, MigProfile]:
    return _mig(
        (f"1g.{g1}", 1, 1, 7),
        (f"1g.{g1}+me", 1, 1, 1),
        (f"1g.{g1_large}", 1, 2, 4),
        (f"2g.{g2}", 2, 2, 3),
        (f"3g.{g3}", 3, 4, 2),
        (f"4g.{g4}", 4, 4, 1),
        (f"7g.{g7}", 7, 8, 1),
    )


_MODELS: tuple[GpuModel, ...] = (
    GpuModel(
        key="A100-SXM4-40GB", smi_names=("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
        pci_ids=("20b0",), memory_gb=40, form_factor="SXM4",
        nvlink_gen=3, nvlink_links=12, link_gbps=25.0,
        nvswitch=True, nvswitch_gpu_counts=(8,), direct_all_to_all_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7("5gb", "10gb", "10gb", "20gb", "20gb", "40gb"),
    ),
    GpuModel(
        key="A100-SXM4-80GB", smi_names=("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        pci_ids=("20b2",), memory_gb=80, form_factor="SXM4",
        nvlink_gen=3, nvlink_links=12, link_gbps=25.0,
        nvswitch=True, nvswitch_gpu_counts=(8,), direct_all_to_all_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7("10gb", "20gb", "20gb", "40gb", "40gb", "80gb"),
    ),
    GpuModel(
        key="A100-PCIE-40GB", smi_names=("NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"),
        pci_ids=("20f1",), memory_gb=40, form_factor="PCIe",
        nvlink_gen=3, nvlink_links=12, bridge_links=12, link_gbps=25.0,
        mig_slices=(7, 8), mig_profiles=_mig_7("5gb", "10gb", "10gb", "20gb", "20gb", "40gb"),
    ),
    GpuModel(
        key="A100-PCIE-80GB", smi_names=("NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"),
        pci_ids=("20b5",), memory_gb=80, form_factor="PCIe",
        nvlink_gen=3, nvlink_links=12, bridge_links=12, link_gbps=25.0,
        mig_slices=(7, 8), mig_profiles=_mig_7("10gb", "20gb", "20gb", "40gb", "40gb", "80gb"),
    ),
    GpuModel(
        key="A30", smi_names=("NVIDIA A30",), pci_ids=("20b7",), memory_gb=24, form_factor="PCIe",
        # A30 NVLink bridge: 200 GB/s bidirectional = 4 NVLink3 links (inferred, spec sheet).
        nvlink_gen=3, nvlink_links=4, bridge_links=4, link_gbps=25.0,
        mig_slices=(4, 4),
        mig_profiles=_mig(("1g.6gb", 1, 1, 4), ("1g.6gb+me", 1, 1, 1), ("2g.12gb", 2, 2, 2),
                          ("4g.24gb", 4, 4, 1)),
    ),
    GpuModel(
        key="H100-SXM5-80GB", smi_names=("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"),
        pci_ids=("2330",), memory_gb=80, form_factor="SXM5",
        nvlink_gen=4, nvlink_links=18, link_gbps=26.562,
        nvswitch=True, nvswitch_gpu_counts=(8,), direct_all_to_all_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7("10gb", "20gb", "20gb", "40gb", "40gb", "80gb"),
    ),
    GpuModel(
        key="H100-PCIE-80GB", smi_names=("NVIDIA H100 PCIe",), pci_ids=("2331",), memory_gb=80,
        form_factor="PCIe",
        # 18 link slots; an NVLink bridge set joins a pair over 12 of them (NV12).
        nvlink_gen=4, nvlink_links=18, bridge_links=12, link_gbps=26.562,
        mig_slices=(7, 8), mig_profiles=_mig_7("10gb", "20gb", "20gb", "40gb", "40gb", "80gb"),
    ),
    GpuModel(
        key="H100-NVL-94GB", smi_names=("NVIDIA H100 NVL",), pci_ids=("2321",), memory_gb=94,
        form_factor="PCIe",
        nvlink_gen=4, nvlink_links=18, bridge_links=12, link_gbps=26.562,
        mig_slices=(7, 8), mig_profiles=_mig_7("12gb", "24gb", "24gb", "47gb", "47gb", "94gb"),
    ),
    GpuModel(
        key="H200-SXM-141GB", smi_names=("NVIDIA H200",), pci_ids=("2335",), memory_gb=141,
        form_factor="SXM5",
        nvlink_gen=4, nvlink_links=18, link_gbps=26.562,
        nvswitch=True, nvswitch_gpu_counts=(8,), direct_all_to_all_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7("18gb", "35gb", "35gb", "71gb", "71gb", "141gb"),
    ),
    GpuModel(
        key="V100-SXM2-16GB", smi_names=("Tesla V100-SXM2-16GB",), pci_ids=("1db1",), memory_gb=16,
        form_factor="SXM2",
        # DGX-1 hybrid cube-mesh: no NVSwitch; 6 links per GPU split over 4 peers (NV1/NV2).
        nvlink_gen=2, nvlink_links=6, link_gbps=25.781,
    ),
    GpuModel(
        key="V100-SXM2-32GB", smi_names=("Tesla V100-SXM2-32GB",), pci_ids=("1db5",), memory_gb=32,
        form_factor="SXM2", nvlink_gen=2, nvlink_links=6, link_gbps=25.781,
    ),
    GpuModel(
        key="RTX-3090", smi_names=("NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
        pci_ids=("2204",), memory_gb=24, form_factor="PCIe",
        nvlink_gen=3, nvlink_links=4, bridge_links=4, link_gbps=14.062,
    ),
    GpuModel(
        key="RTX-4090", smi_names=("NVIDIA GeForce RTX 4090",), pci_ids=("2684",), memory_gb=24,
        form_factor="PCIe",
    ),
    GpuModel(
        key="RTX-A6000", smi_names=("NVIDIA RTX A6000",), pci_ids=("2230",), memory_gb=48,
        form_factor="PCIe", nvlink_gen=3, nvlink_links=4, bridge_links=4, link_gbps=14.062,
    ),
    GpuModel(key="L40S", smi_names=("NVIDIA L40S",), pci_ids=("26b9",), memory_gb=48,
             form_factor="PCIe"),
    GpuModel(key="L4", smi_names=("NVIDIA L4",), pci_ids=("27b8",), memory_gb=24,
             form_factor="PCIe"),
    GpuModel(key="A10", smi_names=("NVIDIA A10",), pci_ids=("2236",), memory_gb=24,
             form_factor="PCIe"),
    GpuModel(key="T4", smi_names=("Tesla T4",), pci_ids=("1eb8",), memory_gb=16,
             form_factor="PCIe"),
)

GPU_MODELS: dict[str, GpuModel] = {m.key: m for m in _MODELS}

# A spec may name a model the way people write it ("h100-sxm5-80gb", "H100 SXM5 80GB").
def _norm(name: str) -> str:
    return "".join(ch for ch in name.upper() if ch.isalnum())


_BY_NORM: dict[str, GpuModel] = {_norm(m.key): m for m in _MODELS}
_BY_SMI: dict[str, GpuModel] = {n: m for m in _MODELS for n in m.smi_names}
_BY_PCI: dict[str, GpuModel] = {pid: m for m in _MODELS for pid in m.pci_ids}


def gpu_model(name: str) -> GpuModel | None:
    """The model for a spec name (case, spaces and dashes ignored), or None."""
    return _BY_NORM.get(_norm(name))


def model_for_smi_name(smi_name: str) -> GpuModel | None:
    """The model `nvidia-smi` reports as ``smi_name`` (e.g. "NVIDIA H100 80GB HBM3"), or None."""
    return _BY_SMI.get(smi_name.strip())


def model_for_pci_id(device_id: str) -> GpuModel | None:
    """The model with PCI device ID ``device_id`` ("2330", "0x2330" or "10de:2330"), or None."""
    did = device_id.lower().removeprefix("0x").split(":")[-1]
    return _BY_PCI.get(did)


def suggest_models(name: str) -> list[str]:
    """Up to three known model keys close to ``name``, for "did you mean" messages."""
    return get_close_matches(name.upper(), list(GPU_MODELS), n=3, cutoff=0.5)
