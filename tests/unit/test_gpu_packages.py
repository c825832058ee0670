"""Package tables and pinned versions (gpuinfra.knowledge.packages) and the files the GPU roles
write (gpuinfra.driver, gpuinfra.apt.files, gpuinfra.knowledge.repositories)."""

from __future__ import annotations

import pytest

from gpuinfra.apt.files import apt_preferences, flat_repo_list, origin_preference
from gpuinfra.driver import (
    check_mode,
    device_udev_rule,
    nouveau_blacklist,
    nvidia_device_options,
    persistenced_dropin,
)
from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge import drivers
from gpuinfra.knowledge.packages import (
    CONTAINER_TOOLKIT_PACKAGES,
    DRIVER_VERSIONS,
    FABRIC_MANAGER_VERSIONS,
    check_branch,
    container_toolkit_packages,
    default_driver_version,
    driver_packages,
    driver_release,
    fabric_manager_packages,
    same_upstream,
    upstream_version,
)
from gpuinfra.knowledge.repositories import TOOLKIT_KEYRING, toolkit_key_url, toolkit_list
from gpuinfra_deploy.templates import text as file_text

# ----------------------------------------------------------------------------- versions


def test_every_supported_distro_and_branch_has_driver_and_fm_versions():
    for distro, branches in drivers.SUPPORTED_BRANCHES.items():
        for branch in branches:
            driver = DRIVER_VERSIONS[(distro, branch)]
            fm = FABRIC_MANAGER_VERSIONS[(distro, branch)]
            check_branch(driver, branch)
            assert same_upstream(driver, fm), (distro, driver, fm)


def test_versions_are_the_real_535_builds_not_the_580_transitionals():
    assert DRIVER_VERSIONS[("debian-12", "535")] == "535.261.03-1"  # bookworm non-free
    # noble-security's ...24.04.2 depends on 580: only the .1 build is the 535 driver.
    assert DRIVER_VERSIONS[("ubuntu-24.04", "535")].endswith("0ubuntu0.24.04.1")
    assert DRIVER_VERSIONS[("ubuntu-22.04", "535")].endswith("0ubuntu0.22.04.1")


@pytest.mark.parametrize("distro", ["ubuntu-22.04", "ubuntu-24.04"])
def test_the_550_transitional_revision_that_installs_580_is_refused(distro):
    """Ubuntu's 550.163.01-0ubuntu0.<rel>.2 installs the 580 driver (public apt and dpkg
    captures; knowledge audit 9735030 row 61): pinning it for branch 550 is refused, naming
    580; the .1 build is the 550 driver."""
    rel = distro.split("-")[1]
    with pytest.raises(GpuinfraError, match="transitional package that installs the 580"):
        driver_release(distro, "550", f"550.163.01-0ubuntu0.{rel}.2")
    assert driver_release(distro, "550").version == f"550.163.01-0ubuntu0.{rel}.1"


@pytest.mark.parametrize("version,upstream", [
    ("535.261.03-1", "535.261.03"), ("535.171.04-1~deb12u1", "535.171.04"),
    ("535.309.01-0ubuntu0.24.04.1", "535.309.01"), ("1:2.3-4", "2.3"), ("1.17.8-1", "1.17.8"),
])
def test_upstream_version(version, upstream):
    assert upstream_version(version) == upstream


@pytest.mark.parametrize("bad", ["", "latest", "535", "535.261.03 -1", None])
def test_upstream_version_rejects_non_versions(bad):
    with pytest.raises(GpuinfraError, match="not a package version"):
        upstream_version(bad)


def test_a_version_from_another_branch_is_refused():
    with pytest.raises(GpuinfraError, match="580.95.05-1 is not in branch 535"):
        driver_packages("debian-12", "535", "580.95.05-1")


def test_unknown_distro_or_branch_names_what_is_known():
    with pytest.raises(GpuinfraError, match="debian-12 535"):
        default_driver_version("debian-12", "590")


# ----------------------------------------------------------------------------- package sets

def test_debian_headless_set_pins_the_whole_source_package():
    pinned = driver_packages("debian-12", "535", "535.261.03-1")
    assert pinned.packages == {
        "nvidia-kernel-dkms": "535.261.03-1", "firmware-nvidia-gsp": "535.261.03-1",
        "nvidia-smi": "535.261.03-1", "libcuda1": "535.261.03-1",
        "nvidia-persistenced": "535.171.04-1~deb12u1",
    }
    # libnvidia-ml1, nvidia-alternative... are not named: the src: pin holds them too.
    assert pinned.pins == {"src:nvidia-graphics-drivers": "535.261.03-1",
                           "nvidia-persistenced": "535.171.04-1~deb12u1"}
    assert "nvidia-smi=535.261.03-1" in pinned.install_args


def test_debian_full_driver_on_request():
    pinned = driver_packages("debian-12", "535", "535.261.03-1", full=True)
    assert pinned.packages["nvidia-driver"] == "535.261.03-1"


@pytest.mark.parametrize("distro", ["ubuntu-22.04", "ubuntu-24.04"])
def test_ubuntu_server_headless_set(distro):
    version = DRIVER_VERSIONS[(distro, "535")]
    pinned = driver_packages(distro, "535", version)
    assert list(pinned.packages) == ["nvidia-headless-535-server", "nvidia-utils-535-server",
                                     "nvidia-compute-utils-535-server"]
    assert set(pinned.packages.values()) == {version}
    assert pinned.pins == {"src:nvidia-graphics-drivers-535-server": version}
    full = driver_packages(distro, "535", version, full=True, server_stream=False)
    assert list(full.packages)[0] == "nvidia-driver-535"
    assert full.pins == {"src:nvidia-graphics-drivers-535": version}


def test_fabric_manager_packages():
    ubuntu = fabric_manager_packages("ubuntu-24.04", "535", "535.309.01-0ubuntu0.24.04.1")
    assert ubuntu.packages == {"nvidia-fabricmanager-535": "535.309.01-0ubuntu0.24.04.1"}
    assert ubuntu.pins == {"src:fabric-manager-535": "535.309.01-0ubuntu0.24.04.1"}
    debian = fabric_manager_packages("debian-12", "535", "535.261.03-1")
    assert debian.pins == {"nvidia-fabricmanager-535": "535.261.03-1"}


def test_container_toolkit_pins_its_four_packages_together():
    pinned = container_toolkit_packages("1.17.8-1")
    assert tuple(pinned.packages) == CONTAINER_TOOLKIT_PACKAGES
    assert pinned.pins == pinned.packages


# ----------------------------------------------------------------------------- rendered files

def test_nouveau_blacklist():
    lines = file_text(nouveau_blacklist()).splitlines()
    assert lines[1:] == ["blacklist nouveau", "options nouveau modeset=0"]


def test_device_options_need_a_numeric_gid():
    assert file_text(nvidia_device_options(44, "0660")).splitlines()[-1] == (
        "options nvidia NVreg_DeviceFileUID=0 NVreg_DeviceFileGID=44 NVreg_DeviceFileMode=0660")
    with pytest.raises(GpuinfraError, match="numeric gid"):
        file_text(nvidia_device_options("video", "0660"))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode,text", [("0660", "0660"), ("660", "0660"), (660, "0660"),
                                       ("0600", "0600")])
def test_modes(mode, text):
    assert check_mode(mode) == text


@pytest.mark.parametrize("bad", ["0668", "rw-rw----", "06600", "", "0o660"])
def test_bad_modes(bad):
    with pytest.raises(GpuinfraError, match="octal mode"):
        check_mode(bad)


def test_udev_rule_and_bad_group_names():
    assert file_text(device_udev_rule("gpu-users", "0660")).splitlines()[-1] == (
        'KERNEL=="nvidia*", OWNER="root", GROUP="gpu-users", MODE="0660"')
    with pytest.raises(GpuinfraError, match="not a valid name"):
        file_text(device_udev_rule('video" RUN+="/bin/sh', "0660"))


def test_persistenced_dropin_resets_execstart_and_turns_persistence_on():
    lines = file_text(persistenced_dropin("nvidia-persistenced", "video")).splitlines()
    assert lines[1:] == [
        "[Service]", "ExecStart=",
        "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --group video "
        "--persistence-mode --verbose"]
    assert "--no-persistence-mode" not in "\n".join(lines)


def test_apt_preferences():
    text = file_text(apt_preferences({"src:nvidia-graphics-drivers": "535.261.03-1"}, "why"))
    assert "Package: src:nvidia-graphics-drivers\nPin: version 535.261.03-1\n" \
           "Pin-Priority: 1001\n" in text
    with pytest.raises(GpuinfraError):
        file_text(apt_preferences({}, "why"))


def test_toolkit_list_is_exactly_nvidias_line():
    assert file_text(toolkit_list()) == (
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n")
    assert toolkit_key_url() == "https://nvidia.github.io/libnvidia-container/gpgkey"


def test_mirror_replaces_the_toolkit_url():
    mirror = "http://mirror.example.internal/libnvidia-container/"
    assert file_text(toolkit_list(mirror)) == (
        f"deb [signed-by={TOOLKIT_KEYRING}] "
        "http://mirror.example.internal/libnvidia-container/stable/deb/$(ARCH) /\n")
    assert toolkit_key_url(mirror) == "http://mirror.example.internal/libnvidia-container/gpgkey"
    with pytest.raises(GpuinfraError, match="not an http"):
        file_text(toolkit_list("ftp://mirror/x"))


def test_cuda_repository_files():
    url = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
    assert file_text(flat_repo_list(url, "/k.gpg")) == f"deb [signed-by=/k.gpg] {url}/ /\n"
    assert file_text(origin_preference(url)).splitlines()[-3:] == [
        "Package: *", "Pin: origin developer.download.nvidia.com", "Pin-Priority: 100"]
