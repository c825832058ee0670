"""NCCL all-reduce expectations: the minimum bus bandwidth a healthy system reaches.

What is compared: ``busbw`` (GB/s) that nccl-tests' ``all_reduce_perf`` prints for the largest
message size of the sweep (the generated sbatch script sweeps 8 B .. 8 GiB, ``-e 8G``), averaged
over the out-of-place and in-place columns (Azure's check reads the average of the two as well).
At 8 GiB busbw has reached its plateau on every system below: it is still rising at 256 MiB
(nccl-tests#212) and 512 MiB (nccl-tests#149), and changes by a few percent between 4 and 16 GiB.

Why per topology profile: a fixed number misfires when the topology differs (docs/field.md: Azure's
fixed NVLink rule fails H100 PCIe bridged pairs every time). So each (profile, GPU model, GPUs per
node) has its own floor, and each value says where it comes from:

- ``nvswitch-all-to-all``: Azure HPC health checks, ``check_nccl_allreduce`` in
  conf/<VM size>.conf (github.com/Azure/azurehpc-health-checks): H100 460 GB/s
  (nd96isr_h100_v5, 16G messages), H200 431 GB/s (nd96isr_h200_v5, 16G), A100 80GB 228 GB/s
  (nd96amsr_a100_v4, 4G), A100 40GB 228 GB/s (nd96asr_v4, 8G). Healthy 8-GPU nodes reach
  ~480 GB/s on H100/H200 (NVLink SHARP, nccl-tests#212 and #272) and ~230 GB/s on A100
  (nccl-tests#149; fixture 8x-a100-sxm4-80gb-single-node-g8.txt reaches 232 GB/s).
- ``direct-all-to-all`` (4-GPU baseboards, no NVSwitch, so no NVLink SHARP): inferred, the
  GPU's NVLink line rate (links x per-link GB/s, gpus.py) x 0.70. NCCL's effective NVLink rate is
  ~80 % of line rate (sjeaugey in nccl-tests#149 and #212); 0.70 leaves ~10 % below that. No
  public 4-GPU measurement was found.
- ``bridged-pairs`` with 2 GPUs (one pair, NVLink-bound): Azure nc48ads_a100_v4 (2x A100 PCIe
  80GB on a bridge) 193 GB/s at 16G, i.e. 0.64 of the pair's 300 GB/s line rate; other bridged
  models use bridge links x per-link rate x 0.64 (inferred), except H100 PCIe/NVL (see below).
- ``bridged-pairs`` with 4 or more GPUs: the all-reduce ring must cross PCIe between pairs, so
  PCIe bounds it: Azure nc96ads_a100_v4 (4x A100 PCIe, two bridged pairs) 25 GB/s at 8G, i.e.
  0.79 of PCIe Gen4 x16 (31.5 GB/s per direction); other models use their PCIe generation x 0.79.
- ``pcie-only``: the profile does not require P2P (consumer cards report NS), so traffic may be
  staged through host memory: floor 0.20 x PCIe x16 rate (inferred; the fixture
  2x-rtx2080ti-pcie-no-p2p reaches 4.0 GB/s = 0.25 of PCIe Gen3 x16 without P2P).
- Between nodes: the job's busbw cannot exceed the per-node network rate (ring all-reduce
  moves busbw through each node's NICs), so the floor is min(intra-node floor, number of RDMA
  NICs x per-NIC Gb/s / 8 x 0.85). NCCL peaks at ~24 GB/s per 200 Gb/s NIC, 96 % of line rate
  (sjeaugey in nccl-tests#119); 0.85 leaves ~10 % below that (inferred).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.gpus import GpuModel
from gpuinfra.knowledge.lookup import require_model, require_profile
from gpuinfra.knowledge.topology import TopologyProfile, gpu_count_problem

SWEEP_MAX_BYTES = 8 * 1024**3  # -e 8G: the message size the floors apply to
PLATEAU_MIN_BYTES = 1024**3  # below 1 GiB busbw is still rising: too small to judge bandwidth

DIRECT_MESH_EFFICIENCY = 0.70  # of NVLink line rate, inferred (module docstring)
BRIDGE_EFFICIENCY = 0.64  # Azure nc48ads_a100_v4: 193 of 300 GB/s
PCIE_P2P_EFFICIENCY = 0.79  # Azure nc96ads_a100_v4: 25 of 31.5 GB/s (PCIe Gen4 x16)
PCIE_NO_P2P_EFFICIENCY = 0.20  # floor when P2P may be off (inferred, AutoDL fixture 0.25)
NET_EFFICIENCY = 0.85  # of the NICs' line rate (nccl-tests#119: NCCL peaks at 0.96)

# PCIe x16 rate per direction in GB/s, after 128b/130b encoding (Gen3 8 GT/s, Gen4 16, Gen5 32).
PCIE_X16_GBPS: dict[int, float] = {3: 15.75, 4: 31.5, 5: 63.0}

# PCIe generation of each model's host link (all x16). NVIDIA data sheets (inferred: not in
# docs/hardware-reference.md); tests/unit/test_nccl.py checks every model of gpus.py is listed.
PCIE_GEN: dict[str, int] = {
    "A100-SXM4-40GB": 4, "A100-SXM4-80GB": 4, "A100-PCIE-40GB": 4, "A100-PCIE-80GB": 4,
    "A30": 4, "H100-SXM5-80GB": 5, "H100-PCIE-80GB": 5, "H100-NVL-94GB": 5,
    "H200-SXM-141GB": 5, "V100-SXM2-16GB": 3, "V100-SXM2-32GB": 3, "RTX-3090": 4,
    "RTX-4090": 4, "RTX-A6000": 4, "L40S": 4, "L4": 4, "A10": 4, "T4": 3,
}

# GeForce cards: the driver refuses P2P over PCIe (topo -p2p fixture autodl-2x-rtx2080ti: NS),
# so between bridged pairs NCCL stages through host memory.
NO_PCIE_P2P: frozenset[str] = frozenset({"RTX-3090", "RTX-4090"})

# Measured floors: (profile, model, GPUs per node) -> (GB/s, source).
_AZ = "Azure HPC health checks conf/"
MEASURED: dict[tuple[str, str, int], tuple[float, str]] = {
    ("nvswitch-all-to-all", "H100-SXM5-80GB", 8): (460.0, _AZ + "nd96isr_h100_v5.conf"),
    ("nvswitch-all-to-all", "H200-SXM-141GB", 8): (431.0, _AZ + "nd96isr_h200_v5.conf"),
    ("nvswitch-all-to-all", "A100-SXM4-80GB", 8): (228.0, _AZ + "nd96amsr_a100_v4.conf"),
    ("nvswitch-all-to-all", "A100-SXM4-40GB", 8): (228.0, _AZ + "nd96asr_v4.conf"),
    ("bridged-pairs", "A100-PCIE-80GB", 2): (193.0, _AZ + "nc48ads_a100_v4.conf"),
    ("bridged-pairs", "A100-PCIE-40GB", 2): (
        193.0, "inferred from " + _AZ + "nc48ads_a100_v4.conf (the 80GB SKU, same bridge)"),
    ("bridged-pairs", "A100-PCIE-80GB", 4): (25.0, _AZ + "nc96ads_a100_v4.conf"),
    # H100 PCIe/NVL pairs: the link count suggests ~204 GB/s, but the only public measurement
    # (a 2x H100 PCIe NVLink pair, nccl#1161 / nccl-tests#194) reads 116 GB/s and was not shown
    # to be faulty; a floor above it could fail healthy nodes, so take ~85 % of it.
    ("bridged-pairs", "H100-PCIE-80GB", 2): (
        100.0, "inferred from nccl#1161 (116 GB/s on a 2x H100 PCIe NVLink pair)"),
    ("bridged-pairs", "H100-NVL-94GB", 2): (
        100.0, "inferred from nccl#1161 (116 GB/s on a 2x H100 PCIe NVLink pair)"),
}


class NcclThresholdError(GpuinfraError):
    """No all-reduce floor can be given for what was asked; the message names the fix."""


@dataclass(frozen=True)
class BusbwThreshold:
    """The all-reduce floor for one run, and the facts it was computed from.

    min_busbw: GB/s busbw at the largest size must reach. bound: "intra-node" (NVLink/PCIe inside
    a node), "network" (the NICs between nodes) or "explicit" (given by the operator).
    network: "none" (one node), "rdma" or "socket" (multi-node without RDMA NICs).
    """

    min_busbw: float
    bound: str
    source: str
    nodes: int
    gpus_per_node: int
    profile: str
    model: str
    network: str = "none"
    nics: int = 0
    nic_gbps: float | None = None

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node


def node_min_busbw(profile: str, model_key: str, gpu_count: int) -> tuple[float, str]:
    """(floor in GB/s, source) for ``gpu_count`` GPUs of one node; raises NcclThresholdError."""
    prof, model = _profile(profile), _model(model_key)
    if gpu_count < 2:
        raise NcclThresholdError(
            f"gpu_count = {gpu_count}: all-reduce inside one node needs at least 2 GPUs "
            "(busbw of a single rank is 0); run across nodes, or check a node with more GPUs")
    problem = gpu_count_problem(prof, model, gpu_count)
    if problem is not None:
        raise NcclThresholdError(
            f"gpu_topology = {prof.name!r} with {gpu_count}x {model.key}: {problem}; fix "
            "gpu_model/gpu_count/gpu_topology in the spec, or give the floor with --min-busbw")
    measured = MEASURED.get((prof.name, model.key, gpu_count))
    if measured is not None:
        return measured
    return _derived(prof, model, gpu_count)


def _derived(prof: TopologyProfile, model: GpuModel, gpu_count: int) -> tuple[float, str]:
    """Floors computed from link counts and rates (module docstring), for unmeasured combos."""
    if prof.needs_nvswitch:
        raise NcclThresholdError(
            f"no measured NVSwitch floor for {model.key}: add one to MEASURED in "
            "gpuinfra/knowledge/nccl.py with its source, or give it with --min-busbw")
    if prof.needs_direct_mesh:
        line = model.nvlink_links * model.link_gbps
        return (round(line * DIRECT_MESH_EFFICIENCY, 1),
                f"inferred: {model.nvlink_links} NVLinks x {model.link_gbps:g} GB/s x "
                f"{DIRECT_MESH_EFFICIENCY}")
    if prof.needs_bridge and gpu_count == 2:
        links = model.bridge_links or 0
        return (round(links * model.link_gbps * BRIDGE_EFFICIENCY, 1),
                f"inferred: {links} bridge links x {model.link_gbps:g} GB/s x "
                f"{BRIDGE_EFFICIENCY} (Azure nc48ads_a100_v4 ratio)")
    if prof.needs_bridge and model.key not in NO_PCIE_P2P:
        return _pcie(model, PCIE_P2P_EFFICIENCY, "PCIe between the bridged pairs")
    return _pcie(model, PCIE_NO_P2P_EFFICIENCY, "PCIe, P2P not required")


def _pcie(model: GpuModel, efficiency: float, why: str) -> tuple[float, str]:
    gen = PCIE_GEN[model.key]
    return (round(PCIE_X16_GBPS[gen] * efficiency, 1),
            f"inferred: {why}: Gen{gen} x16 {PCIE_X16_GBPS[gen]:g} GB/s x {efficiency}")


def network_busbw(nics: int, nic_gbps: float) -> float:
    """The per-node network floor (GB/s): NICs x Gb/s / 8 x NET_EFFICIENCY."""
    return round(nics * nic_gbps / 8 * NET_EFFICIENCY, 1)


def min_busbw(
    profile: str,
    model_key: str,
    gpus_per_node: int,
    nodes: int = 1,
    nics: int = 0,
    nic_gbps: float | None = None,
    explicit: float | None = None,
) -> BusbwThreshold:
    """The floor for ``nodes`` nodes of ``gpus_per_node`` GPUs each.

    nics: RDMA NICs per node (the spec's rdma_nics); nic_gbps: their rate, required when several
    nodes have NICs (there is no safe default: 100 to 400 Gb/s are all common). explicit: a floor
    the operator gives (--min-busbw); required between nodes without RDMA NICs.
    """
    prof, model = _profile(profile), _model(model_key)
    if nodes < 1 or gpus_per_node < 1:
        raise NcclThresholdError("nodes and GPUs per node must be at least 1")
    network = "none" if nodes == 1 else ("rdma" if nics else "socket")
    base = BusbwThreshold(0.0, "explicit", "", nodes, gpus_per_node, prof.name, model.key,
                          network, nics, nic_gbps)
    if explicit is not None:
        if explicit <= 0:
            raise NcclThresholdError(f"--min-busbw = {explicit:g}: must be a positive GB/s")
        return _with(base, explicit, "explicit", f"given with --min-busbw {explicit:g}")
    if nodes == 1:
        floor, source = node_min_busbw(prof.name, model.key, gpus_per_node)
        return _with(base, floor, "intra-node", source)
    return _multi_node(base, nics, nic_gbps)


def _multi_node(base: BusbwThreshold, nics: int, nic_gbps: float | None) -> BusbwThreshold:
    """min(intra-node floor, network floor) for a run across nodes."""
    if not nics:
        raise NcclThresholdError(
            f"{base.nodes} nodes without rdma_nics: NCCL will fall back to TCP sockets "
            "(NET/Socket) between them, whose speed the spec does not describe; give the floor "
            "with --min-busbw GB/s (e.g. 85 % of the Ethernet rate / 8), or add rdma_nics to "
            "the nodes in the inventory")
    if nic_gbps is None or nic_gbps <= 0:
        raise NcclThresholdError(
            f"--nic-gbps is required: the nodes have {nics} RDMA NIC(s) each, and the "
            "floor between nodes is NICs x Gb/s (e.g. --nic-gbps 400 for NDR, 200 for HDR; "
            "`ibstat` shows Rate)")
    net = network_busbw(nics, nic_gbps)
    net_source = f"network: {nics} NIC(s) x {nic_gbps:g} Gb/s / 8 x {NET_EFFICIENCY}"
    if base.gpus_per_node == 1:
        return _with(base, net, "network", net_source)
    intra, intra_source = node_min_busbw(base.profile, base.model, base.gpus_per_node)
    if intra <= net:
        return _with(base, intra, "intra-node",
                     f"intra-node {intra:g} ({intra_source}) <= {net_source} = {net:g}")
    return _with(base, net, "network", f"{net_source} = {net:g} < intra-node {intra:g} "
                 f"({intra_source})")


def _with(base: BusbwThreshold, floor: float, bound: str, source: str) -> BusbwThreshold:
    return BusbwThreshold(floor, bound, source, base.nodes, base.gpus_per_node, base.profile,
                          base.model, base.network, base.nics, base.nic_gbps)


def _profile(name: str) -> TopologyProfile:
    return require_profile(name, NcclThresholdError)


def _model(key: str) -> GpuModel:
    return require_model(key, NcclThresholdError)
