"""Plan tests of Debian 13 (trixie) as a target: the driver a trixie GPU worker gets per branch
(the archive's names and versions, trixie non-free Packages 2026-12-07), what trixie cannot give
(570/580, open modules and MPS for 535, Fabric Manager and DCGM without a repository) refused
before any change, Slurm 24.11, and every per-distribution table knowing the release.

Facts: gpuinfra_deploy/assumed_facts/debian-13.json and gpu-debian-13.json (assumed, not yet
recorded on the trixie lab: tests/plan/facts/INDEX.md).
"""

from __future__ import annotations

import pytest
from pyinfra.api.exceptions import PyinfraError

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.drivers import BRANCH_SOURCES, supported_branches
from gpuinfra.slurm.versions import SLURM_VERSIONS
from gpuinfra_roles.fabric_manager import fabric_manager
from gpuinfra_roles.nvidia_driver import nvidia_driver
from tests.plan.harness import plan
from tests.plan.test_driver_branches_plan import HGX, pinned_names
from tests.plan.test_nvidia_driver_plan import NODE, fresh

TRIXIE = "debian-13"
TESLA_535 = "535.274.02-1~deb13u1"  # source nvidia-graphics-drivers-tesla-535 (non-free)
DEFAULT_550 = "550.163.01-2"  # source nvidia-graphics-drivers (non-free)
PERSISTENCED = "550.163.01-1"  # contrib; serves both branches


def pin_file(result) -> str:
    op = result.op("Pin the NVIDIA driver")
    return "\n".join(str(c) for c in op.commands)


def test_a_trixie_worker_gets_535_under_the_tesla_535_names():
    result = plan(nvidia_driver, fresh(TRIXIE), {**NODE, "driver_branch": "535"})
    assert pinned_names(result) == [
        f"nvidia-tesla-535-kernel-dkms={TESLA_535}", f"firmware-nvidia-tesla-535-gsp={TESLA_535}",
        f"nvidia-tesla-535-smi={TESLA_535}", f"libnvidia-tesla-535-cuda1={TESLA_535}",
        f"libnvidia-tesla-535-cfg1={TESLA_535}", f"nvidia-persistenced={PERSISTENCED}"]


def test_a_trixie_worker_gets_550_under_debians_plain_names():
    result = plan(nvidia_driver, fresh(TRIXIE), {**NODE, "driver_branch": "550"})
    assert pinned_names(result) == [
        f"nvidia-kernel-dkms={DEFAULT_550}", f"firmware-nvidia-gsp={DEFAULT_550}",
        f"nvidia-smi={DEFAULT_550}", f"libcuda1={DEFAULT_550}",
        f"nvidia-persistenced={PERSISTENCED}"]


def test_the_pins_hold_the_source_that_built_each_branch():
    from gpuinfra.knowledge.packages import driver_packages

    assert driver_packages(TRIXIE, "535", TESLA_535).pins == {
        "src:nvidia-graphics-drivers-tesla-535": TESLA_535, "nvidia-persistenced": PERSISTENCED}
    assert driver_packages(TRIXIE, "550", DEFAULT_550, open_modules=True).pins == {
        "src:nvidia-graphics-drivers": DEFAULT_550,
        "src:nvidia-open-gpu-kernel-modules": DEFAULT_550, "nvidia-persistenced": PERSISTENCED}


def test_a_trixie_worker_enables_contrib_non_free_and_firmware_in_debian_sources():
    result = plan(nvidia_driver, fresh(TRIXIE), {**NODE, "driver_branch": "550"})
    path = "/etc/apt/sources.list.d/debian.sources"
    assert result.op(f"Enable contrib non-free non-free-firmware in {path}").commands
    assert result.op("Install kernel headers").commands[-1].endswith("linux-headers-amd64")


@pytest.mark.parametrize("branch", ["570", "580"])
def test_branches_trixie_lacks_are_refused_saying_what_it_carries(branch):
    with pytest.raises((GpuinfraError, PyinfraError)) as caught:
        plan(nvidia_driver, fresh(TRIXIE), {**NODE, "driver_branch": branch})
    message = str(caught.value)
    assert "nvidia-tesla-535-*" in message and "driver_branch = '550'" in message


def test_trixie_does_not_narrow_the_branches_other_sites_may_choose():
    assert BRANCH_SOURCES[TRIXIE] == {"535": "archive", "550": "archive"}
    assert supported_branches() == ("535", "550", "570", "580")


def test_open_modules_on_trixie_535_are_refused():
    with pytest.raises((GpuinfraError, PyinfraError), match="no open kernel modules"):
        plan(nvidia_driver, fresh(TRIXIE), {**NODE, "driver_branch": "535",
                                           "nvidia_driver_open_modules": True})


def test_fabric_manager_on_trixie_needs_a_repository_url():
    with pytest.raises((GpuinfraError, PyinfraError), match="fabric_manager_repo_url"):
        plan(fabric_manager, fresh(TRIXIE), {**HGX, "driver_branch": "550"})


def test_slurm_is_24_11_on_trixie_for_both_ends():
    from gpuinfra_roles.job_containers import DISTRO as JOBS
    from gpuinfra_roles.slurm import DISTRO as SLURM

    assert SLURM_VERSIONS[TRIXIE] == (24, 11)
    assert JOBS[TRIXIE]["slurm"] == "24.11"
    assert SLURM[TRIXIE]["nvml_plugin"] == "slurm-wlm-nvml-plugin"
    assert SLURM[TRIXIE]["mariadb_service"] == "mariadb"


def test_trixie_values_of_monitoring_and_logs():
    from gpuinfra_roles.logs import DISTRO as LOGS
    from gpuinfra_roles.monitoring import DISTRO as MONITORING

    assert MONITORING[TRIXIE]["node_exporter_web_flag"] == "--web.config.file"
    assert MONITORING[TRIXIE]["cuda_repo"] is None
    assert LOGS[TRIXIE]["units"] == "/usr/lib/systemd/system"
    assert LOGS[TRIXIE]["receiver"] == "/usr/lib/systemd/systemd-journal-remote"
    assert LOGS[TRIXIE]["limits"] is True  # systemd 257


@pytest.mark.parametrize("role", ["common", "containerd", "vfio", "nvidia_driver",
                                  "fabric_manager", "gpu_sharing", "rdma", "job_containers",
                                  "slurm", "monitoring", "logs"])
def test_every_per_distribution_table_knows_trixie(role):
    import importlib

    table = importlib.import_module(f"gpuinfra_roles.{role}").DISTRO
    assert TRIXIE in table and table[TRIXIE].keys() >= table["debian-12"].keys()

