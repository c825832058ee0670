"""The verify suite's pure helpers (gpuinfra_verify/expect.py), without a lab."""

from __future__ import annotations

import json

import pytest

from gpuinfra.platforms import node_address
from gpuinfra.spec import SpecInvalid
from gpuinfra.verdicts import Finding
from gpuinfra_verify.expect import (
    NO_SMI,
    family,
    format_failures,
    format_finding,
    host_of,
    missing_hosts_entries,
    site_from_json,
    smi_failure,
    ssh_target,
    sysctl_mismatches,
)

BRIDGE = Finding("nvlink-topology", "GPU0-GPU1", "NV>=12", "PIX", "fail",
                 "NVLink bridge not detected", "reseat the bridge")
P2P_OK = Finding("p2p-r", "GPU0-GPU1", "OK", "OK", "ok")
P2P_NS = Finding("p2p-w", "GPU0-GPU1", "OK", "NS", "fail", "NS (Not supported): ...", "check")


def test_ssh_target_from_pyinfra_data() -> None:
    target = ssh_target("lab-worker1", {
        "ssh_hostname": "10.89.0.11", "ssh_user": "root", "ssh_port": 2222,
        "ssh_key": "/k/id", "ssh_strict_host_key_checking": "yes",
        "ssh_known_hosts_file": "/lab/known_hosts",
    })
    assert target.address == "10.89.0.11" and target.port == 2222
    assert target.host_key_policy == "yes" and target.known_hosts_path == "/lab/known_hosts"


def test_ssh_target_defaults_to_the_name_and_pyinfra_s_accept_new() -> None:
    target = ssh_target("gpu01.example", {})
    assert target.address == "gpu01.example" and target.host_key_policy == "accept-new"
    assert target.known_hosts_path.endswith("/.ssh/known_hosts")


@pytest.mark.parametrize(("data", "address"), [
    ({"node_address": "10.0.0.5", "ssh_hostname": "10.0.0.9"}, "10.0.0.5"),
    ({"ssh_hostname": "10.0.0.9"}, "10.0.0.9"),
    ({"ssh_hostname": "gpu01.example"}, None),
    ({}, None),
])
def test_node_address(data: dict, address: str | None) -> None:
    assert node_address(data) == address


def test_missing_hosts_entries() -> None:
    text = "127.0.0.1 localhost\n# 10.0.0.2 b\n10.0.0.1 a a.example  # head\n10.0.0.3 c\n"
    expected = {"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.9"}
    assert missing_hosts_entries(expected, text) == ["10.0.0.2 b", "10.0.0.9 c"]


def test_sysctl_mismatches_compare_words() -> None:
    expected = {"a": 1, "b": "4096 87380", "c": 5}
    observed = {"a": "1", "b": "4096\t87380", "c": ""}
    assert sysctl_mismatches(expected, observed) == ["c: expected 5, observed nothing"]


def test_smi_failure_says_what_to_do() -> None:
    assert smi_failure("nvidia-smi topo -m", 127, "sh: nvidia-smi: not found") == NO_SMI
    text = smi_failure("nvidia-smi topo -m", 9, "\nNVIDIA-SMI has failed because it couldn't "
                       "communicate with the NVIDIA driver.\n")
    assert text.startswith("`nvidia-smi topo -m` exited 9: the NVIDIA driver is not loaded")
    assert "couldn't communicate" in text
    assert "unknown exit code" in smi_failure("nvidia-smi", 42, "")


def test_family_picks_its_checks() -> None:
    findings = [BRIDGE, P2P_OK, P2P_NS]
    assert family(findings, "p2p") == [P2P_OK, P2P_NS]
    assert family(findings, "nvlink-links") == []


def test_failure_message_lists_every_failed_finding() -> None:
    assert format_finding(P2P_OK) == "p2p-r GPU0-GPU1: expected OK, observed OK"
    message = format_failures("lab-worker3", [BRIDGE, P2P_OK, P2P_NS])
    assert message.splitlines() == [
        "lab-worker3: 2 failed check(s)",
        "nvlink-topology GPU0-GPU1: expected NV>=12, observed PIX",
        "  cause: NVLink bridge not detected",
        "  fix: reseat the bridge",
        "p2p-w GPU0-GPU1: expected OK, observed NS",
        "  cause: NS (Not supported): ...",
        "  fix: check",
    ]
    assert format_failures("n", [P2P_OK]) == ""


@pytest.mark.parametrize(("test_id", "host"), [
    ("gpuinfra_verify/test_gpu.py::test_p2p[lab-worker3]", "lab-worker3"),
    ("test_p2p[gpu01.example]@gpu01.example", "gpu01.example"),
    ("gpuinfra_verify/test_gpu.py::test_p2p", None),
])
def test_host_of(test_id: str, host: str | None) -> None:
    assert host_of(test_id) == host


def _inventory_json(**worker: object) -> str:
    hosts = [
        {"name": "head1", "groups": ["head"],
         "data": {"cluster_name": "t", "node_address": "10.0.0.1"}},
        {"name": "gpu1", "groups": ["workers"],
         "data": {"cluster_name": "t", "gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
                  "gpu_topology": "bridged-pairs", **worker}},
    ]
    return json.dumps({"hosts": hosts, "duplicates": []})


def test_site_from_json_builds_the_spec() -> None:
    site = site_from_json("inventory/t.py", _inventory_json(ssh_hostname="10.0.0.2"))
    gpus = site.spec.node("gpu1").gpus
    assert gpus is not None and gpus.count == 2 and gpus.topology.name == "bridged-pairs"
    assert site.spec.node("head1").gpus is None
    assert site.target("gpu1").address == "10.0.0.2"


def test_site_from_json_rejects_an_invalid_spec() -> None:
    with pytest.raises(SpecInvalid):
        site_from_json("inventory/t.py", _inventory_json(gpu_count=3))


def test_driver_packages_are_judged_by_their_branch() -> None:
    """SYNTHESIZED lines in dpkg-query's format (`${Package} ${Version} ${db:Status-Abbrev}`);
    the verify suite judges the real list on every lab GPU worker (test_driver.py)."""
    from gpuinfra_verify.expect import driver_package_problems

    lines = ("nvidia-driver 535.261.03-1 ii \n"
             "nvidia-kernel-dkms 535.261.03-1 ii \n"
             "nvidia-persistenced 535.171.04-1 ii \n"
             "libnvidia-container1 1.17.8-1 ii \n"
             "nvidia-container-toolkit 1:1.17.8-1 ii \n"
             "nvidia-smi 550.163.01-1 rc \n")  # removed, config left: not installed
    assert driver_package_problems(lines, "535") == []
    assert driver_package_problems(lines, "550") == [
        "nvidia-driver 535.261.03-1: not of branch 550",
        "nvidia-kernel-dkms 535.261.03-1: not of branch 550",
        "nvidia-persistenced 535.171.04-1: not of branch 550"]
    newer = lines + "libnvidia-compute-580 1:580.95.05-0ubuntu1 ii \n"
    assert driver_package_problems(newer, "535") == [
        "libnvidia-compute-580 1:580.95.05-0ubuntu1: not of branch 535"]


def test_driver_packages_are_judged_only_when_built_from_the_drivers_source() -> None:
    """A trixie lab worker's list with the source column (lines from `dpkg-query -W -f
    '${Package} ${Version} ${db:Status-Abbrev} ${source:Package}\\n'`, lab-worker1 on Debian 13,
    2026-12-07): nvidia-modprobe and nvidia-persistenced come from sources of their own,
    versioned apart from the driver, and serve the 535 branch; a driver binary of another
    branch is still found."""
    from gpuinfra_verify.expect import driver_package_problems

    trixie = ("libnvidia-tesla-535-cuda1 535.274.02-1~deb13u1 ii  "
              "nvidia-graphics-drivers-tesla-535\n"
              "nvidia-tesla-535-kernel-dkms 535.274.02-1~deb13u1 ii  "
              "nvidia-graphics-drivers-tesla-535\n"
              "nvidia-modprobe 570.133.07-1 ii  nvidia-modprobe\n"
              "nvidia-persistenced 550.163.01-1 ii  nvidia-persistenced\n")
    assert driver_package_problems(trixie, "535") == []
    assert driver_package_problems(trixie, "550") == [
        "libnvidia-tesla-535-cuda1 535.274.02-1~deb13u1: not of branch 550",
        "nvidia-tesla-535-kernel-dkms 535.274.02-1~deb13u1: not of branch 550"]
    pulled = trixie + "nvidia-kernel-dkms 550.163.01-2 ii  nvidia-graphics-drivers\n"
    assert driver_package_problems(pulled, "535") == [
        "nvidia-kernel-dkms 550.163.01-2: not of branch 535"]
