"""Plan tests of the `fabric_manager` role: NVSwitch hosts get it, every other host nothing."""

from __future__ import annotations

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra_deploy.ops.apt import keyring_script
from gpuinfra_deploy.ops.cuda_repo import CUDA_KEYRING
from gpuinfra_roles.fabric_manager import fabric_manager
from tests.plan.harness import plan
from tests.plan.test_nvidia_driver_plan import DISTROS, converged, fresh, uploads

NVSWITCH = {"ssh_hostname": "10.0.0.5", "gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
            "gpu_topology": "nvswitch-all-to-all"}
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
FM_VERSIONS = {
    "debian-12": "535.261.03-1",  # NVIDIA's CUDA repository naming
    "ubuntu-22.04": "535.309.01-0ubuntu0.22.04.1",
    "ubuntu-24.04": "535.309.01-0ubuntu0.24.04.1",
}


@pytest.mark.parametrize(("model", "count", "topology"), [
    ("H100-PCIE-80GB", 2, "bridged-pairs"), ("H100-PCIE-80GB", 2, "pcie-only"),
    ("A100-SXM4-80GB", 4, "direct-all-to-all"), ("L40S", 4, None), (None, None, None)])
@pytest.mark.parametrize("distro", DISTROS)
def test_no_operation_at_all_without_nvswitch(distro, model, count, topology):
    data = {"ssh_hostname": "10.0.0.5", "gpu_model": model, "gpu_count": count,
            "gpu_topology": topology}
    assert plan(fabric_manager, fresh(distro), data).ops == ()


@pytest.mark.parametrize("distro", DISTROS)
def test_nvswitch_host_gets_fm_at_the_drivers_version(distro):
    result = plan(fabric_manager, fresh(distro), NVSWITCH)
    install = result.op("Install NVIDIA Fabric Manager").commands[-1]
    assert install.endswith(f" nvidia-fabricmanager-535={FM_VERSIONS[distro]}")
    assert result.op("Hold NVIDIA Fabric Manager").commands == (
        "apt-mark hold nvidia-fabricmanager-535",)
    # The driver is not loaded on a fresh host: enabled now, started at boot.
    assert result.op("Start Fabric Manager at boot").commands == (
        "systemctl enable nvidia-fabricmanager.service",)


def test_debian_takes_fm_from_nvidias_cuda_repository_pinned_low():
    result = plan(fabric_manager, fresh("debian-12"), NVSWITCH)
    assert result.op("signing key").commands == (
        keyring_script(f"{CUDA}/3bf863cc.pub", CUDA_KEYRING, SIGNING_KEYS["cuda"]),)
    assert uploads(result.op("Add NVIDIA's CUDA repository"))
    assert uploads(result.op("Take only Fabric Manager from the CUDA repository"))
    assert result.op("Refresh apt after adding the CUDA repository").commands == (
        "apt-get update",)


@pytest.mark.parametrize("distro", ["ubuntu-22.04", "ubuntu-24.04"])
def test_ubuntu_takes_fm_from_the_archive(distro):
    names = [op.name for op in plan(fabric_manager, fresh(distro), NVSWITCH).ops]
    assert not [n for n in names if "CUDA" in n]


def test_a_site_mirror_replaces_the_cuda_repository():
    mirror = "http://mirror.example.internal/cuda/debian12/x86_64"
    data = {**NVSWITCH, "fabric_manager_repo_url": mirror}
    result = plan(fabric_manager, fresh("debian-12"), data)
    assert f"curl -fsSL {mirror}/3bf863cc.pub " in result.op("signing key").commands[0]


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_nvswitch_host_plans_no_command(distro):
    result = plan(fabric_manager, converged(distro), NVSWITCH)
    assert result.commands == [], result.changing
    assert result.op("Run Fabric Manager").commands == ()  # driver loaded: kept running


def test_converged_check_can_fail_on_a_stopped_service():
    facts = converged("ubuntu-24.04")
    facts["systemd.SystemdStatus"]["*"] = {**facts["systemd.SystemdStatus"]["*"],
                                           "nvidia-fabricmanager.service": False}
    result = plan(fabric_manager, facts, NVSWITCH)
    assert [op.commands for op in result.changing] == [
        ("systemctl start nvidia-fabricmanager.service",)]


def test_disabled_by_data_is_skipped_with_a_warning(caplog):
    data = {**NVSWITCH, "fabric_manager_enabled": False}
    assert plan(fabric_manager, fresh("debian-12"), data).ops == ()
    assert "fabric_manager_enabled = False" in caplog.text


def test_a_version_other_than_the_drivers_is_refused():
    data = {**NVSWITCH, "fabric_manager_version": "535.274.02-1"}
    with pytest.raises(GpuinfraError, match="does not match the driver 535.261.03-1"):
        plan(fabric_manager, fresh("debian-12"), data)
