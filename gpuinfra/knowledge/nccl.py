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
  (nd96amsr_a100_v4, 16G: the line has said 16G since it was added), A100 40GB 228 GB/s
  (nd96asr_v4, 8G). Healthy 8-GPU nodes reach ~480 GB/s on H100/H200 and ~230 GB/s on A100
  (nccl-tests#149; fixture 8x-a100-sxm4-80gb-single-node-g8.txt reaches 232 GB/s).
- NVLink SHARP: the H100/H200 floors hold only while NCCL uses NVLink SHARP (NVLS, NCCL >= 2.17
  on NVSwitch with multicast): ~480 GB/s with it, ~370 GB/s without (sjeaugey in nccl-tests#212:
  "NCCL_ALGO=RING" reaches the effective NVLink rate of 370; nccl-tests#309 measured 368.76 with
  NVLS disabled; nccl#2140 370 -> 480). Those floors name the condition and carry a ring floor,
  used when the log shows NVLS off (``NCCL_NVLS_ENABLE=0``, "NVLS multicast support is not
  available").
- ``direct-all-to-all`` (4-GPU baseboards, no NVSwitch, so no NVLink SHARP): inferred, the
  GPU's NVLink line rate (links x per-link GB/s, gpus.py) x 0.70. NCCL's effective NVLink rate is
  ~80 % of line rate (sjeaugey in nccl-tests#149 and #212); 0.70 leaves ~10 % below that. No
  public 4-GPU measurement was found.
- ``fixed-mesh``: measured only (Azure nd40rs_v2, 8x V100 SXM2 on the DGX-1 hybrid cube-mesh:
  ``check_nccl_allreduce 110.0 1 8G``); other meshes have no floor until one is measured.
- ``bridged-pairs`` with 2 GPUs (one pair, NVLink-bound): Azure nc48ads_a100_v4 (2x A100 PCIe
  80GB on a bridge) 193 GB/s at 16G, i.e. 0.64 of the pair's 300 GB/s line rate; Azure
  nc80adis_h100_v5 (2x H100 NVL on their NV12 bridge) 208 GB/s at 16G; other bridged models use
  bridge links x per-link rate x 0.64 (inferred).
- ``bridged-pairs`` with 4 or more GPUs: the all-reduce ring must cross PCIe between pairs, so
  PCIe bounds it: Azure nc96ads_a100_v4 (4x A100 PCIe, two bridged pairs) 25 GB/s at 8G, i.e.
  0.79 of PCIe Gen4 x16 (31.5 GB/s per direction); other models use their PCIe generation x 0.79.
- ``nvlink-domain``: Azure nd128isr_ndr_gb200_v6 (4x GB200 per node) 432 GB/s at 16G.
- ``pcie-only``: the profile does not require P2P (consumer cards report NS), so traffic may be
  staged through host memory: floor 0.20 x PCIe x16 rate (inferred; the fixture
  2x-rtx2080ti-pcie-no-p2p reaches 4.0 GB/s = 0.25 of PCIe Gen3 x16 without P2P).
- Between nodes: busbw is NOT bounded by the nodes' NIC rate. NVLS and tree all-reduce reduce
  inside each node first and send 1/GPUs-per-node of the data over the wire, so busbw exceeds
  the NICs' rate: fixture 2node-16x-h100-...-a3mega-tcpxo reaches 338.8 GB/s on 8 x 200 Gb/s
  = 200 GB/s of NICs per node, nccl-tests#309 470 GB/s on 8 x 400 Gb/s, nccl-tests#153 161 GB/s
  on 8 x 100 Gb/s. So floors between nodes come from measurements of the same fabric (GPU model,
  GPUs and NICs per node, NIC rate, node count: busbw falls as nodes are added, nccl-tests#309
  365.84 on 4 nodes), each 10 % below the lowest public measurement (:data:`NETWORK_MEASURED`).
  Only with one GPU per node, where nothing is reduced inside the node, is the NICs' rate the
  bound: NCCL peaks at ~24 GB/s per 200 Gb/s NIC, 96 % of line rate (sjeaugey in
  nccl-tests#119); the floor is 0.85 of it (inferred).
- Between nodes of a fabric nobody has measured in public: a conservative floor DERIVED from
  the NICs, said so in every verdict, with the measured runs of similar fabrics beside it. The
  NICs do not bound busbw from above (above), but they do from below: ring all-reduce, NCCL's
  fallback when NVLS and tree are off, crosses each node boundary once per ring, and its rings
  share the node's NICs, so a healthy fabric's busbw is at least about the NICs' aggregate rate.
  Every public multi-node run of 8-GPU nodes here reaches 0.80 to 1.69 of it (nccl#1221 320
  GB/s on 4 nodes of 8 x 400 Gb/s = 400 GB/s, the lowest; the A3 Mega fixture 338.8 on 200
  GB/s, the highest; fixture 2node-16x-a100-sxm4-40gb-oci-oke-rdma-8G 237.9 on OCI's 16 x 100
  Gb/s, 1.19), so the floor is :data:`DERIVED_NET_EFFICIENCY` = 0.70 of NICs x Gb/s / 8 (0.80
  less a 10 % margin, rounded down), and never above the node's own floor (the data crosses
  NVLink/PCIe too). A pass says the fabric is not broken, not that it is as fast as it should
  be: give --min-busbw (90 % of a known-good run) for that, and check every NIC alone with
  ``gpuinfra perftest check``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
NET_EFFICIENCY = 0.85  # one GPU per node: of the NICs' line rate (nccl-tests#119: NCCL at 0.96)
DERIVED_NET_EFFICIENCY = 0.70  # unmeasured fabrics: of the NICs' aggregate rate (docstring)
MEASURED_MARGIN = 0.90  # floors from a single public run sit 10 % below it
NVLS = "NVLink SHARP (NVLS) in use"

# PCIe x16 rate per direction in GB/s, after 128b/130b encoding (Gen3 8 GT/s, Gen4 16, Gen5 32).
PCIE_X16_GBYTES_PER_S: dict[int, float] = {3: 15.75, 4: 31.5, 5: 63.0}

# PCIe generation of each model's host link (all x16). NVIDIA data sheets (inferred: not in
# docs/hardware-reference.md; `nvidia-smi -q` fixtures: H100 Max 5, A10 4, T4 3);
# tests/unit/test_nccl.py checks every model of gpus.py is listed.
PCIE_GEN: dict[str, int] = {
    "A100-SXM4-40GB": 4, "A100-SXM4-80GB": 4, "A100-PCIE-40GB": 4, "A100-PCIE-80GB": 4,
    "A800-SXM4-80GB": 4, "A30": 4, "H100-SXM5-80GB": 5, "H100-PCIE-80GB": 5, "H100-NVL-94GB": 5,
    "H800-SXM5-80GB": 5, "H20-96GB": 5, "H200-SXM-141GB": 5, "H200-NVL-141GB": 5,
    "GH200-96GB": 5, "GH200-144GB": 5, "B200-180GB": 5, "GB200-186GB": 5,
    "V100-SXM2-16GB": 3, "V100-SXM2-32GB": 3, "V100-SXM3-32GB": 3, "V100-PCIE-32GB": 3,
    "V100-PCIE-16GB": 3, "V100S-PCIE-32GB": 3, "RTX-3090": 4, "RTX-4090": 4, "RTX-A6000": 4,
    "RTX-6000-ADA": 4, "L40": 4, "L40S": 4, "RTX-PRO-6000-BSE": 5, "L4": 4, "A10": 4, "T4": 3,
}

# GeForce cards: the driver refuses P2P over PCIe (topo -p2p fixture autodl-2x-rtx2080ti: NS),
# so between bridged pairs NCCL stages through host memory.
NO_PCIE_P2P: frozenset[str] = frozenset({"RTX-3090", "RTX-4090"})


@dataclass(frozen=True)
class Measured:
    """A floor from a measurement. condition: what the floor assumes (empty: nothing);
    ring: (floor, source) that applies when NVLink SHARP is off, None when it does not matter."""

    floor: float
    source: str
    condition: str = ""
    ring: tuple[float, str] | None = None


_AZ = "Azure HPC health checks conf/"
_RING_H100 = (333.0, "ring (NVLS off): ~370 GB/s (nccl-tests#212, sjeaugey; nccl-tests#309 "
                     "368.76 with NVLS disabled) x 0.9")

# Measured floors inside one node: (profile, model, GPUs per node) -> Measured.
MEASURED: dict[tuple[str, str, int], Measured] = {
    ("nvswitch-all-to-all", "H100-SXM5-80GB", 8): Measured(
        460.0, _AZ + "nd96isr_h100_v5.conf (16G)", NVLS, _RING_H100),
    ("nvswitch-all-to-all", "H200-SXM-141GB", 8): Measured(
        431.0, _AZ + "nd96isr_h200_v5.conf (16G)", NVLS,
        (333.0, "ring (NVLS off): inferred from H100's ~370 GB/s (same NVLink 4 switch fabric) "
                "x 0.9")),
    ("nvswitch-all-to-all", "A100-SXM4-80GB", 8): Measured(
        228.0, _AZ + "nd96amsr_a100_v4.conf (16G)"),
    ("nvswitch-all-to-all", "A100-SXM4-40GB", 8): Measured(228.0, _AZ + "nd96asr_v4.conf (8G)"),
    # Cut-down export parts, one public run each (nccl#1374: 8x H800 215 GB/s; nccl#412,
    # sjeaugey: ~160 GB/s on 8x A800), 10 % below it.
    ("nvswitch-all-to-all", "H800-SXM5-80GB", 8): Measured(
        193.5, "nccl#1374: 8x H800 215 GB/s x 0.9"),
    ("nvswitch-all-to-all", "A800-SXM4-80GB", 8): Measured(
        144.0, "nccl#412: ~160 GB/s on 8x A800 x 0.9"),
    # 8x V100 SXM2 (DGX-1 hybrid cube-mesh): check_nccl_allreduce 110.0 at 8G, as the knowledge
    # audit read it in the conf file's git history; the two stored versions read here (@47f8731,
    # @120820b) carry no all-reduce line, so the value is cited, not re-read.
    ("fixed-mesh", "V100-SXM2-32GB", 8): Measured(110.0, _AZ + "nd40rs_v2.conf (8G)"),
    ("fixed-mesh", "V100-SXM2-16GB", 8): Measured(
        110.0, "inferred from " + _AZ + "nd40rs_v2.conf (8x V100-SXM2-32GB, same links)"),
    ("bridged-pairs", "A100-PCIE-80GB", 2): Measured(193.0, _AZ + "nc48ads_a100_v4.conf (16G)"),
    ("bridged-pairs", "A100-PCIE-40GB", 2): Measured(
        193.0, "inferred from " + _AZ + "nc48ads_a100_v4.conf (the 80GB SKU, same bridge)"),
    ("bridged-pairs", "A100-PCIE-80GB", 4): Measured(25.0, _AZ + "nc96ads_a100_v4.conf (8G)"),
    ("bridged-pairs", "H100-NVL-94GB", 2): Measured(208.0, _AZ + "nc80adis_h100_v5.conf (16G)"),
    # No healthy H100 PCIe pair has been measured in public (nccl#1161's 116 GB/s is unexplained:
    # half of what the same NV12 bridge gives on H100 NVL). Until one is, the floor is H100
    # NVL's 208 x 0.85: it fails a pair at half speed and says it is not a measurement.
    ("bridged-pairs", "H100-PCIE-80GB", 2): Measured(
        177.0, "UNMEASURED on H100 PCIe: inferred from " + _AZ + "nc80adis_h100_v5.conf (2x H100 "
               "NVL, 208 GB/s on the same 12-link NVLink 4 bridge) x 0.85; re-measure a healthy "
               "pair and pass it with --min-busbw if it differs"),
    ("nvlink-domain", "GB200-186GB", 4): Measured(
        432.0, _AZ + "nd128isr_ndr_gb200_v6.conf (16G)"),
}


@dataclass(frozen=True)
class NetworkMeasurement:
    """One public all-reduce across nodes: busbw at the largest size, and the fabric it ran on."""

    model: str
    gpus_per_node: int
    nodes: int
    nics: int  # per node
    nic_gbps: float
    busbw: float
    source: str
    nvls: bool | None = None  # NVLink SHARP on (True), off (False), not said (None)


NETWORK_MEASURED: tuple[NetworkMeasurement, ...] = (
    NetworkMeasurement("H100-SXM5-80GB", 8, 2, 8, 200, 338.8,
                       "fixture 2node-16x-h100-80gb-hbm3-gcp-a3mega-tcpxo-8G.txt (GCP A3 Mega, "
                       "GPUDirect-TCPXO)"),
    NetworkMeasurement("H100-SXM5-80GB", 8, 2, 8, 400, 470.0, "nccl-tests#309", True),
    NetworkMeasurement("H100-SXM5-80GB", 8, 2, 8, 400, 430.0, "nccl#1221 (RoCE)", True),
    NetworkMeasurement("H100-SXM5-80GB", 8, 2, 8, 400, 330.0, "nccl#1221 (RoCE)", False),
    NetworkMeasurement("H100-SXM5-80GB", 8, 4, 8, 400, 365.84, "nccl-tests#309", True),
    NetworkMeasurement("H100-SXM5-80GB", 8, 4, 8, 400, 320.0, "nccl#1221 (RoCE)", True),
    NetworkMeasurement("H800-SXM5-80GB", 8, 2, 8, 100, 161.0, "nccl-tests#153 (CX-6)"),
)


def similar_runs(model_key: str, gpus_per_node: int, nics: int,
                 nic_gbps: float) -> list[NetworkMeasurement]:
    """The public runs closest to a fabric without its own: those of the same GPU model, else
    those with as many GPUs per node; the same NIC count and rate before the others."""
    same_model = [m for m in NETWORK_MEASURED if m.model == model_key]
    pool = same_model or [m for m in NETWORK_MEASURED if m.gpus_per_node == gpus_per_node]
    return sorted(pool, key=lambda m: ((m.nics, m.nic_gbps) != (nics, nic_gbps), m.nodes,
                                       -m.busbw))


def _run_text(m: NetworkMeasurement) -> str:
    nvls = {True: ", NVLS on", False: ", NVLS off", None: ""}[m.nvls]
    ratio = m.busbw / (m.nics * m.nic_gbps / 8)
    return (f"{m.busbw:g} GB/s on {m.nodes} nodes x {m.gpus_per_node} {m.model}, {m.nics} x "
            f"{m.nic_gbps:g} Gb/s ({ratio:.2f} of the NICs' rate{nvls}; {m.source})")


class NcclThresholdError(GpuinfraError):
    """No all-reduce floor can be given for what was asked; the message names the fix."""


@dataclass(frozen=True)
class BusbwThreshold:
    """The all-reduce floor for one run, and the facts it was computed from.

    min_busbw: GB/s busbw at the largest size must reach. bound: "intra-node" (NVLink/PCIe inside
    a node), "network" (between nodes) or "explicit" (given by the operator).
    network: "none" (one node), "rdma" or "socket" (multi-node without RDMA NICs).
    condition: what the floor assumes (NVLink SHARP in use), empty when nothing; ring_floor and
    ring_source: the floor that applies when the log shows NVLink SHARP off.
    derived: non-empty when no measurement of this fabric exists and the floor was derived from
    the NICs: what a pass does and does not say, and the measured runs of similar fabrics.
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
    condition: str = ""
    ring_floor: float | None = None
    ring_source: str = ""
    derived: str = ""

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node


def node_min_busbw(profile: str, model_key: str, gpu_count: int) -> tuple[float, str]:
    """(floor in GB/s, source) for ``gpu_count`` GPUs of one node; raises NcclThresholdError."""
    measured = node_floor(profile, model_key, gpu_count)
    return measured.floor, measured.source


def node_floor(profile: str, model_key: str, gpu_count: int) -> Measured:
    """The floor for ``gpu_count`` GPUs of one node, with its condition and ring floor."""
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
    return Measured(*_derived(prof, model, gpu_count))


def _derived(prof: TopologyProfile, model: GpuModel, gpu_count: int) -> tuple[float, str]:
    """Floors computed from link counts and rates (module docstring), for unmeasured combos."""
    if prof.needs_nvswitch or prof.needs_mesh or prof.needs_nvl_domain:
        raise NcclThresholdError(
            f"no measured {prof.name} floor for {gpu_count}x {model.key}: add one to MEASURED "
            "in gpuinfra/knowledge/nccl.py with its source, or give it with --min-busbw")
    if prof.needs_direct_mesh:
        line = model.nvlink_links * model.link_gbytes_per_s
        return (round(line * DIRECT_MESH_EFFICIENCY, 1),
                f"inferred: {model.nvlink_links} NVLinks x {model.link_gbytes_per_s:g} GB/s x "
                f"{DIRECT_MESH_EFFICIENCY}")
    if prof.needs_bridge and gpu_count == 2:
        links = model.bridge_links or 0
        return (round(links * model.link_gbytes_per_s * BRIDGE_EFFICIENCY, 1),
                f"inferred: {links} bridge links x {model.link_gbytes_per_s:g} GB/s x "
                f"{BRIDGE_EFFICIENCY} (Azure nc48ads_a100_v4 ratio)")
    if prof.needs_bridge and model.key not in NO_PCIE_P2P:
        return _pcie(model, PCIE_P2P_EFFICIENCY, "PCIe between the bridged pairs")
    return _pcie(model, PCIE_NO_P2P_EFFICIENCY, "PCIe, P2P not required")


def _pcie(model: GpuModel, efficiency: float, why: str) -> tuple[float, str]:
    gen = PCIE_GEN[model.key]
    return (round(PCIE_X16_GBYTES_PER_S[gen] * efficiency, 1),
            f"inferred: {why}: Gen{gen} x16 {PCIE_X16_GBYTES_PER_S[gen]:g} GB/s x {efficiency}")


def network_busbw(nics: int, nic_gbps: float) -> float:
    """One GPU per node: the floor (GB/s) is NICs x Gb/s / 8 x NET_EFFICIENCY."""
    return round(nics * nic_gbps / 8 * NET_EFFICIENCY, 1)


def network_floor(model_key: str, gpus_per_node: int, nodes: int, nics: int,
                  nic_gbps: float) -> Measured | None:
    """The floor between ``nodes`` nodes measured on this fabric, or None when unmeasured.

    10 % below the lowest public run with NVLink SHARP on (or not said); the lowest run with it
    off gives the ring floor.
    """
    runs = [m for m in NETWORK_MEASURED
            if (m.model, m.gpus_per_node, m.nodes, m.nics, m.nic_gbps)
            == (model_key, gpus_per_node, nodes, nics, nic_gbps)]
    main = [m for m in runs if m.nvls is not False]
    if not main:
        return None
    low = min(main, key=lambda m: m.busbw)
    source = (f"measured on this fabric: {low.busbw:g} GB/s ({low.source}; lowest of "
              f"{len(main)} public run(s)) x {MEASURED_MARGIN}")
    ring_runs = [m for m in runs if m.nvls is False]
    ring = None
    if ring_runs:
        ring_low = min(ring_runs, key=lambda m: m.busbw)
        ring = (round(ring_low.busbw * MEASURED_MARGIN, 1),
                f"ring (NVLS off): {ring_low.busbw:g} GB/s ({ring_low.source}) x "
                f"{MEASURED_MARGIN}")
    condition = NVLS if any(m.nvls for m in main) else ""
    return Measured(round(low.busbw * MEASURED_MARGIN, 1), source, condition, ring)


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
    the operator gives (--min-busbw); required between nodes without RDMA NICs. Between nodes of
    a fabric without a measured floor it is derived from the NICs (``derived`` says so).
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
        return _with(base, Measured(explicit, f"given with --min-busbw {explicit:g}"),
                     "explicit")
    if nodes == 1:
        return _with(base, node_floor(prof.name, model.key, gpus_per_node), "intra-node")
    return _multi_node(base, nics, nic_gbps)


def _multi_node(base: BusbwThreshold, nics: int, nic_gbps: float | None) -> BusbwThreshold:
    """The measured floor of this fabric (or, one GPU per node, the NICs' rate)."""
    if not nics:
        raise NcclThresholdError(
            f"{base.nodes} nodes without rdma_nics: NCCL will fall back to TCP sockets "
            "(NET/Socket) between them, whose speed the spec does not describe; give the floor "
            "with --min-busbw GB/s (e.g. 85 % of the Ethernet rate / 8), or add rdma_nics to "
            "the nodes in the inventory")
    if nic_gbps is None or nic_gbps <= 0:
        raise NcclThresholdError(
            f"--nic-gbps is required: the nodes have {nics} RDMA NIC(s) each, and the "
            "floor between nodes depends on the fabric (e.g. --nic-gbps 400 for NDR, 200 for "
            "HDR; `ibstat` shows Rate)")
    if base.gpus_per_node == 1:
        net = network_busbw(nics, nic_gbps)
        return _with(base, Measured(net, f"network, one GPU per node: {nics} NIC(s) x "
                                         f"{nic_gbps:g} Gb/s / 8 x {NET_EFFICIENCY}"), "network")
    measured = network_floor(base.model, base.gpus_per_node, base.nodes, nics, nic_gbps)
    if measured is None:
        return _derived_network(base, nics, nic_gbps)
    return _with(base, measured, "network")


def _derived_network(base: BusbwThreshold, nics: int, nic_gbps: float) -> BusbwThreshold:
    """No public run of this fabric: the conservative floor from the NICs (module docstring)."""
    floor = round(nics * nic_gbps / 8 * DERIVED_NET_EFFICIENCY, 1)
    source = (f"DERIVED, not measured: {nics} NIC(s) x {nic_gbps:g} Gb/s / 8 x "
              f"{DERIVED_NET_EFFICIENCY} (no public run of {base.nodes} nodes x "
              f"{base.gpus_per_node} {base.model} on {nics} x {nic_gbps:g} Gb/s)")
    try:
        node: Measured | None = node_floor(base.profile, base.model, base.gpus_per_node)
    except NcclThresholdError:
        node = None  # no floor inside the node to compare with: the NICs' bound alone
    # The node's floor without NVLink SHARP (its ring floor where it has one): the derived floor
    # assumes nothing about NVLS.
    node_cap = (node.ring if node is not None and node.ring
                else (node.floor, node.source) if node is not None else None)
    if node_cap is not None and node_cap[0] < floor:
        floor = node_cap[0]
        source = (f"DERIVED, not measured: the node's own floor ({node_cap[1]}), below "
                  f"{nics} NIC(s) x {nic_gbps:g} Gb/s / 8 x {DERIVED_NET_EFFICIENCY}")
    runs = similar_runs(base.model, base.gpus_per_node, nics, nic_gbps)[:4]
    context = "; ".join(_run_text(m) for m in runs) or "none in NETWORK_MEASURED"
    derived = (f"no public measurement of this fabric, so the floor is derived from its NICs: "
               f"a healthy fabric reaches at least it (ring all-reduce alone moves about the "
               f"NICs' rate), so a failure is a fault, but a pass does not prove full speed. "
               f"Measured on similar fabrics: {context}")
    return replace(_with(base, Measured(floor, source), "network"), derived=derived)


def _with(base: BusbwThreshold, measured: Measured, bound: str) -> BusbwThreshold:
    ring_floor, ring_source = measured.ring if measured.ring else (None, "")
    return BusbwThreshold(measured.floor, bound, measured.source, base.nodes,
                          base.gpus_per_node, base.profile, base.model, base.network, base.nics,
                          base.nic_gbps, measured.condition, ring_floor, ring_source)


def _profile(name: str) -> TopologyProfile:
    return require_profile(name, NcclThresholdError)


def _model(key: str) -> GpuModel:
    return require_model(key, NcclThresholdError)
