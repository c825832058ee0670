"""`nvidia-smi -q` Fabric sections: the parser on real captures, and the fabric verdicts.

Inputs marked DERIVED are real captures with a named edit; SYNTHESIZED ones are built in the
test (no public GB200 `nvidia-smi -q` with a registered fabric was found) in the format of the
real captures, with the Fabric fields newer drivers print (CliqueId, ClusterUUID, Health).
"""

from __future__ import annotations

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.fabric import parse_fabric
from gpuinfra.verdicts import check_system, failures
from tests.conftest import REAL

SMI_Q = REAL / "nvidia-smi-q"
H100_Q = SMI_Q / "8x-h100-80gb-hbm3-bare-metal-drv535.161.08-full-q.txt"
A10_Q = SMI_Q / "a10-passthrough-vm-drv535.129.03-full-q.txt"
ECC_Q = SMI_Q / "hpe-dl380-gen11-2x-a100-pcie-40gb-q-d-ECC.txt"


def h100_text() -> str:
    return H100_Q.read_text()


def gb200_q(states: list[tuple[str, str]], cliques: list[str], bandwidth: str = "Full",
            summary: str = "Healthy") -> str:
    """SYNTHESIZED `nvidia-smi -q` of one GB200 compute tray (4 GPUs)."""
    out = ["", "==============NVSMI LOG==============", "",
           "Driver Version                            : 580.159.03", "",
           "Attached GPUs                             : 4"]
    for index, ((state, status), clique) in enumerate(zip(states, cliques, strict=True)):
        out += [f"GPU 00000008:0{index}:00.0",
                "    Product Name                          : NVIDIA GB200",
                "    Fabric",
                f"        State                             : {state}",
                f"        Status                            : {status}",
                f"        CliqueId                          : {clique}",
                "        ClusterUUID                       : 6f1e3c52-0d2c-4f6e-9a51-2b7d0f4c1a90",
                "        Health",
                f"            Summary                       : {summary}",
                f"            Bandwidth                     : {bandwidth}",
                "            Route Recovery in progress    : False",
                "            Route Unhealthy               : False",
                "            Access Timeout Recovery       : False",
                "    Processes                             : None", ""]
    return "\n".join(out)


UP = ("Completed", "Success")


def test_real_h100_capture_parses_every_gpu_fabric():
    report = parse_fabric(h100_text())
    assert len(report.gpus) == 8
    gpu = report.gpus["GPU0"]
    assert (gpu.bus_id, gpu.name) == ("00000000:19:00.0", "NVIDIA H100 80GB HBM3")
    assert {(g.fabric.state, g.fabric.status) for g in report.gpus.values()} == {UP}


def test_older_gpus_print_na_and_filtered_queries_have_no_fabric():
    a10 = parse_fabric(A10_Q.read_text()).gpus["GPU0"]
    assert (a10.fabric.state, a10.fabric.status) == ("N/A", "N/A")
    ecc = parse_fabric(ECC_Q.read_text())
    assert [g.fabric for g in ecc.gpus.values()] == [None, None]


def test_other_text_is_refused():
    with pytest.raises(ParseError, match="NVSMI LOG"):
        parse_fabric((REAL / "nvidia-smi-topo-m" / "8x-h100-sxm-nv18-no-nics-spaces.txt")
                     .read_text())


def test_hgx_h100_fabric_passes():
    findings = check_system("nvswitch-all-to-all", 8, "H100-SXM5-80GB",
                            fabric=parse_fabric(h100_text()))
    assert failures(findings) == []
    fabric = [f for f in findings if f.check == "fabric"]
    assert len(fabric) == 8 and fabric[0].observed == "State Completed, Status Success"
    assert findings[0].observed == "nvidia-smi -q: 8"


def test_gpu_not_registered_with_the_fabric_fails():
    # DERIVED: the second GPU's fabric still training (State In Progress, Status N/A).
    text = h100_text()
    first = text.index("        State                             : Completed")
    second = text.index("        State                             : Completed", first + 1)
    text = (text[:second] + text[second:].replace("Completed", "In Progress", 1)
            .replace("Status                            : Success",
                     "Status                            : N/A", 1))
    findings = check_system("nvswitch-all-to-all", 8, "H100-SXM5-80GB", fabric=parse_fabric(text))
    failed = failures(findings)
    assert [(f.check, f.subject) for f in failed] == [("fabric", "GPU1")]
    assert failed[0].observed == "State In Progress, Status N/A"
    assert "nvidia-fabricmanager" in failed[0].fix


def test_fabric_is_not_judged_before_nvlink_4_or_without_switches():
    a10 = parse_fabric(A10_Q.read_text())
    assert [f.check for f in check_system("pcie-only", 1, "A10", fabric=a10)] == \
        ["gpu-count", "gpu-model", "profile"]
    na = h100_text().replace("Completed", "N/A").replace(": Success", ": N/A")  # DERIVED
    findings = check_system("nvswitch-all-to-all", 8, "A100-SXM4-80GB", fabric=parse_fabric(na))
    assert not [f for f in findings if f.check == "fabric"]


def test_gb200_tray_in_one_domain_passes_nvlink_domain():
    text = gb200_q([UP] * 4, ["32766"] * 4)
    findings = check_system("nvlink-domain", 4, "GB200-186GB", fabric=parse_fabric(text))
    assert failures(findings) == []
    domain = [f for f in findings if f.check == "fabric-domain"]
    assert domain[0].severity == "ok" and "CliqueId 32766" in domain[0].observed
    gpu = [f for f in findings if f.check == "fabric"][0]
    assert gpu.expected == "State Completed, Status Success, Health Bandwidth Full"


def test_gb200_gpu_in_another_clique_fails_the_domain():
    text = gb200_q([UP] * 4, ["32766", "32766", "32766", "7"])
    failed = failures(check_system("nvlink-domain", 4, "GB200-186GB", fabric=parse_fabric(text)))
    assert [(f.check, f.subject) for f in failed] == [("fabric-domain", "node")]
    assert "CliqueId 7" in failed[0].observed and "partition" in failed[0].fix


def test_gb200_degraded_bandwidth_fails_each_gpu():
    text = gb200_q([UP] * 4, ["32766"] * 4, bandwidth="Degraded", summary="Limited Capacity")
    failed = failures(check_system("nvlink-domain", 4, "GB200-186GB", fabric=parse_fabric(text)))
    assert [f.subject for f in failed] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert "Summary Limited Capacity" in failed[0].observed
    assert "NVLink domain" in failed[0].cause


def test_nvlink_domain_needs_a_domain_model_and_its_tray_size():
    findings = check_system("nvlink-domain", 8, "H100-SXM5-80GB")
    assert "not built into rack-scale NVLink domains" in findings[-1].observed
    findings = check_system("nvlink-domain", 8, "GB200-186GB")
    assert "hold 4 GPUs, not 8" in findings[-1].observed
