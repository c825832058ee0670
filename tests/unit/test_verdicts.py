"""Verdicts on real captures: healthy systems pass, broken ones fail and name the cause."""

from __future__ import annotations

import re

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.nvlink import NvlinkStatus, parse_nvlink
from gpuinfra.parsers.p2p import P2PMatrix, parse_p2p
from gpuinfra.parsers.topo import TopoMatrix, parse_topo
from gpuinfra.verdicts import (
    FABRIC_DOWN_CAUSE,
    FABRIC_DOWN_FIX,
    NVSWITCH_CAUSE,
    NVSWITCH_FIX,
    Finding,
    check_system,
    failures,
)
from tests.conftest import REAL

H100_TOPO = "8x-h100-sxm-nv18-no-nics-spaces.txt"
A100_SXM_TOPO = "8x-a100-sxm4-80gb-nv12-4nic-sys-distserve-issue3.txt"
H100_PCIE_TOPO = "hpe-dl380a-gen11-2x-h100-pcie-nvlink-bridge-nv12.txt"
ALL_SYS_TOPO = "8x-pcie-gpu-all-sys-2-numa-no-nics.txt"
RTX4090_TOPO = "8x-rtx4090-pcie-only-phb-node-sys-xeon8352v-drv570.txt"
POLARIS_TOPO = "alcf-polaris-4x-a100-sxm4-nv4-2x-mlx5-header-damaged.txt"
A100_NVLINK = "azure-nd-a100-v4-8x-a100-sxm4-80gb-nvlink-status-12-links-25GBs.txt"
A100_GPU7_NVLINK = "azure-a100-sxm4-80gb-single-gpu7-nvlink-s-25GBs-tab-format.txt"
H100_PCIE_NVLINK = "hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt"
INACTIVE_NVLINK = "hpe-dl380-gen11-2x-a100-pcie-no-bridge-nvlink-s-all-inactive.txt"
EMPTY_NVLINK = "kvm-vm-1x-a10-nvlink-status-empty-output.txt"
BRIDGE = "NVLink bridge not detected or not seated"
PAIR_CHECKS = ("nvlink-topology", "p2p", "nvlink-links")


def topo(name: str) -> TopoMatrix:
    return parse_topo((REAL / "nvidia-smi-topo-m" / name).read_text())


def p2p(name: str, mode: str) -> P2PMatrix:
    return parse_p2p((REAL / "nvidia-smi-topo-p2p" / name).read_text(), mode)


def nvlink(name: str) -> NvlinkStatus:
    return parse_nvlink((REAL / "nvidia-smi-nvlink" / name).read_text())


def checks(findings: list[Finding], name: str) -> list[Finding]:
    return [f for f in findings if f.check.startswith(name)]


def test_hgx_h100_passes() -> None:
    findings = check_system(
        "nvswitch-all-to-all", 8, "H100-SXM5-80GB", topo=topo(H100_TOPO),
        p2p=[p2p("8x-h100-80gb-hbm3-p2p-r-all-OK.txt", "r")],
    )
    assert failures(findings) == []
    assert all(f.severity == "ok" for f in findings)
    assert findings[0].check == "gpu-count"
    assert len(checks(findings, "nvlink-topology")) == 28
    assert len(checks(findings, "p2p-r")) == 28
    pair = checks(findings, "nvlink-topology")[0]
    assert (pair.subject, pair.expected, pair.observed) == ("GPU0-GPU1", "NV>=18", "NV18")


def test_hgx_a100_passes() -> None:
    findings = check_system("nvswitch-all-to-all", 8, "A100-SXM4-80GB", topo=topo(A100_SXM_TOPO))
    assert failures(findings) == []
    assert checks(findings, "nvlink-topology")[-1].expected == "NV>=12"


@pytest.mark.parametrize("model", ["A100-SXM4-80GB", None])
def test_azure_a100_nvlink_status_passes(model: str | None) -> None:
    findings = check_system("nvswitch-all-to-all", 8, model, nvlink=nvlink(A100_NVLINK))
    assert [f for f in findings if f.severity != "ok"] == []
    links = checks(findings, "nvlink-links")
    assert [f.subject for f in links] == [f"GPU{i}" for i in range(8)]
    assert links[0].expected == ">=12 active links at 25 GB/s"  # model inferred when None


def test_single_gpu_nvlink_view_is_not_a_missing_gpu() -> None:
    findings = check_system("nvswitch-all-to-all", 8, "A100-SXM4-80GB",
                            nvlink=nvlink(A100_GPU7_NVLINK))
    assert failures(findings) == []
    assert [f.subject for f in checks(findings, "nvlink-links")] == ["GPU7"]


def test_h100_pcie_bridged_pair_uses_12_of_18_links_by_design() -> None:
    findings = check_system("bridged-pairs", 2, "H100-PCIE-80GB", topo=topo(H100_PCIE_TOPO),
                            nvlink=nvlink(H100_PCIE_NVLINK))
    assert failures(findings) == []
    links = checks(findings, "nvlink-links")
    assert [f.severity for f in links] == ["ok", "ok"]
    assert links[0].expected == ">=12 active links at 26.562 GB/s"
    assert links[0].observed.startswith("12 active, 6 inactive")
    assert checks(findings, "nvlink-topology")[0].observed == "NV12"


def test_h100_pcie_as_nvswitch_expects_all_18_links() -> None:
    findings = check_system("nvswitch-all-to-all", 2, "H100-SXM5-80GB",
                            nvlink=nvlink(H100_PCIE_NVLINK))
    links = checks(findings, "nvlink-links")
    assert [f.severity for f in links] == ["fail", "fail"]
    assert links[0].cause == "links down: some NVLink lanes are inactive"


@pytest.mark.parametrize("capture", [ALL_SYS_TOPO, RTX4090_TOPO])
def test_pcie_only_captures_fail_bridged_pairs_with_bridge_cause(capture: str) -> None:
    failed = failures(check_system("bridged-pairs", 8, topo=topo(capture)))
    assert len(failed) == 4 and all(f.check == "nvlink-topology" for f in failed)
    assert all(BRIDGE in f.cause and "reseat the NVLink bridge" in f.fix for f in failed)


@pytest.mark.parametrize("capture", [ALL_SYS_TOPO, RTX4090_TOPO])
def test_no_nvlink_on_an_nvswitch_board_is_the_fabric_not_a_bridge(capture: str) -> None:
    """Issue 27: an HGX board has no bridges; no pair with NVLink at all is one cause, the
    NVSwitch fabric (no public capture of an HGX with its fabric down was found: a board
    showing no NVLink in `topo -m` is what one prints)."""
    failed = failures(check_system("nvswitch-all-to-all", 8, topo=topo(capture)))
    assert len(failed) == 28 and all(f.check == "nvlink-topology" for f in failed)
    assert {(f.cause, f.fix) for f in failed} == {(FABRIC_DOWN_CAUSE, FABRIC_DOWN_FIX)}
    assert all("bridge" not in f.cause + f.fix for f in failed)
    assert "nvidia-fabricmanager" in FABRIC_DOWN_FIX


def test_one_gpu_down_on_an_nvswitch_board_names_the_gpu_not_the_fabric() -> None:
    # DERIVED from the real 8x H100 capture: GPU3's row and column show SYS (its links down).
    text = (REAL / "nvidia-smi-topo-m" / "8x-h100-sxm-nv18-no-nics-spaces.txt").read_text()
    lines = []
    for line in text.splitlines():
        cells = line.split()
        if cells and re.fullmatch(r"GPU[0-7]", cells[0]) and not line[0].isspace():
            row = int(cells[0][3:])
            cells[1:9] = ["SYS" if (row == 3 or col == 3) and cell == "NV18" else cell
                          for col, cell in enumerate(cells[1:9])]
            line = "    ".join(cells)
        lines.append(line)
    failed = failures(check_system("nvswitch-all-to-all", 8, "H100-SXM5-80GB",
                                   topo=parse_topo("\n".join(lines))))
    assert {f.subject for f in failed} == {f"GPU{min(3, g)}-GPU{max(3, g)}"
                                           for g in range(8) if g != 3}
    assert {f.cause for f in failed} == {NVSWITCH_CAUSE}
    assert "bridge" not in NVSWITCH_CAUSE + NVSWITCH_FIX


def test_rtx4090_named_as_bridged_fails_the_profile_too() -> None:
    findings = check_system("bridged-pairs", 8, "RTX-4090", topo=topo(RTX4090_TOPO))
    profile = checks(findings, "profile")[0]
    assert profile.severity == "fail"
    assert "has no NVLink bridge" in profile.observed


def test_all_inactive_nvlink_fails_bridged_pairs() -> None:
    findings = check_system("bridged-pairs", 2, "A100-PCIE-40GB", nvlink=nvlink(INACTIVE_NVLINK))
    failed = failures(findings)
    assert [f.subject for f in failed] == ["GPU0", "GPU1"]
    assert all(f.check == "nvlink-links" and BRIDGE in f.cause for f in failed)
    assert failed[0].observed == "all links inactive"


def test_empty_nvlink_output_fails_an_nvlink_profile() -> None:
    findings = check_system("bridged-pairs", 2, nvlink=nvlink(EMPTY_NVLINK))
    failed = failures(findings)
    assert [(f.check, f.subject) for f in failed] == [("nvlink-links", "node")]


@pytest.mark.parametrize(
    ("name", "mode"),
    [("autodl-2x-rtx2080ti-p2p-p-NS.txt", "p"),
     ("rtx3060-plus-p100-pcie-phb-p2p-r-NS-legend-omitted-UNRESOLVED-SOURCE.txt", "r")],
)
def test_ns_p2p_fails_with_its_meaning(name: str, mode: str) -> None:
    findings = check_system("bridged-pairs", 2, p2p=[p2p(name, mode)])
    failed = failures(findings)
    assert len(failed) == 1
    finding = failed[0]
    assert (finding.check, finding.subject, finding.observed) == (f"p2p-{mode}", "GPU0-GPU1", "NS")
    assert finding.cause.startswith("NS (Not supported)")
    assert "driver" in finding.fix and "ACSCtl" in finding.fix


def test_cns_p2p_names_the_chipset() -> None:
    text = ("        GPU0    GPU1    GPU2    GPU3\n"
            " GPU0   X       CNS     OK      OK\n"
            " GPU1   CNS     X       OK      OK\n"
            " GPU2   OK      OK      X       GNS\n"
            " GPU3   OK      OK      OK      X\n")
    findings = check_system("bridged-pairs", 4, p2p=[parse_p2p(text, "r")])
    failed = failures(findings)
    assert [f.subject for f in failed] == ["GPU0-GPU1", "GPU2-GPU3"]
    assert "chipset" in failed[0].cause.lower() and "ACS" in failed[0].cause
    assert failed[1].observed == "GPU2->GPU3 GNS, back OK"
    assert "GPU SKU" in failed[1].cause


def test_wrong_gpu_count_fails_first_and_skips_pair_checks() -> None:
    findings = check_system("direct-all-to-all", 8, "A100-SXM4-40GB", topo=topo(POLARIS_TOPO))
    first = findings[0]
    assert (first.check, first.severity) == ("gpu-count", "fail")
    assert first.observed == "topo -m: 4"
    assert "missing from the bus" in first.cause and "lspci" in first.fix
    assert not any(f.check.startswith(PAIR_CHECKS) for f in findings)
    assert checks(findings, "pair-checks")[0].severity == "warn"


def test_polaris_with_right_count_passes_direct_mesh() -> None:
    findings = check_system("direct-all-to-all", 4, "A100-SXM4-40GB", topo=topo(POLARIS_TOPO))
    assert failures(findings) == []
    assert checks(findings, "nvlink-topology")[0].expected == "NV>=4"


def test_more_gpus_than_declared_fails_the_count() -> None:
    findings = check_system("nvswitch-all-to-all", 4, topo=topo(H100_TOPO))
    assert findings[0].severity == "fail" and "more GPUs" in findings[0].cause
    assert not any(f.check.startswith(PAIR_CHECKS) for f in findings)


def test_p2p_with_fewer_gpus_than_topo_fails_the_count() -> None:
    findings = check_system("nvswitch-all-to-all", 8, "H100-SXM5-80GB", topo=topo(H100_TOPO),
                            p2p=[p2p("autodl-2x-rtx2080ti-p2p-p-NS.txt", "p")])
    assert findings[0].severity == "fail"
    assert findings[0].observed == "topo -m: 8; topo -p2p p: 2"


@pytest.mark.parametrize(
    ("count", "kwargs"),
    [
        (8, {"topo": topo(ALL_SYS_TOPO)}),
        (8, {"topo": topo(RTX4090_TOPO)}),
        (2, {"nvlink": nvlink(INACTIVE_NVLINK)}),
        (2, {"p2p": [p2p("autodl-2x-rtx2080ti-p2p-p-NS.txt", "p")]}),
        (2, {"nvlink": nvlink(H100_PCIE_NVLINK), "topo": topo(H100_PCIE_TOPO)}),
        (8, {"topo": topo(H100_TOPO)}),
    ],
)
def test_same_captures_pass_pcie_only(count: int, kwargs: dict) -> None:
    findings = check_system("pcie-only", count, **kwargs)
    assert [f.severity for f in findings] == ["ok", "ok"]
    assert [f.check for f in findings] == ["gpu-count", "profile"]


def test_pcie_only_still_fails_a_missing_gpu() -> None:
    findings = check_system("pcie-only", 8, topo=topo(POLARIS_TOPO))
    assert findings[0].severity == "fail"


def test_min_links_overrides_the_model() -> None:
    capture = topo(A100_SXM_TOPO)
    assert failures(check_system("nvswitch-all-to-all", 8, "A100-SXM4-80GB", min_links=12,
                                 topo=capture)) == []
    failed = failures(check_system("nvswitch-all-to-all", 8, "A100-SXM4-80GB", min_links=18,
                                   topo=capture))
    assert len(failed) == 28
    assert failed[0].expected == "NV>=18"
    assert failed[0].cause == "links down: some NVLink lanes are inactive"


def test_unknown_model_accepts_any_nvlink_count() -> None:
    aws = topo("aws-p3.8xlarge-4x-v100-sxm2-nv1-nv2.txt")
    findings = check_system("direct-all-to-all", 4, topo=aws)
    assert failures(findings) == []
    assert checks(findings, "nvlink-topology")[0].expected == "NV>=1"


def test_slow_link_is_named() -> None:
    text = (REAL / "nvidia-smi-nvlink" / H100_PCIE_NVLINK).read_text()
    slow = text.replace("Link 7: 26.562 GB/s", "Link 7: 13.281 GB/s", 1)
    findings = check_system("bridged-pairs", 2, "H100-PCIE-80GB", nvlink=parse_nvlink(slow))
    failed = failures(findings)
    assert [(f.subject, f.observed) for f in failed] == [("GPU0 link 7", "13.281 GB/s")]
    assert failed[0].cause == "link trained at reduced speed"


def test_model_mismatch_is_reported() -> None:
    findings = check_system("bridged-pairs", 2, "A100-PCIE-40GB", nvlink=nvlink(H100_PCIE_NVLINK))
    model = checks(findings, "gpu-model")[0]
    assert model.severity == "fail" and "H100-PCIE-80GB" in model.observed


def test_finding_json_and_validation() -> None:
    finding = Finding("gpu-count", "node", "8 GPUs", "topo -m: 8", "ok", "", "")
    assert finding.to_json() == {"check": "gpu-count", "subject": "node",
                                 "expected": "8 GPUs", "observed": "topo -m: 8",
                                 "severity": "ok", "cause": "", "fix": ""}
    with pytest.raises(ValueError):
        Finding("x", "node", "", "", "bad", "", "")


def test_unknown_profile_or_model_is_refused() -> None:
    with pytest.raises(GpuinfraError, match="unknown topology profile"):
        check_system("ring", 8)
    with pytest.raises(GpuinfraError, match="H100-SXM5-80GB"):
        check_system("nvswitch-all-to-all", 8, "H100-SXM5-80")
