"""Verdicts: compare parsed `nvidia-smi` outputs with what a topology profile expects.

Each check yields a :class:`Finding` that names what was expected, what was seen and, when it
fails, the likely cause and the fix (the field's troubleshooting table). Expectations come from
the profile and GPU model (gpuinfra.knowledge), never from fixed numbers: H100 PCIe cards on
bridges use 12 of their 18 link slots by design, and a DGX-1's GPUs have NV1, NV2 or no NVLink
to a given peer by design (``fixed-mesh``). The GPU count is checked first; when it is wrong
the pair and link checks are skipped, because a missing GPU makes them all mislead. Given
`nvidia-smi -q`, each GPU's fabric registration is judged as well (NVSwitch and NVLink-domain
systems of NVLink 4 and later report it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpuinfra.knowledge.gpus import GpuModel, model_for_smi_name
from gpuinfra.knowledge.lookup import require_model, require_profile
from gpuinfra.knowledge.topology import (
    PairExpectation,
    TopologyProfile,
    board_mesh,
    expected_active_links,
    gpu_count_problem,
    mesh_numbering,
    nvlink_pairs,
)
from gpuinfra.parsers.fabric import FabricReport
from gpuinfra.parsers.nvlink import NvlinkGpu, NvlinkStatus
from gpuinfra.parsers.p2p import P2P_CODES, P2PMatrix
from gpuinfra.parsers.topo import TopoMatrix

SEVERITIES = ("ok", "warn", "fail")
SPEED_TOLERANCE = 0.01  # a link may read up to 1 % below the generation's rate

MISSING_GPU_CAUSE = ("a GPU is missing from the bus (fell off it: XID 79; not seated or not "
                     "powered), is bound to another driver (vfio-pci), or passthrough/VM "
                     "configuration hides it")
MISSING_GPU_FIX = (
    "check `nvidia-smi -L`, `lspci -nnk -d 10de:`, `dmesg | grep -i -e NVRM -e Xid`; on a VM "
    "check the hostdev/vfio passthrough config; reboot, then reseat or replace the GPU"
)
EXTRA_GPU_CAUSE = "the node shows more GPUs than the spec declares (wrong spec, or wrong node)"
EXTRA_GPU_FIX = "correct the GPU count in the cluster spec, or check this is the intended node"
BRIDGE_CAUSE = (
    "NVLink bridge not detected or not seated "
    "(or NVSwitch/Fabric Manager not up on NVSwitch systems)"
)
BRIDGE_FIX = (
    "power off, reseat the NVLink bridge(s) so each covers its GPU pair (all bridge slots of the "
    "pair); on NVSwitch systems check `systemctl status nvidia-fabricmanager`"
)
NVSWITCH_CAUSE = (
    "no NVLink through the NVSwitches: a GPU's links to the baseboard's NVSwitches are down "
    "(GPU not seated, a failed link, NVLink disabled), or the NVSwitch fabric is not up"
)
NVSWITCH_FIX = (
    "`nvidia-smi nvlink --status` on the GPUs named: the one whose links are inactive is the one "
    "to reseat or replace (`dmesg | grep -i xid`); `nvidia-smi -q | grep -A2 Fabric` on each"
)
FABRIC_DOWN_CAUSE = (
    "NVSwitch fabric not up: no GPU pair has NVLink (Fabric Manager not running or failed, the "
    "NVSwitches not trained, or Fabric Manager's version differs from the driver's)"
)
FABRIC_DOWN_FIX = (
    "`systemctl status nvidia-fabricmanager`, `journalctl -u nvidia-fabricmanager`; "
    "`nvidia-smi -q | grep -A2 Fabric` must show State Completed, Status Success; install the "
    "Fabric Manager of the driver's exact version (NVLink 5 boards: `nvlsm` as well)"
)
LINKS_DOWN_CAUSE = "links down: some NVLink lanes are inactive"
LINKS_DOWN_FIX = (
    "`nvidia-smi nvlink --status` to see which links, reseat the bridge / GPU, "
    "check Fabric Manager (`systemctl status nvidia-fabricmanager`) on NVSwitch systems"
)
MESH_CAUSE = (
    "no NVLink between GPUs the board wires together: one of them has its NVLinks down (GPU "
    "not seated on the baseboard, a failed link or NVLink disabled), or a VM was given GPUs "
    "of different boards"
)
MESH_FIX = (
    "`nvidia-smi nvlink --status` on both GPUs: the one whose links are inactive is the one to "
    "reseat or replace (`dmesg | grep -i xid` for NVLink errors); on a VM pass through GPUs "
    "that share a board"
)
DOMAIN_CAUSE = (
    "the GPU is not joined to the rack's NVLink domain: its NVLink switch tray ports are down, "
    "or the domain's fabric manager has not registered it"
)
DOMAIN_FIX = (
    "`nvidia-smi -q | grep -A6 Fabric` on the node, the NVLink switch trays' port states, "
    "`nvidia-smi nvlink --status`; reseat the compute tray if its links stay down"
)
FABRIC_CAUSE = (
    "the GPU's NVLink fabric is not up: Fabric Manager (or, on NVLink 5, the NVLink subnet "
    "manager) has not finished training or registering it"
)
FABRIC_FIX = (
    "`systemctl status nvidia-fabricmanager` (and `nvlsm` on NVLink 5 boards), "
    "`journalctl -u nvidia-fabricmanager`; Fabric Manager's version must equal the driver's; "
    "GB200: the NVLink switch trays' fabric manager and `nvidia-imex` on the compute trays"
)
CLIQUE_CAUSE = "GPUs of one node report different NVLink domains (CliqueId / ClusterUUID)"
CLIQUE_FIX = ("check the rack's NVLink switch configuration: every GPU of a node must join the "
              "same partition; `nvidia-smi -q | grep -e CliqueId -e ClusterUUID`")
SLOW_LINK_CAUSE = "link trained at reduced speed"
SLOW_LINK_FIX = (
    "check `nvidia-smi nvlink -e` for CRC/replay errors, reseat the bridge or GPU, "
    "and replace it if the link stays slow"
)
P2P_CAUSES: dict[str, str] = {
    "CNS": "the chipset/platform does not support P2P on this path "
           "(BIOS settings, ACS/IOMMU redirecting peer traffic, or the PCIe switch)",
    "GNS": "the GPU SKU does not allow P2P",
    "TNS": "the topology path between these GPUs does not allow P2P",
    "NS": "P2P not supported: driver mismatch, BIOS/ACS settings, or a GPU that does not "
          "allow P2P",
    "DR": "P2P disabled by a registry key / driver option",
    "U": "P2P status unknown: the driver could not determine it",
}
P2P_FIX = (
    "check the driver version is the same for every GPU (`cat /proc/driver/nvidia/version`), "
    "BIOS ACS/IOMMU settings (`lspci -vvv | grep ACSCtl` should show SrcValid- on the bridges "
    "between the GPUs), and that the NVLink bridge is seated"
)
SPEC_FIX = "correct the topology profile, GPU model or GPU count in the cluster spec"


# A finding said in one sentence names its subject first when it has one ("mlx5_0: port ...").
_NAMED = re.compile(r"([\w.:/-]+): (.+)", re.DOTALL)


@dataclass(frozen=True)
class Finding:
    """The outcome of one check on one subject (``node``, ``GPU0-GPU1``, ``GPU2 link 5``).

    severity: "ok", "warn" or "fail"; cause and fix are empty when there is nothing to fix.
    Every judgement of the project gives these: the NVLink checks here, the RDMA checks
    (:mod:`gpuinfra.rdma.verdicts`), the capture judges (:mod:`gpuinfra.captures`), health.
    """

    check: str
    subject: str
    expected: str
    observed: str
    severity: str
    cause: str = ""
    fix: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def to_json(self) -> dict[str, Any]:
        """Plain data with every field."""
        return asdict(self)

    @property
    def failed(self) -> bool:
        """True for severity "fail"."""
        return self.severity == "fail"

    @classmethod
    def said(cls, check: str, what: str, cause: str, fix: str,
             severity: str = "fail") -> Finding:
        """A finding said in one sentence, ``what`` (the RDMA and kernel judgements: "mlx5_0:
        port DOWN/Polling, not ACTIVE/LinkUp"): its subject is the name the sentence starts
        with ("mlx5_0"), or none ("") when it starts with no name; nothing expected is said."""
        named = _NAMED.fullmatch(what)
        return cls(check, named[1] if named else "", "", named[2] if named else what, severity,
                   cause, fix)

    @property
    def what(self) -> str:
        """The finding in one sentence: its subject (when it has one), then what was seen."""
        return f"{self.subject}: {self.observed}" if self.subject else self.observed


def failures(findings: Sequence[Finding]) -> list[Finding]:
    """The findings with severity "fail"."""
    return [f for f in findings if f.failed]


@dataclass(frozen=True)
class _Expectation:
    """What the checks compare against, resolved from the arguments."""

    profile: TopologyProfile
    gpu_count: int
    model: GpuModel | None
    pairs: list[PairExpectation]
    active_links: list[int]  # per GPU index
    numbering: tuple[int, ...] = ()  # fixed mesh: node GPU index of each board GPU

    def active_for(self, index: int) -> int:
        return self.active_links[index] if index < len(self.active_links) else \
            max(self.active_links, default=1)


def check_system(
    profile: str,
    gpu_count: int,
    model_key: str | None = None,
    min_links: int | None = None,
    topo: TopoMatrix | None = None,
    p2p: Sequence[P2PMatrix] = (),
    nvlink: NvlinkStatus | None = None,
    fabric: FabricReport | None = None,
    gpu_names: Sequence[str] | None = None,
) -> list[Finding]:
    """Check captured outputs against ``profile`` for ``gpu_count`` GPUs.

    model_key names the GPU model (inferred from the nvlink GPU names when None); min_links
    overrides the per-pair NVLink minimum; gpu_names: the names the GPU listing
    (``nvidia-smi --query-gpu=name`` / ``-L``) gives, one per GPU, when it was read. Returns
    one Finding per check, passes included, in order: gpu-count, gpu-model, profile, then (if
    the count is right) nvlink-topology per pair, p2p-<mode> per pair and matrix,
    nvlink-links per GPU, fabric per GPU (from `nvidia-smi -q`). Raises GpuinfraError for an
    unknown profile or model.
    """
    prof = _profile(profile)
    model = _model(model_key, nvlink)
    findings = [_check_count(gpu_count, topo, p2p, nvlink, fabric, gpu_names)]
    findings += _check_model(model_key, model, _named_gpus(gpu_names, fabric, nvlink))
    findings.append(_check_profile(prof, model, gpu_count))
    if not prof.checks_pairs:
        return findings
    if findings[0].severity == "fail":
        findings.append(_skipped_pairs())
        return findings
    expect = _expectation(prof, gpu_count, model, min_links, topo)
    if expect.numbering and expect.numbering != tuple(range(gpu_count)):
        findings.append(_numbering_finding(expect.numbering))
    if topo is not None:
        findings += _whole_fabric([_check_topo_pair(topo, pair, prof) for pair in expect.pairs],
                                  prof)
    for matrix in p2p:
        findings += [_check_p2p_pair(matrix, pair) for pair in expect.pairs]
    if nvlink is not None:
        findings += _check_nvlink(nvlink, expect)
    if fabric is not None:
        findings += check_fabric(fabric, prof, model)
    return findings


def _profile(name: str) -> TopologyProfile:
    return require_profile(name)


def _model(model_key: str | None, nvlink: NvlinkStatus | None) -> GpuModel | None:
    """The named model, else the one every nvlink GPU name maps to, else None."""
    if model_key is not None:
        return require_model(model_key)
    return _model_from_names(nvlink)


def _model_from_names(nvlink: NvlinkStatus | None) -> GpuModel | None:
    """The single model the nvlink output's GPU names map to, or None."""
    if nvlink is None:
        return None
    models = [model_for_smi_name(name) for name in nvlink.names]
    keys = {model.key if model else None for model in models}
    return models[0] if len(keys) == 1 and models else None


def _expectation(
    prof: TopologyProfile, gpu_count: int, model: GpuModel | None, min_links: int | None,
    topo: TopoMatrix | None = None,
) -> _Expectation:
    """Pairs and per-GPU active links the checks require, with min_links applied; a fixed
    mesh is matched to the node's GPU numbering first (``topo -m`` shows it)."""
    if model is not None:
        pairs = nvlink_pairs(prof, model, gpu_count)
        active = expected_active_links(prof, model, gpu_count)
    else:  # a fixed mesh is known per model: without one no pair can be named
        stand_in = GpuModel(key="unknown", smi_names=(), pci_ids=(), memory_gb=0,
                            form_factor="", nvlink_gen=1, nvlink_links=max(1, gpu_count - 1),
                            bridge_links=1)
        pairs = nvlink_pairs(prof, stand_in, gpu_count)
        active = [1] * gpu_count
    if min_links is not None or model is None:
        links = min_links if min_links is not None else 1
        pairs = [PairExpectation(p.a, p.b, links) for p in pairs]
        peers = [sum(1 for p in pairs if gpu in (p.a, p.b)) for gpu in range(gpu_count)]
        active = [links * n for n in peers] if prof.needs_direct_mesh or prof.needs_mesh \
            else [links] * gpu_count
    numbering: tuple[int, ...] = ()
    mesh = board_mesh(model, gpu_count) if model is not None and prof.needs_mesh else None
    if mesh is not None and topo is not None:
        numbering = mesh_numbering(mesh, topo.nvlink_count)
        pairs = [PairExpectation(*sorted((numbering[p.a], numbering[p.b])), p.min_links)
                 for p in pairs]
        renumbered = [0] * gpu_count
        for board_gpu, node_gpu in enumerate(numbering):
            renumbered[node_gpu] = active[board_gpu]
        active = renumbered
    return _Expectation(prof, gpu_count, model, pairs, [max(1, n) for n in active], numbering)


def _numbering_finding(numbering: tuple[int, ...]) -> Finding:
    mapping = ", ".join(f"board GPU{b}=GPU{n}" for b, n in enumerate(numbering) if b != n)
    return Finding("mesh-numbering", "node", "the board's GPU numbering",
                   f"another numbering, matched: {mapping}", "ok")


def _check_count(
    gpu_count: int,
    topo: TopoMatrix | None,
    p2p: Sequence[P2PMatrix],
    nvlink: NvlinkStatus | None,
    fabric: FabricReport | None = None,
    gpu_names: Sequence[str] | None = None,
) -> Finding:
    """gpu-count: every complete view of the node lists exactly ``gpu_count`` GPUs."""
    seen = [("nvidia-smi --query-gpu", len(gpu_names))] if gpu_names is not None else []
    seen += _gpu_counts(gpu_count, topo, p2p, nvlink)
    if fabric is not None and not fabric.cuts:  # an excerpt lists only some GPUs
        seen.append(("nvidia-smi -q", len(fabric.gpus)))
    return count_finding(gpu_count, seen)


def count_finding(gpu_count: int, seen: Sequence[tuple[str, int]]) -> Finding:
    """gpu-count: each (source, GPUs it lists) against the spec's ``gpu_count``: fewer is a
    missing GPU, more an extra one (the one rule: check_system, the health check and the verify
    suite's driver test)."""
    expected = f"{gpu_count} GPUs"
    if not seen:
        return Finding("gpu-count", "node", expected, "no GPU list or topo/p2p/nvlink output "
                       "to count", "warn", "nothing was captured",
                       "capture `nvidia-smi --query-gpu=index,name --format=csv` or "
                       "`nvidia-smi topo -m`")
    observed = "; ".join(f"{source}: {count}" for source, count in seen)
    counts = [count for _, count in seen]
    if min(counts) < gpu_count:
        return Finding("gpu-count", "node", expected, observed, "fail",
                       MISSING_GPU_CAUSE, MISSING_GPU_FIX)
    if max(counts) > gpu_count:
        return Finding("gpu-count", "node", expected, observed, "fail",
                       EXTRA_GPU_CAUSE, EXTRA_GPU_FIX)
    return Finding("gpu-count", "node", expected, observed, "ok")


def _gpu_counts(
    gpu_count: int,
    topo: TopoMatrix | None,
    p2p: Sequence[P2PMatrix],
    nvlink: NvlinkStatus | None,
) -> list[tuple[str, int]]:
    """(source, GPUs it lists) for each output that shows the whole node.

    nvlink output is left out when empty (GPUs without NVLink print nothing) or when it shows
    one GPU of several (`nvlink -s -i N`); a GPU index past the expected count still counts.
    """
    seen: list[tuple[str, int]] = []
    if topo is not None:
        seen.append(("topo -m", len(topo.gpus)))
    for matrix in p2p:
        seen.append((f"topo -p2p {matrix.mode or '?'}", len(matrix.gpus)))
    if nvlink is not None and nvlink.gpus:
        highest = max(gpu.index for gpu in nvlink.gpus.values())
        if len(nvlink.gpus) > 1 or gpu_count == 1:
            seen.append(("nvlink --status", len(nvlink.gpus)))
        elif highest >= gpu_count:
            seen.append((f"nvlink --status (shows GPU{highest})", highest + 1))
    return seen


def _named_gpus(gpu_names: Sequence[str] | None, fabric: FabricReport | None,
                nvlink: NvlinkStatus | None) -> list[str]:
    """The GPU names the driver printed, from the first output that has them: the GPU
    listing, then ``nvidia-smi -q``, then ``nvlink --status`` (which prints nothing on GPUs
    without NVLink, and on one SXM GPU without its NVSwitch peers:
    tests/fixtures/device/h100-80gb-hbm3-vm-drv580.159.04/nvlink-status.txt)."""
    if gpu_names:
        return [name for name in gpu_names if name]
    if fabric is not None and fabric.gpus:
        return [gpu.name for gpu in fabric.gpus.values() if gpu.name]
    return nvlink.names if nvlink is not None else []


def _check_model(model_key: str | None, model: GpuModel | None,
                 names: Sequence[str]) -> list[Finding]:
    """gpu-model: every GPU's name is one of the spec's model (knowledge.gpus smi_names); a
    name the table does not know is a warning, not a pass."""
    if model_key is None or model is None or not names:
        return []
    seen = {name: model_for_smi_name(name) for name in names}
    shown = ", ".join(sorted(seen))
    wrong = {name: found for name, found in seen.items()
             if found is not None and found.key != model.key}
    if wrong:
        keys = ", ".join(sorted({found.key for found in wrong.values()}))
        return [Finding("gpu-model", "node", model.key, f"{shown} ({keys})", "fail",
                        "the node has different GPUs than the spec declares", SPEC_FIX)]
    if any(found is None for found in seen.values()):
        return [Finding("gpu-model", "node", model.key, shown, "warn",
                        "GPU name not in the knowledge table (gpuinfra/knowledge/gpus.py "
                        "smi_names)", "add the name to the model's smi_names if it is that "
                        "model; else correct gpu_model")]
    return [Finding("gpu-model", "node", model.key, shown, "ok")]


def _check_profile(prof: TopologyProfile, model: GpuModel | None, gpu_count: int) -> Finding:
    """profile: ``gpu_count`` GPUs of ``model`` can form the profile at all."""
    expected = f"{gpu_count}x {model.key if model else 'any model'} as {prof.name}"
    problem = gpu_count_problem(prof, model, gpu_count)
    if problem is None:
        return Finding("profile", "node", expected, "consistent", "ok")
    return Finding("profile", "node", expected, problem, "fail",
                   f"the spec cannot be right: {problem}", SPEC_FIX)


def _skipped_pairs() -> Finding:
    return Finding("pair-checks", "node", "NVLink, P2P and link checks", "skipped", "warn",
                   "the GPU count is wrong, so pair and link checks would mislead",
                   "fix the gpu-count finding first, then re-run the checks")


def _no_link_cause(prof: TopologyProfile) -> tuple[str, str]:
    """Cause and fix for a pair that should be NVLink and is not, per kind of board: a board
    with NVSwitches has no bridge to reseat."""
    if prof.needs_mesh:
        return MESH_CAUSE, MESH_FIX
    if prof.needs_nvl_domain:
        return DOMAIN_CAUSE, DOMAIN_FIX
    if prof.needs_nvswitch:
        return NVSWITCH_CAUSE, NVSWITCH_FIX
    return BRIDGE_CAUSE, BRIDGE_FIX


def _whole_fabric(pairs: list[Finding], prof: TopologyProfile) -> list[Finding]:
    """On an NVSwitch board where no pair has NVLink at all, one cause explains every pair:
    the fabric is not up (one GPU's links down leaves the other GPUs' pairs up)."""
    if not (prof.needs_nvswitch and len(pairs) > 1
            and all(f.failed and f.cause == NVSWITCH_CAUSE for f in pairs)):
        return pairs
    return [replace(f, cause=FABRIC_DOWN_CAUSE, fix=FABRIC_DOWN_FIX) for f in pairs]


def _check_topo_pair(topo: TopoMatrix, pair: PairExpectation, prof: TopologyProfile) -> Finding:
    """nvlink-topology: the pair's `topo -m` cell is NV# with at least the minimum links."""
    cell = topo.link(pair.a, pair.b) or "missing"
    expected = f"NV>={pair.min_links}"
    if topo.link(pair.a, pair.b) is None and topo.cuts:  # both rows left out of a paste
        return Finding("nvlink-topology", pair.subject, expected, "not in the capture (rows "
                       "left out)", "warn", "the pasted matrix does not show this pair",
                       "paste the whole `nvidia-smi topo -m`")
    count = topo.nvlink_count(pair.a, pair.b)
    if count == 0:
        return Finding("nvlink-topology", pair.subject, expected, cell, "fail",
                       *_no_link_cause(prof))
    if count < pair.min_links:
        return Finding("nvlink-topology", pair.subject, expected, cell, "fail",
                       LINKS_DOWN_CAUSE, LINKS_DOWN_FIX)
    return Finding("nvlink-topology", pair.subject, expected, cell, "ok")


def _check_p2p_pair(matrix: P2PMatrix, pair: PairExpectation) -> Finding:
    """p2p-<mode>: the pair is OK in both directions."""
    check = f"p2p-{matrix.mode}" if matrix.mode else "p2p"
    there = matrix.code(pair.a, pair.b) or "missing"
    back = matrix.code(pair.b, pair.a) or "missing"
    observed = there if there == back else f"GPU{pair.a}->GPU{pair.b} {there}, back {back}"
    bad = next((code for code in (there, back) if code != "OK"), None)
    if bad is None:
        return Finding(check, pair.subject, "OK", observed, "ok")
    meaning = P2P_CODES.get(bad, "no status in the matrix")
    cause = f"{bad} ({meaning}): {P2P_CAUSES.get(bad, 'the pair is absent from the matrix')}"
    return Finding(check, pair.subject, "OK", observed, "fail", cause, P2P_FIX)


def _check_nvlink(nvlink: NvlinkStatus, expect: _Expectation) -> list[Finding]:
    """nvlink-links for every GPU the output lists (a node finding when it lists none)."""
    if not nvlink.gpus:
        return [Finding("nvlink-links", "node", _links_expected(expect, 0),
                        "`nvidia-smi nvlink --status` printed nothing (no NVLink seen)", "fail",
                        *_no_link_cause(expect.profile))]
    findings: list[Finding] = []
    for key, gpu in nvlink.gpus.items():
        findings += _check_gpu_links(key, gpu, expect)
    return findings


def _links_expected(expect: _Expectation, index: int) -> str:
    speed = f" at {expect.model.link_gbytes_per_s:g} GB/s" if expect.model else ""
    return f">={expect.active_for(index)} active links{speed}"


def _check_gpu_links(key: str, gpu: NvlinkGpu, expect: _Expectation) -> list[Finding]:
    """One GPU: enough active links, and (model known) each at the generation's rate."""
    expected = _links_expected(expect, gpu.index)
    if gpu.all_inactive or not gpu.active_links:
        return [Finding("nvlink-links", key, expected, "all links inactive", "fail",
                        *_no_link_cause(expect.profile))]
    active, inactive = gpu.active_links, gpu.inactive_links
    observed = f"{len(active)} active"
    if inactive:
        observed += f", {len(inactive)} inactive (links {','.join(map(str, inactive))})"
    findings = _slow_links(key, gpu, expect.model)
    if len(active) < expect.active_for(gpu.index):
        findings.insert(0, Finding("nvlink-links", key, expected, observed, "fail",
                                   LINKS_DOWN_CAUSE, LINKS_DOWN_FIX))
    elif not findings:
        findings.append(Finding("nvlink-links", key, expected, observed, "ok"))
    return findings


def _slow_links(key: str, gpu: NvlinkGpu, model: GpuModel | None) -> list[Finding]:
    """A failure per active link below the model's per-link rate (none when model unknown)."""
    if model is None or not model.link_gbytes_per_s:
        return []
    floor = model.link_gbytes_per_s * (1 - SPEED_TOLERANCE)
    return [
        Finding("nvlink-links", f"{key} link {number}", f"{model.link_gbytes_per_s:g} GB/s",
                f"{link.gbytes_per_s:g} GB/s", "fail", SLOW_LINK_CAUSE, SLOW_LINK_FIX)
        for number, link in sorted(gpu.links.items())
        if link.active and link.gbytes_per_s is not None and link.gbytes_per_s < floor
    ]


# ---------------------------------------------------------------------------- fabric

FABRIC_UP = ("Completed", "Success")


def check_fabric(report: FabricReport, prof: TopologyProfile,
                 model: GpuModel | None) -> list[Finding]:
    """fabric per GPU: registered with the NVLink fabric (`nvidia-smi -q`), and, in an NVLink
    domain, every GPU of the node in the same clique and cluster.

    Judged on NVSwitch and NVLink-domain profiles of NVLink 4 and later (earlier GPUs print
    N/A there even when healthy); other profiles get no fabric finding.
    """
    if not (prof.needs_nvswitch or prof.needs_nvl_domain):
        return []
    if model is not None and model.nvlink_gen < 4:
        return []
    findings = [_check_gpu_fabric(key, gpu.fabric, prof)
                for key, gpu in report.gpus.items()]
    if prof.needs_nvl_domain:
        findings.append(_check_clique(report))
    return [f for f in findings if f is not None]


def _check_gpu_fabric(key: str, fabric: Any, prof: TopologyProfile) -> Finding | None:
    if fabric is None:
        return Finding("fabric", key, "State Completed, Status Success",
                       "no Fabric section (a filtered `nvidia-smi -q -d ...` capture)", "warn",
                       "the capture does not show the fabric", "capture plain `nvidia-smi -q`")
    observed = f"State {fabric.state}, Status {fabric.status}"
    expected = "State Completed, Status Success"
    if prof.needs_nvl_domain:
        expected += ", Health Bandwidth Full"
        bandwidth = fabric.health.get("Bandwidth")
        if bandwidth is not None:
            observed += f", Bandwidth {bandwidth}"
        summary = fabric.health.get("Summary")
        if summary is not None and summary != "Healthy":
            return Finding("fabric", key, expected, observed + f", Summary {summary}", "fail",
                           DOMAIN_CAUSE, DOMAIN_FIX)
        if bandwidth not in (None, "Full"):
            return Finding("fabric", key, expected, observed, "fail", DOMAIN_CAUSE, DOMAIN_FIX)
    if (fabric.state, fabric.status) != FABRIC_UP:
        return Finding("fabric", key, expected, observed, "fail", FABRIC_CAUSE, FABRIC_FIX)
    return Finding("fabric", key, expected, observed, "ok")


def _check_clique(report: FabricReport) -> Finding:
    seen = {(gpu.fabric.clique_id, gpu.fabric.cluster_uuid) for gpu in report.gpus.values()
            if gpu.fabric is not None}
    observed = "; ".join(f"CliqueId {c}, ClusterUUID {u}" for c, u in sorted(seen, key=str))
    expected = "one CliqueId and ClusterUUID on every GPU"
    if len(seen) == 1 and not any(v in (None, "N/A") for v in next(iter(seen))):
        return Finding("fabric-domain", "node", expected, observed, "ok")
    return Finding("fabric-domain", "node", expected, observed or "no Fabric section", "fail",
                   CLIQUE_CAUSE, CLIQUE_FIX)
