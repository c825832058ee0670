"""GPU models: NVLink, NVSwitch, MIG, PCI and driver facts per model.

Every model's entry carries its sources in the comment above it; the general sources are:

- NVLink generation, links per GPU and the per-link rate that `nvidia-smi nvlink --status`
  prints: docs/hardware-reference.md 8.3 [nvlink-wiki] [hwloc-574] [nvl-a100] [ga102] [siboehm],
  and the captures named per model.
- MIG profiles and instance counts: NVIDIA MIG user guide, "Supported MIG profiles" and
  "Supported GPUs" [mig-profiles], and the GPU Operator's default mig-parted ConfigMap
  (NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml) [gpuop-migcm], whose
  per-profile device filters also tie PCI IDs to models (docs/hardware-reference.md 7.1; the
  errors listed in 7.2 are NOT copied).
- PCI device IDs: pci.ids 0.0~2023.04.11 (Debian bookworm's `pci.ids` package) for the IDs it
  names, the ConfigMap's device filters for newer ones.
- Fabric Manager: required on NVSwitch systems only [fm-guide] (docs/hardware-reference.md 1.6);
  NVLink 5 (Blackwell HGX) adds the NVLink Subnet Manager `nvlsm` [canvos-ibumad] [fm-pdf].
- Driver branches: MIG guide "Deployment Considerations" (minimum driver per GPU for MIG);
  NVIDIA driver installation guide "Kernel Modules" (open modules only for Turing and newer;
  Grace Hopper and Blackwell datacenter GPUs only with the open modules); 580 is the last branch
  with Volta support (NVIDIA's legacy list names a 580 legacy branch for Maxwell..Volta, and
  the 620 installation guide ships open kernel modules only, which cannot drive Volta).
- MPS client limit 48 per device on Volta and newer [mps-doc] (docs/hardware-reference.md 7.3);
  the device plugin allows 48 only from compute capability 7.5, 16 below (gpuinfra/spec/sharing.py).

"inferred" marks a value derived from other facts rather than read in a source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile: its name as `nvidia-smi mig -lgip` prints it (without "MIG ").

    media_extensions: the profile owns media engines that exist once per GPU (``+me``,
    ``+me.all``), so at most one such instance fits on a GPU.
    placements: the memory slices where an instance may start (`nvidia-smi mig -lgipp`
        ``Placements: {0,2,4}:2``); it covers ``memory_slices`` slices from there. Empty: not
        known here (the layout is then checked by slice counts only).
    min_branch: the first driver branch that lists the profile, where that is later than the
        model's first MIG branch (0: every MIG-capable branch); an older driver's `-lgip`
        lacks it.
    """

    name: str
    compute_slices: int
    memory_slices: int
    max_instances: int
    media_extensions: bool = False
    placements: tuple[int, ...] = ()
    min_branch: int = 0


@dataclass(frozen=True)
class GpuModel:
    """What the project knows about one GPU model.

    key: the name used in cluster specs (e.g. ``H100-SXM5-80GB``).
    smi_names: names `nvidia-smi` prints for it (``--query-gpu=name``, ``-L``).
    pci_ids: PCI device IDs (lower-case hex, vendor 10de implied).
    nvlink_gen: NVLink generation, 0 when the model has none.
    nvlink_links: NVLink links per GPU (all links of the GPU).
    bridge_links: links a GPU uses towards its bridged peer (NVLink bridge), None if no bridge.
    link_gbytes_per_s: per-link, per-direction rate printed by `nvidia-smi nvlink --status` (GB/s).
    nvswitch: the model is built into NVSwitch baseboards (HGX), where Fabric Manager is needed.
    nvswitch_gpu_counts: GPUs per NVSwitch baseboard.
    direct_all_to_all_counts: GPU counts of baseboards that join every pair directly (no switch).
    nvl_domain_gpu_counts: GPUs per node of a rack-scale NVLink domain (GB200 NVL72 trays).
    fabric_services: services the NVSwitch fabric needs beside Fabric Manager (``nvlsm``).
    mig_slices: (compute, memory) slices of a full GPU; (0, 0) when MIG is not supported.
    mig_profiles: profile name -> MigProfile.
    mig_min_branch: lowest driver branch with MIG on this model (MIG guide).
    min_branch / max_branch: driver branches that can drive the GPU at all (None: no limit).
    open_modules: the GPU runs only with NVIDIA's open kernel modules.
    """

    key: str
    smi_names: tuple[str, ...]
    pci_ids: tuple[str, ...]
    memory_gb: int
    form_factor: str
    nvlink_gen: int = 0
    nvlink_links: int = 0
    bridge_links: int | None = None
    link_gbytes_per_s: float = 0.0
    nvswitch: bool = False
    nvswitch_gpu_counts: tuple[int, ...] = ()
    direct_all_to_all_counts: tuple[int, ...] = ()
    nvl_domain_gpu_counts: tuple[int, ...] = ()
    fabric_services: tuple[str, ...] = ()
    mig_slices: tuple[int, int] = (0, 0)
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)
    mig_min_branch: int = 0
    min_branch: int = 0
    max_branch: int | None = None
    open_modules: bool = False
    mps: bool = True

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink_gen > 0

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)


def _mig(*rows: tuple[Any, ...]) -> dict[str, MigProfile]:
    """Rows ``(name, compute slices, memory slices, max instances[, placements[, branch]])``."""
    return {
        row[0]: MigProfile(row[0], row[1], row[2], row[3], media_extensions="+me" in row[0],
                           placements=tuple(row[4]) if len(row) > 4 else (),
                           min_branch=row[5] if len(row) > 5 else 0)
        for row in rows
    }


# Memory slices are eighths of the GPU's memory (1g 1/8, 1g-large and 2g 2/8, 3g/4g 4/8, 7g 8/8)
# and compute slices sevenths of its SMs [mig-profiles]; the same on Ampere, Hopper and
# Blackwell datacenter GPUs (MIG guide: B200/GB200 tables have the same fractions).
# Placements (start slices on the 8-slice memory axis), as `nvidia-smi mig -lgipp` prints them
# on an H100 80GB HBM3 (profile IDs 19/20/15/14/9/5/0: {0..6}:1, {0..6}:1, {0,2,4,6}:2,
# {0,2,4}:2, {0,4}:4, {0}:4, {0}:8), the same on the H100 NVL in NVIDIA's MIG blog post and on
# A100 in the MIG user guide's placement figure [mig-profiles]; captured on a real H100 80GB
# HBM3, driver 580.159.04: tests/fixtures/device/h100-80gb-hbm3-vm-drv580.159.04/mig-lgipp.txt
# (tests/unit/test_device_captures.py holds this table to it); an earlier posted capture:
# tests/fixtures/mig/h100-80gb-hbm3-mig-lgipp-UNRESOLVED-SOURCE.txt.
# No 1g instance starts on slice 7: 7x 1g fills slices 0-6, and a layout like
# 3g + 2g + 2x 1g fits only with the 3g on slices 4-7.
_PLACE_1, _PLACE_2_1G, _PLACE_2, _PLACE_4, _PLACE_0 = (
    tuple(range(7)), (0, 2, 4, 6), (0, 2, 4), (0, 4), (0,))


# The same slots, names and counts on a real H200 141GB (`-lgip`/`-lgipp`, driver 580.159.04:
# tests/fixtures/device/h200-141gb-vm-drv580.159.04, held by tests/unit/test_device_h200.py).
# UNVERIFIED (knowledge audit 9735030 row 3): these start slots are also used for H200 NVL,
# GH200 96/144GB, H20, B200 and GB200: no `-lgipp` capture of any of them was found (the MIG
# guide gives the same sizes and counts only). A wrong slot is refused at the gate or fails `-cgi`
# on the node (nothing half-made); the first real capture belongs in tests/fixtures/mig.
def _mig_7(g1: str, g1_large: str, g2: str, g3: str, g4: str, g7: str) -> dict[str, MigProfile]:
    return _mig(
        (f"1g.{g1}", 1, 1, 7, _PLACE_1),
        (f"1g.{g1}+me", 1, 1, 1, _PLACE_1),
        (f"1g.{g1_large}", 1, 2, 4, _PLACE_2_1G),
        (f"2g.{g2}", 2, 2, 3, _PLACE_2),
        (f"3g.{g3}", 3, 4, 2, _PLACE_4),
        (f"4g.{g4}", 4, 4, 1, _PLACE_0),
        (f"7g.{g7}", 7, 8, 1, _PLACE_0),
    )


_A100_40 = ("5gb", "10gb", "10gb", "20gb", "20gb", "40gb")
_A100_80 = ("10gb", "20gb", "20gb", "40gb", "40gb", "80gb")
_H100_96 = ("12gb", "24gb", "24gb", "48gb", "48gb", "96gb")
_H200_141 = ("18gb", "35gb", "35gb", "71gb", "71gb", "141gb")
_VOLTA_LAST_BRANCH = 580  # module docstring: 580 is the last branch with Volta
_BLACKWELL_BRANCH = 570  # MIG guide: B200, GB200 R570 (>= 570.133.20)

_MODELS: tuple[GpuModel, ...] = (
    # NVLink 3, 12 links at "25 GB/s": fixture nvidia-smi-nvlink/azure-nd-a100-v4-8x-...;
    # 8-GPU NVSwitch (NV12) and 4-GPU direct (NV4) boards: fixtures nvidia-smi-topo-m/8x-a100-sxm4
    # and alcf-polaris-4x-a100-sxm4 (the Polaris nodes are A100-SXM4-40GB). 20b0: pci.ids.
    GpuModel(
        key="A100-SXM4-40GB", smi_names=("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
        pci_ids=("20b0",), memory_gb=40, form_factor="SXM4",
        nvlink_gen=3, nvlink_links=12, link_gbytes_per_s=25.0,
        nvswitch=True, nvswitch_gpu_counts=(8,), direct_all_to_all_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7(*_A100_40), mig_min_branch=450,
    ),
    # As above; 20b2: pci.ids and fixture lspci/azure-nd96amsr-... "NVIDIA A100-SXM-80GB" is what
    # 80GB SXM systems print too: Dell XE8545 (4x) and Cambridge CSD3 node descriptions, MLCommons
    # SUT descriptions (accelerator_model_name), collected in the knowledge audit.
    GpuModel(
        key="A100-SXM4-80GB",
        smi_names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM-80GB", "A100-SXM4-80GB"),
        pci_ids=("20b2",), memory_gb=80, form_factor="SXM4",
        nvlink_gen=3, nvlink_links=12, link_gbytes_per_s=25.0,
        nvswitch=True, nvswitch_gpu_counts=(8,), direct_all_to_all_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7(*_A100_80), mig_min_branch=450,
    ),
    # Bridged pairs NV12: fixture nvidia-smi-topo-m/4x-a100-80gb-pcie-2-nvlink-bridged-pairs.
    # 20f1 and 20b1 are both "A100 PCIe 40GB" in pci.ids; the ConfigMap's A100-40GB filter lists
    # both (0x20F110DE, 0x20B110DE).
    GpuModel(
        key="A100-PCIE-40GB", smi_names=("NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"),
        pci_ids=("20f1", "20b1"), memory_gb=40, form_factor="PCIe",
        nvlink_gen=3, nvlink_links=12, bridge_links=12, link_gbytes_per_s=25.0,
        mig_slices=(7, 8), mig_profiles=_mig_7(*_A100_40), mig_min_branch=450,
    ),
    GpuModel(
        key="A100-PCIE-80GB", smi_names=("NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"),
        pci_ids=("20b5",), memory_gb=80, form_factor="PCIe",
        nvlink_gen=3, nvlink_links=12, bridge_links=12, link_gbytes_per_s=25.0,
        mig_slices=(7, 8), mig_profiles=_mig_7(*_A100_80), mig_min_branch=450,
    ),
    # A800 (export SKU of A100 SXM4 80GB): NVLink cut from 12 to 8 links, so NV8 on the switch
    # board (guevara/read-it-later#11550 "12 lane 变成 8 lane"; nccl#412); name: a public
    # `nvidia-smi -L` capture "GPU 0: NVIDIA A800-SXM4-80GB"; 20f3 "A800-SXM4-80GB" in pci.ids;
    # MIG as A100-80GB (ConfigMap filter 0x20F310DE in all-1g.10gb / all-balanced).
    GpuModel(
        key="A800-SXM4-80GB", smi_names=("NVIDIA A800-SXM4-80GB",), pci_ids=("20f3",),
        memory_gb=80, form_factor="SXM4",
        nvlink_gen=3, nvlink_links=8, link_gbytes_per_s=25.0,
        nvswitch=True, nvswitch_gpu_counts=(8,),
        mig_slices=(7, 8), mig_profiles=_mig_7(*_A100_80), mig_min_branch=450,
    ),
    # A30 bridge: 200 GB/s bidirectional = 4 NVLink3 links (inferred, spec sheet). MIG: fixture
    # nvidia-smi-mig-lgip/a30-24gb-mig-lgip-all-slices-in-use.txt and the MIG guide's A30 table,
    # which adds 2g.12gb+me ("available starting with R525 drivers"; ConfigMap all-2g.12gb.me:
    # min_branch 525, so the fixture, which lacks it, is held to the table as a pre-R525 driver
    # in tests/unit/test_parse_mig.py); MIG on A30 from R460 (MIG guide "Deployment
    # Considerations").
    GpuModel(
        key="A30", smi_names=("NVIDIA A30",), pci_ids=("20b7",), memory_gb=24, form_factor="PCIe",
        nvlink_gen=3, nvlink_links=4, bridge_links=4, link_gbytes_per_s=25.0,
        mig_slices=(4, 4),
        # Placements: fixture nvidia-smi-mig-lgip/a30-24gb-mig-lgipp-placements.txt (profiles
        # 14, 21, 5, 0: {0,1,2,3}:1, {0,1,2,3}:1, {0,2}:2, {0}:4); 2g.12gb+me as 2g.12gb:
        # UNVERIFIED (knowledge audit 9735030 row 6): 2g.12gb+me's slots are not published.
        mig_profiles=_mig(("1g.6gb", 1, 1, 4, (0, 1, 2, 3)), ("1g.6gb+me", 1, 1, 1, (0, 1, 2, 3)),
                          ("2g.12gb", 2, 2, 2, (0, 2)), ("2g.12gb+me", 2, 2, 1, (0, 2), 525),
                          ("4g.24gb", 4, 4, 1, (0,))),
        mig_min_branch=460,
    ),
    # NVLink 4, 18 links at 26.562: fixtures nvidia-smi-nvlink/h100-sxm-gpu0-...-26.562 and
    # nvidia-smi-topo-m/8x-h100-sxm-nv18; 4-GPU boards NV6 (nccl#1617). MIG: fixture
    # nvidia-smi-mig-lgip/4x-h100-sxm5-80gb-mig-lgip-stackhpc.txt.
    GpuModel(
        key="H100-SXM5-80GB", smi_names=("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"),
        pci_ids=("2330",), memory_gb=80, form_factor="SXM5",
        nvlink_gen=4, nvlink_links=18, link_gbytes_per_s=26.562,
        nvswitch=True, nvswitch_gpu_counts=(8,), direct_all_to_all_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7(*_A100_80), mig_min_branch=525,
    ),
    # 18 link slots; an NVLink bridge set joins a pair over 12 of them (NV12): fixtures
    # nvidia-smi-nvlink/hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt, topo ...-nv12.
    GpuModel(
        key="H100-PCIE-80GB", smi_names=("NVIDIA H100 PCIe",), pci_ids=("2331",), memory_gb=80,
        form_factor="PCIe",
        nvlink_gen=4, nvlink_links=18, bridge_links=12, link_gbytes_per_s=26.562,
        mig_slices=(7, 8), mig_profiles=_mig_7(*_A100_80), mig_min_branch=525,
    ),
    # Bridge NV12 at 26.562: public MLPerf report (2x H100 NVL, NV12, 12 active links);
    # Azure NC80adis_H100_v5 = 2x "NVIDIA H100 NVL"; MIG: ConfigMap "H100 NVL" blocks.
    GpuModel(
        key="H100-NVL-94GB", smi_names=("NVIDIA H100 NVL",), pci_ids=("2321",), memory_gb=94,
        form_factor="PCIe",
        nvlink_gen=4, nvlink_links=18, bridge_links=12, link_gbytes_per_s=26.562,
        mig_slices=(7, 8), mig_profiles=_mig_7("12gb", "24gb", "24gb", "47gb", "47gb", "94gb"),
        mig_min_branch=525,
    ),
    # H800 (export SKU of H100 SXM5): a public 8x H800 capture (liguodongiot/llm-action
    # nvidia-smi notes) shows `topo -m` NV8 on every pair and `nvlink --status` 8 links at
    # 26.562 per GPU; -q of the same node: Product Name "NVIDIA H800", GPU Part Number 2324-...;
    # 2324 "H800" in pci.ids; MIG as H100-80GB (ConfigMap filter 0x232410DE).
    GpuModel(
        key="H800-SXM5-80GB", smi_names=("NVIDIA H800",), pci_ids=("2324",), memory_gb=80,
        form_factor="SXM5",
        nvlink_gen=4, nvlink_links=8, link_gbytes_per_s=26.562,
        nvswitch=True, nvswitch_gpu_counts=(8,),
        mig_slices=(7, 8), mig_profiles=_mig_7(*_A100_80), mig_min_branch=525,
    ),
    # H20: NVLink 4, 900 GB/s (deepseek-ai/DeepEP#16) = 18 links; HGX H20 8-GPU (nccl-tests#367,
    # 8 GPUs and 8 NICs per node). 26.562 inferred (same NVLink 4 PHY as H100). Name and MIG
    # 3g.48gb: public `nvidia-smi -L` captures; ConfigMap balanced filter 0x232910DE
    # (1g.12gb/2g.24gb/3g.48gb, the H100-96GB names); MIG guide: H20 96GB, R535 (>= 535.161.07).
    GpuModel(
        key="H20-96GB", smi_names=("NVIDIA H20",), pci_ids=("2329",), memory_gb=96,
        form_factor="SXM5",
        nvlink_gen=4, nvlink_links=18, link_gbytes_per_s=26.562,
        nvswitch=True, nvswitch_gpu_counts=(8,),
        mig_slices=(7, 8), mig_profiles=_mig_7(*_H100_96), mig_min_branch=535,
    ),
    # H200 141GB: 18 NVLink 4 links (HGX H200 spec, nccl-tests#272); the per-link 26.562 is
    # inferred (same PHY as H100; no H200 `nvlink -s` capture exists). Name: fixture
    # nvidia-smi-query-gpu/h200-8gpu-...; MIG: ConfigMap filter 0x2335; MIG guide: R550 minimum.
    # Name, PCI ID 2335, 143771 MiB and the MIG profiles seen on a real one: tests/fixtures/
    # device/h200-141gb-vm-drv580.159.04 (its NVLink was not: one GPU without its board).
    GpuModel(
        key="H200-SXM-141GB", smi_names=("NVIDIA H200",), pci_ids=("2335",), memory_gb=141,
        form_factor="SXM5",
        nvlink_gen=4, nvlink_links=18, link_gbytes_per_s=26.562,
        nvswitch=True, nvswitch_gpu_counts=(8,), direct_all_to_all_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7(*_H200_141), mig_min_branch=550,
    ),
    # H200 NVL (PCIe card): NVIDIA's product brief, "2- or 4-way NVLink bridge, 900 GB/s" per GPU:
    # a 2-way bridge gives its peer all 18 links (NV18), the 4-way bridge splits them over three
    # peers (NV6 each; the fixed-mesh board in topology.py) - both inferred from the 900 GB/s,
    # no topo capture found. Name: public job logs "GPU 0: NVIDIA H200 NVL"; 233b and MIG as
    # H200 141GB: ConfigMap filter "H200 141GB, H200 NVL" (0x233510DE, 0x233B10DE).
    GpuModel(
        key="H200-NVL-141GB", smi_names=("NVIDIA H200 NVL",), pci_ids=("233b",), memory_gb=141,
        form_factor="PCIe",
        nvlink_gen=4, nvlink_links=18, bridge_links=18, link_gbytes_per_s=26.562,
        mig_slices=(7, 8), mig_profiles=_mig_7(*_H200_141), mig_min_branch=550,
    ),
    # GH200 (Grace Hopper, 96GB HBM3): names from public `nvidia-smi -L` / PyTorch env reports
    # ("NVIDIA GH200 480GB", "NVIDIA GH200 120GB", with MIG 1g.12gb); 2342 "GH200 120GB / 480GB"
    # and MIG as H100-96GB: ConfigMap balanced filter (0x234210DE); open modules only.
    GpuModel(
        key="GH200-96GB", smi_names=("NVIDIA GH200 480GB", "NVIDIA GH200 120GB"),
        pci_ids=("2342",), memory_gb=96, form_factor="Superchip",
        nvlink_gen=4, nvlink_links=18, link_gbytes_per_s=26.562,
        mig_slices=(7, 8), mig_profiles=_mig_7(*_H100_96), mig_min_branch=525,
        open_modules=True,
    ),
    # GH200 144G HBM3e: name from public reports and CUDA device names "NVIDIA GH200 144G HBM3e";
    # 2348 and MIG 1g.18gb..7g.144gb: ConfigMap ("GH200 144G HBM3e", filter 0x234810DE).
    GpuModel(
        key="GH200-144GB", smi_names=("NVIDIA GH200 144G HBM3e",), pci_ids=("2348",),
        memory_gb=144, form_factor="Superchip",
        nvlink_gen=4, nvlink_links=18, link_gbytes_per_s=26.562,
        mig_slices=(7, 8), mig_profiles=_mig_7("18gb", "36gb", "36gb", "72gb", "72gb", "144gb"),
        mig_min_branch=525, open_modules=True,
    ),
    # B200 (HGX B200 8-GPU): NVLink 5, 18 links, 1.8 TB/s per GPU; per-link print 53.125 as on GB200
    # (inferred: same NVLink 5; UNVERIFIED (knowledge audit 9735030 row 29): no B200 `nvlink -s`
    # capture found). NVSwitch board needing Fabric Manager plus the NVLink Subnet Manager (nvlsm)
    # and ib_umad (docs/hardware-reference.md 1.6). Name: GKE `nvidia-smi -L` capture "GPU 0: NVIDIA
    # B200"; 2901 and MIG: ConfigMap (filter 0x290110DE, 1g.23gb/2g.45gb/3g.90gb, all-7g.180gb); MIG
    # guide: B200 180GB, R570 (>= 570.133.20).
    GpuModel(
        key="B200-180GB", smi_names=("NVIDIA B200",), pci_ids=("2901",), memory_gb=180,
        form_factor="SXM6",
        nvlink_gen=5, nvlink_links=18, link_gbytes_per_s=53.125,
        nvswitch=True, nvswitch_gpu_counts=(8,), fabric_services=("nvlsm",),
        mig_slices=(7, 8), mig_profiles=_mig_7("23gb", "45gb", "45gb", "90gb", "90gb", "180gb"),
        mig_min_branch=_BLACKWELL_BRANCH, min_branch=_BLACKWELL_BRANCH, open_modules=True,
    ),
    # GB200 (NVL72 compute tray: 4 GPUs per node, fixture lspci/gb200-compute-tray-... shows four
    # "Device 2941"; Azure nd128isr_ndr_gb200_v6 check_gpu_count 4): 18 NVLink 5 links at
    # 53.125 (NVIDIA/k8s-test-infra#371 `nvlink -s`; GoogleCloudPlatform/cluster-toolkit#5942).
    # The NVLink domain spans the rack (topology "nvlink-domain"). Name: public `nvidia-smi -L`
    # captures "NVIDIA GB200" (driver 580.159.03); MIG: ConfigMap (0x294110DE: 1g.23gb/2g.47gb/
    # 3g.93gb, all-7g.186gb); MIG guide: GB200 186GB, R570.
    GpuModel(
        key="GB200-186GB", smi_names=("NVIDIA GB200",), pci_ids=("2941",), memory_gb=186,
        form_factor="Superchip",
        nvlink_gen=5, nvlink_links=18, link_gbytes_per_s=53.125, nvl_domain_gpu_counts=(4,),
        mig_slices=(7, 8), mig_profiles=_mig_7("23gb", "47gb", "47gb", "93gb", "93gb", "186gb"),
        mig_min_branch=_BLACKWELL_BRANCH, min_branch=_BLACKWELL_BRANCH, open_modules=True,
    ),
    # V100 SXM2: NVLink 2, 6 links at 25.781; no NVSwitch: the DGX-1 / AWS p3 / Azure NDv2
    # hybrid cube-mesh (fixed-mesh board in topology.py). Captures: a DGX-1-class 8x
    # V100-SXM2-32GB `nvlink -s` and `topo -m` (tests/fixtures/boards), Microway's DGX-1
    # output, fixture nvidia-smi-topo-m/aws-p3.8xlarge-4x-v100-sxm2-nv1-nv2.txt. 1db1 and 1df5
    # are both "Tesla V100 SXM2 16GB" in pci.ids (the Linux vfio nvlink2gpu table lists both).
    GpuModel(
        key="V100-SXM2-16GB", smi_names=("Tesla V100-SXM2-16GB",), pci_ids=("1db1", "1df5"),
        memory_gb=16, form_factor="SXM2", nvlink_gen=2, nvlink_links=6, link_gbytes_per_s=25.781,
        max_branch=_VOLTA_LAST_BRANCH,
    ),
    GpuModel(
        key="V100-SXM2-32GB", smi_names=("Tesla V100-SXM2-32GB",), pci_ids=("1db5",),
        memory_gb=32, form_factor="SXM2", nvlink_gen=2, nvlink_links=6, link_gbytes_per_s=25.781,
        max_branch=_VOLTA_LAST_BRANCH,
    ),
    # V100 SXM3 (DGX-2 / HGX-2): 16 GPUs on 12 NVSwitches, NV6 on every pair
    # (NVIDIA/nccl-tests#78 16-GPU matrix); Fabric Manager required (docs/hardware-reference.md
    # 1.6: HGX-2). 1db8 "Tesla V100 SXM3 32GB" in pci.ids; name from public reports (PyTorch
    # environment dumps "GPU 0: Tesla V100-SXM3-32GB"). 25.781 inferred (same NVLink 2).
    GpuModel(
        key="V100-SXM3-32GB", smi_names=("Tesla V100-SXM3-32GB",), pci_ids=("1db8",),
        memory_gb=32, form_factor="SXM3", nvlink_gen=2, nvlink_links=6, link_gbytes_per_s=25.781,
        nvswitch=True, nvswitch_gpu_counts=(16,), max_branch=_VOLTA_LAST_BRANCH,
    ),
    # V100 PCIe: no NVLink. 1db6 "Tesla V100 PCIe 32GB" (pci.ids; Microway's `nvidia-smi -q`:
    # Device Id 0x1DB610DE, Product Name "Tesla V100-PCIE-32GB"; fixture
    # tests/fixtures/nccl/1node-4x-v100-pcie-32gb-...). 1db4 16GB: pci.ids; its name is inferred
    # from the 32GB one. 1df6 "Tesla V100S PCIe 32GB" (pci.ids; name inferred).
    GpuModel(
        key="V100-PCIE-32GB", smi_names=("Tesla V100-PCIE-32GB",), pci_ids=("1db6",),
        memory_gb=32, form_factor="PCIe", max_branch=_VOLTA_LAST_BRANCH,
    ),
    GpuModel(
        key="V100-PCIE-16GB", smi_names=("Tesla V100-PCIE-16GB",), pci_ids=("1db4",),
        memory_gb=16, form_factor="PCIe", max_branch=_VOLTA_LAST_BRANCH,
    ),
    GpuModel(
        key="V100S-PCIE-32GB", smi_names=("Tesla V100S-PCIE-32GB",), pci_ids=("1df6",),
        memory_gb=32, form_factor="PCIe", max_branch=_VOLTA_LAST_BRANCH,
    ),
    # GA102 bridge: 4 links at 14.062 (GA102 whitepaper; siboehm's A6000 capture).
    GpuModel(
        key="RTX-3090", smi_names=("NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
        pci_ids=("2204",), memory_gb=24, form_factor="PCIe",
        nvlink_gen=3, nvlink_links=4, bridge_links=4, link_gbytes_per_s=14.062,
    ),
    GpuModel(
        key="RTX-4090", smi_names=("NVIDIA GeForce RTX 4090",), pci_ids=("2684",), memory_gb=24,
        form_factor="PCIe",
    ),
    GpuModel(
        key="RTX-A6000", smi_names=("NVIDIA RTX A6000",), pci_ids=("2230",), memory_gb=48,
        form_factor="PCIe", nvlink_gen=3, nvlink_links=4, bridge_links=4, link_gbytes_per_s=14.062,
    ),
    # Ada Lovelace: no NVLink, no MIG (MIG guide "Supported GPUs" lists none). 26b1
    # "L6000 / RTX 6000 Ada Generation" and 26b5 "L40" in pci.ids; names from public
    # `nvidia-smi -L` captures.
    GpuModel(
        key="RTX-6000-ADA", smi_names=("NVIDIA RTX 6000 Ada Generation",), pci_ids=("26b1",),
        memory_gb=48, form_factor="PCIe",
    ),
    GpuModel(key="L40", smi_names=("NVIDIA L40",), pci_ids=("26b5",), memory_gb=48,
             form_factor="PCIe"),
    GpuModel(key="L40S", smi_names=("NVIDIA L40S",), pci_ids=("26b9",), memory_gb=48,
             form_factor="PCIe"),
    # RTX PRO 6000 Blackwell Server Edition: no NVLink; MIG with up to 4 instances (MIG guide
    # "Supported GPUs": 96GB, 4), profiles 1g.24gb x4, 2g.48gb x2, 4g.96gb and their +gfx,
    # +me.all and -me variants (ConfigMap "RTX-PRO-6000-96GB" blocks; balanced filter
    # 0x2BB510DE), and 1g.24gb+me x1 (MIG guide "RTX PRO 6000 Blackwell MIG Profiles": "MIG
    # 1g.24gb+me ... 1"; NVIDIA/mig-parted's RTX-PRO-6000 test profiles: all-1g.24gb.me =
    # "1g.24gb+me": 1; knowledge audit 9735030 row 15); memory and compute in quarters.
    # Name: public `nvidia-smi` queries (97887 MiB, drivers 580/595). MIG guide: R575
    # (>= 575.51.03); Blackwell: open modules only.
    GpuModel(
        key="RTX-PRO-6000-BSE", smi_names=("NVIDIA RTX PRO 6000 Blackwell Server Edition",),
        pci_ids=("2bb5",), memory_gb=96, form_factor="PCIe",
        mig_slices=(4, 4),
        mig_profiles=_mig(("1g.24gb", 1, 1, 4), ("1g.24gb+gfx", 1, 1, 4), ("1g.24gb-me", 1, 1, 4),
                          ("1g.24gb+me", 1, 1, 1), ("1g.24gb+me.all", 1, 1, 1),
                          ("2g.48gb", 2, 2, 2),
                          ("2g.48gb+gfx", 2, 2, 2), ("2g.48gb-me", 2, 2, 2),
                          ("2g.48gb+me.all", 2, 2, 1), ("4g.96gb", 4, 4, 1),
                          ("4g.96gb+gfx", 4, 4, 1)),
        mig_min_branch=575, min_branch=575, open_modules=True,
    ),
    GpuModel(key="L4", smi_names=("NVIDIA L4",), pci_ids=("27b8",), memory_gb=24,
             form_factor="PCIe"),
    GpuModel(key="A10", smi_names=("NVIDIA A10",), pci_ids=("2236",), memory_gb=24,
             form_factor="PCIe"),
    GpuModel(key="T4", smi_names=("Tesla T4",), pci_ids=("1eb8",), memory_gb=16,
             form_factor="PCIe"),
)

GPU_MODELS: dict[str, GpuModel] = {m.key: m for m in _MODELS}

# Models of the Ampere generation or older (Volta V100 7.0, Turing T4 7.5, Ampere A100/A800/
# A30/A10/RTX A6000/RTX 3090 8.0-8.6: NVIDIA's "CUDA GPUs - Compute Capability" table; Ada,
# Hopper and Blackwell are newer). DCGM's profiling metrics (DCGM_FI_PROF_*, the dashboard's
# tensor-activity panel) need the datacenter-gpu-manager-4-proprietary package on them:
# dcgm-exporter README (NVIDIA/dcgm-exporter @d5e5f51, "Profiling Metrics"): "for Ampere and
# earlier generation GPUs, profiling metrics depend on the datacenter-gpu-manager-4-proprietary
# package" (knowledge audit 9735030 row 94).
AMPERE_OR_OLDER: frozenset[str] = frozenset(
    key for key in GPU_MODELS
    if key.startswith(("A100", "A800", "A30", "A10", "V100", "T4", "RTX-A6000", "RTX-3090")))


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


def branch_problem(model: GpuModel, branch: int) -> str | None:
    """Why driver ``branch`` cannot drive ``model``, or None when it can."""
    if model.min_branch and branch < model.min_branch:
        return (f"{model.key} needs driver branch {model.min_branch} or newer (the first branch "
                f"that drives it), not {branch}")
    if model.max_branch is not None and branch > model.max_branch:
        return (f"{model.key} (Volta) is driven by branches up to {model.max_branch} only: "
                f"later branches dropped it, so {branch} cannot drive it")
    return None
