"""Plan tests of the driver branches beyond 535, per distribution, and of the check that the
pinned versions are ones the host's apt lists (read before any change).

apt layers (tests/plan/facts/): apt-debian-12 is the real `apt-cache policy` of bookworm
(tests/fixtures/apt/INDEX.md); apt-ubuntu-24.04-535-transitional-only-SYNTHESIZED is what noble
shows once its pockets list only the transitional 535 build (its _comment says from what).
"""

from __future__ import annotations

import pytest
from pyinfra.api.exceptions import PyinfraError

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.drivers import SUPPORTED_BRANCHES
from gpuinfra.knowledge.packages import DRIVER_VERSIONS, SIGNING_KEYS
from gpuinfra_deploy.ops.apt import keyring_script
from gpuinfra_deploy.ops.cuda_repo import CUDA_KEYRING
from gpuinfra_roles.fabric_manager import fabric_manager
from gpuinfra_roles.nvidia_driver import nvidia_driver
from tests.plan.harness import plan
from tests.plan.test_nvidia_driver_plan import DISTROS, NODE, fresh, uploads

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
HGX = {"ssh_hostname": "10.0.0.5", "gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
       "gpu_topology": "nvswitch-all-to-all"}
B200 = {**HGX, "gpu_model": "B200-180GB"}
BRANCHES = ["535", "550", "570", "580"]


def install_line(result) -> str:
    return result.op("Install the NVIDIA driver").commands[-1]


def pinned_names(result) -> list[str]:
    line = install_line(result).split("--allow-change-held-packages ", 1)[1]
    return [arg.strip("'") for arg in line.split()]


# ----------------------------------------------------------------------------- every branch

def test_every_distribution_installs_the_same_branches():
    assert {d: SUPPORTED_BRANCHES[d] for d in DISTROS} == {d: tuple(BRANCHES) for d in DISTROS}


@pytest.mark.parametrize("branch", BRANCHES)
@pytest.mark.parametrize("distro", DISTROS)
def test_each_branch_installs_its_packages_at_its_version(distro, branch):
    result = plan(nvidia_driver, fresh(distro), {**NODE, "driver_branch": branch})
    version = DRIVER_VERSIONS[(distro, branch)]
    names = pinned_names(result)
    if distro == "debian-12":
        expected = ["nvidia-kernel-dkms", "firmware-nvidia-gsp", "nvidia-smi", "libcuda1"]
        assert [n.split("=")[0] for n in names] == [*expected, "nvidia-persistenced"]
        assert all(n.endswith(f"={version}") for n in names[:4])
    else:
        assert names == [f"nvidia-headless-{branch}-server={version}",
                         f"nvidia-utils-{branch}-server={version}",
                         f"nvidia-compute-utils-{branch}-server={version}"]
    assert version.startswith(f"{branch}.")


@pytest.mark.parametrize("branch", ["550", "570", "580"])
def test_debian_takes_later_branches_from_nvidias_repository(branch):
    result = plan(nvidia_driver, fresh("debian-12"), {**NODE, "driver_branch": branch})
    key = result.op("signing key").commands[0]
    assert key == keyring_script(f"{CUDA}/3bf863cc.pub", CUDA_KEYRING, SIGNING_KEYS["cuda"])
    assert uploads(result.op("Add NVIDIA's CUDA repository (the driver and Fabric Manager)"))
    assert uploads(result.op("Take only the driver and Fabric Manager from the CUDA repository"))
    # NVIDIA's repository builds nvidia-persistenced with the driver (same version).
    assert f"nvidia-persistenced={DRIVER_VERSIONS[('debian-12', branch)]}" in pinned_names(result)
    names = [op.name for op in result.ops]
    assert names.index(next(n for n in names if "Add NVIDIA's CUDA" in n)) < \
        names.index(next(n for n in names if "Install the NVIDIA driver" in n))


@pytest.mark.parametrize("distro", DISTROS)
def test_535_and_ubuntu_branches_come_from_the_archive(distro):
    for branch in BRANCHES if distro != "debian-12" else ["535"]:
        names = [op.name for op in plan(nvidia_driver, fresh(distro),
                                        {**NODE, "driver_branch": branch}).ops]
        assert not [n for n in names if "CUDA" in n], (distro, branch)


def test_a_site_mirror_of_the_cuda_repository_is_used_for_the_driver():
    mirror = "http://mirror.example.internal/cuda/debian12/x86_64"
    data = {**NODE, "driver_branch": "570", "nvidia_driver_repo_url": mirror}
    result = plan(nvidia_driver, fresh("debian-12"), data)
    assert f"curl -fsSL {mirror}/3bf863cc.pub " in result.op("signing key").commands[0]


def test_a_branch_no_distribution_can_install_is_refused_by_the_spec():
    with pytest.raises(PyinfraError, match="driver_branch = '590': a real branch, but the roles "
                                           "cannot install it"):
        plan(nvidia_driver, fresh("ubuntu-24.04"), {**NODE, "driver_branch": "590"})


# ----------------------------------------------------------------------------- open modules

@pytest.mark.parametrize("distro", ["ubuntu-22.04", "ubuntu-24.04"])
def test_blackwell_gets_ubuntus_open_metapackage(distro):
    result = plan(nvidia_driver, fresh(distro), {**B200, "driver_branch": "570"})
    version = DRIVER_VERSIONS[(distro, "570")]
    assert pinned_names(result)[0] == f"nvidia-headless-570-server-open={version}"


def test_blackwell_on_debian_gets_the_cuda_repositorys_open_modules():
    result = plan(nvidia_driver, fresh("debian-12"), {**B200, "driver_branch": "570"})
    assert pinned_names(result)[0] == "nvidia-kernel-open-dkms=570.211.01-1"


def test_debians_own_open_modules_on_535():
    """bookworm contrib builds nvidia-open-kernel-dkms at the driver's version (real apt-cache
    policy, tests/fixtures/apt): asked for, it replaces nvidia-kernel-dkms, and the real apt
    layer lists it."""
    data = {**HGX, "nvidia_driver_open_modules": True}
    result = plan(nvidia_driver, fresh("debian-12", "apt-debian-12"), data)
    assert pinned_names(result)[0] == "nvidia-open-kernel-dkms=535.261.03-1"


def test_blackwell_without_open_modules_is_refused():
    """Refused at the gate (gpuinfra.spec.cross), before any host is touched."""
    with pytest.raises(PyinfraError, match="(?s)no host was touched.*only with NVIDIA's open "
                                           "kernel modules"):
        plan(nvidia_driver, fresh("ubuntu-24.04"),
             {**B200, "driver_branch": "570", "nvidia_driver_open_modules": False})


def test_volta_with_open_modules_is_refused():
    data = {"ssh_hostname": "10.0.0.5", "gpu_model": "V100-SXM2-32GB", "gpu_count": 8,
            "gpu_topology": "fixed-mesh", "nvidia_driver_open_modules": True}
    with pytest.raises(PyinfraError, match="(?s)no host was touched.*Volta.*cannot run the "
                                           "open kernel modules"):
        plan(nvidia_driver, fresh("ubuntu-24.04"), data)


# ----------------------------------------------------------------------------- apt lists it

def test_debians_pins_are_what_bookworm_lists():
    result = plan(nvidia_driver, fresh("debian-12", "apt-debian-12"), NODE)
    assert "nvidia-smi=535.261.03-1" in install_line(result)


def test_the_references_version_string_is_not_in_bookworm():
    """docs/hardware-reference.md 1.3 gave bookworm's driver as 535.261.03-1~deb12u1; apt lists
    535.261.03-1 (real apt-cache policy): such a pin stops before any change, naming both."""
    data = {**NODE, "nvidia_driver_version": "535.261.03-1~deb12u1"}
    with pytest.raises(GpuinfraError) as err:
        plan(nvidia_driver, fresh("debian-12", "apt-debian-12"), data)
    message = str(err.value)
    for words in ("nvidia-smi=535.261.03-1~deb12u1: apt lists 535.309.01-0+deb12u1, "
                  "535.261.03-1, 535.216.03-2~bpo12+1", "Set nvidia_driver_version",
                  "nothing was changed"):
        assert words in message


def test_noble_without_the_real_535_build_stops_before_any_change():
    """Risk R3: once noble's pockets list only the transitional 535 build, the pinned real one
    no longer resolves; the role says so, with the version apt lists, before touching the host."""
    facts = fresh("ubuntu-24.04", "apt-ubuntu-24.04-535-transitional-only-SYNTHESIZED")
    with pytest.raises(GpuinfraError) as err:
        plan(nvidia_driver, facts, NODE)
    message = str(err.value)
    assert ("nvidia-headless-535-server=535.309.01-0ubuntu0.24.04.1: apt lists "
            "535.309.01-0ubuntu0.24.04.2 (candidate 535.309.01-0ubuntu0.24.04.2)") in message
    assert "nothing was changed" in message
    # The build apt does list is the transitional one: pinning it is refused too, by name.
    data = {**NODE, "nvidia_driver_version": "535.309.01-0ubuntu0.24.04.2"}
    with pytest.raises(GpuinfraError, match="transitional package that installs the 580"):
        plan(nvidia_driver, facts, data)
    # Another branch of the archive still installs.
    assert plan(nvidia_driver, facts, {**NODE, "driver_branch": "580"}).ops


def test_fabric_manager_stops_before_any_change_too():
    facts = fresh("ubuntu-24.04", "apt-ubuntu-24.04-535-transitional-only-SYNTHESIZED")
    with pytest.raises(GpuinfraError, match="NVIDIA Fabric Manager: .*nvidia-fabricmanager-535="
                                            "535.309.01-0ubuntu0.24.04.1: apt lists"):
        plan(fabric_manager, facts, HGX)


# ----------------------------------------------------------------------------- Fabric Manager

@pytest.mark.parametrize("branch", BRANCHES)
@pytest.mark.parametrize("distro", DISTROS)
def test_fabric_manager_follows_the_drivers_branch(distro, branch):
    result = plan(fabric_manager, fresh(distro), {**HGX, "driver_branch": branch})
    install = result.op("Install NVIDIA Fabric Manager").commands[-1]
    assert install.endswith(f" nvidia-fabricmanager-{branch}="
                            f"{DRIVER_VERSIONS[(distro, branch)]}")


def test_fabric_manager_comes_from_the_drivers_repository():
    result = plan(fabric_manager, fresh("debian-12"), {**HGX, "driver_branch": "580"})
    # The nvidia_driver role added the repository (and its key) for both.
    assert not [op for op in result.ops if "CUDA" in op.name or "signing key" in op.name]


def test_a_different_fabric_manager_repository_is_a_conflict():
    data = {**HGX, "driver_branch": "580",
            "fabric_manager_repo_url": "http://mirror.example.internal/other"}
    with pytest.raises(GpuinfraError, match="must come from the driver's repository"):
        plan(fabric_manager, fresh("debian-12"), data)


def test_b200_names_the_subnet_manager_no_role_installs(caplog):
    plan(fabric_manager, fresh("ubuntu-24.04"), {**B200, "driver_branch": "570"})
    assert "nvlsm" in caplog.text and "install it by hand" in caplog.text


def test_hgx2_needs_fabric_manager_dgx1_does_not():
    hgx2 = {"ssh_hostname": "10.0.0.5", "gpu_model": "V100-SXM3-32GB", "gpu_count": 16,
            "gpu_topology": "fixed-mesh"}
    assert plan(fabric_manager, fresh("ubuntu-22.04"), hgx2).op("Install NVIDIA Fabric Manager")
    dgx1 = {**hgx2, "gpu_model": "V100-SXM2-32GB", "gpu_count": 8}
    assert plan(fabric_manager, fresh("ubuntu-22.04"), dgx1).ops == ()


@pytest.mark.parametrize(("branch", "line"), [
    ("535", "nvidia-tesla-535-smi=535.274.02-1~deb13u1"),
    ("550", "nvidia-smi=550.163.01-2")])
def test_debian_13s_pins_are_what_trixie_lists(branch, line):
    """apt-debian-13 is the trixie lab's real `apt-cache policy` (tests/fixtures/apt): the
    role's default pins for each branch trixie carries are versions apt there can install."""
    data = {**NODE, "driver_branch": branch}
    result = plan(nvidia_driver, fresh("debian-13", "apt-debian-13"), data)
    assert line in install_line(result)


def test_a_pin_trixie_does_not_list_is_refused_naming_what_it_does():
    data = {**NODE, "nvidia_driver_version": "535.261.03-1"}  # bookworm's, not trixie's
    with pytest.raises(GpuinfraError) as err:
        plan(nvidia_driver, fresh("debian-13", "apt-debian-13"), data)
    assert "535.274.02-1~deb13u1" in str(err.value)
