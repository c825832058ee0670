"""Plan tests of the `nvidia_driver` role on recorded facts: Debian 12, Ubuntu 22.04 and 24.04.

Fixture layers (tests/plan/facts/): base-fresh, <distro>, gpu-fresh, gpu-<distro> make a GPU
node before the role; adding gpu-converged and gpu-converged-<distro> makes it a node the role
(and fabric_manager and container_toolkit) already converged, rebooted, driver loaded.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from pyinfra.api.exceptions import PyinfraError

from gpuinfra import reboot
from gpuinfra.apt.files import apt_preferences
from gpuinfra.driver import (
    DEVICE_UDEV_RULE,
    NOUVEAU_BLACKLIST,
    NVIDIA_OPTIONS,
    PERSISTENCED_DROPIN,
    device_udev_rule,
    nouveau_blacklist,
    nvidia_device_options,
    persistenced_dropin,
)
from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.packages import DRIVER_VERSIONS, driver_packages
from gpuinfra.platforms import UnsupportedOS
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_roles.nvidia_driver import DISTRO, PIN_FILE, nvidia_driver
from tests.plan.harness import fact_file, load_facts, plan

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
# A GPU node: the entry file (roles/nvidia_driver/deploy.py) runs the role on GPU nodes
# only.
NODE = {"ssh_hostname": "10.0.0.5", "gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
        "gpu_topology": "bridged-pairs"}
HOLD = "apt-mark hold"

# What a fresh host installs, exactly (name=version), per distribution.
INSTALLS = {
    "debian-12": "nvidia-kernel-dkms=535.261.03-1 firmware-nvidia-gsp=535.261.03-1 "
                 "nvidia-smi=535.261.03-1 libcuda1=535.261.03-1 "
                 "'nvidia-persistenced=535.171.04-1~deb12u1'",
    "ubuntu-22.04": "nvidia-headless-535-server=535.309.01-0ubuntu0.22.04.1 "
                    "nvidia-utils-535-server=535.309.01-0ubuntu0.22.04.1 "
                    "nvidia-compute-utils-535-server=535.309.01-0ubuntu0.22.04.1",
    "ubuntu-24.04": "nvidia-headless-535-server=535.309.01-0ubuntu0.24.04.1 "
                    "nvidia-utils-535-server=535.309.01-0ubuntu0.24.04.1 "
                    "nvidia-compute-utils-535-server=535.309.01-0ubuntu0.24.04.1",
}
# The apt source file whose components the role completes on a fresh host (None: all there).
SOURCES_CHANGED = {
    "debian-12": "/etc/apt/sources.list",
    "ubuntu-22.04": None,
    "ubuntu-24.04": "/etc/apt/sources.list.d/ubuntu.sources",
}


def fresh(distro: str, *more: str) -> dict:
    return load_facts("base-fresh", distro, "gpu-fresh", f"gpu-{distro}", *more)


def converged(distro: str) -> dict:
    return fresh(distro, "gpu-converged", f"gpu-converged-{distro}")


def ending(result, suffix: str):
    """The one operation whose name ends with ``suffix``."""
    matches = [op for op in result.ops if op.name.endswith(suffix)]
    assert len(matches) == 1, (suffix, [op.name for op in result.ops])
    return matches[0]


def uploads(op) -> list[str]:
    return [c for c in op.commands if c.startswith("FileUploadCommand(")]


# ----------------------------------------------------------------------------- fresh host

@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_host_gets_the_pinned_driver(distro):
    result = plan(nvidia_driver, fresh(distro), NODE)
    install = result.op("Install the NVIDIA driver").commands
    assert install[-1].endswith("install --no-install-recommends --allow-downgrades "
                                "--allow-change-held-packages " + INSTALLS[distro])
    names = [arg.strip("'").split("=")[0] for arg in INSTALLS[distro].split()]
    assert result.op("Hold the NVIDIA driver").commands == (f"{HOLD} {' '.join(names)}",)
    assert uploads(result.op("Pin the NVIDIA driver"))  # apt preferences written first
    assert result.op("Install kernel headers").commands[-1].endswith(
        " ".join(DISTRO[distro]["kernel_headers"]))


@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_host_enables_the_archive_components_it_lacks(distro):
    result = plan(nvidia_driver, fresh(distro), NODE)
    components = " ".join(DISTRO[distro]["components"])
    changed = [path for path in DISTRO[distro]["sources"]
               if ending(result, f"Enable {components} in {path}").commands]
    expected = SOURCES_CHANGED[distro]
    assert changed == ([expected] if expected else [])
    refresh = result.op("Refresh apt after enabling").commands
    assert refresh == (("apt-get update",) if expected else ())


@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_host_gets_blacklist_device_access_persistence_and_a_reboot_note(distro):
    result = plan(nvidia_driver, fresh(distro), NODE)
    for words in ("Blacklist nouveau", "udev: /dev/nvidia* for group video, mode 0660",
                  "Driver options: /dev/nvidia* for gid 44, mode 0660",
                  "nvidia-persistenced with persistence mode on"):
        assert uploads(result.op(words)), words
    assert "update-initramfs -u" in result.op("Rebuild the initramfs").commands[0]
    assert result.op("Reload systemd units").commands == ("systemctl daemon-reload",)
    assert result.op("Restart nvidia-persistenced").commands == ()  # not running yet
    markers = [c for op in result.ops if "Record that a reboot" in op.name for c in op.commands]
    assert markers == [f"mkdir -p /run/gpuinfra && echo '{reason}' >> {reboot.REBOOT_MARKER}"
                       for reason in (reboot.DRIVER_CHANGED, reboot.NOUVEAU_BLACKLISTED,
                                      reboot.DEVICE_OPTIONS_CHANGED)]
    assert not [op for op in result.ops if "Reboot" in op.name]  # reboot_policy "never"


def test_debian_enables_persistenced_at_boot_ubuntu_leaves_its_static_unit():
    debian = plan(nvidia_driver, fresh("debian-12"), NODE)
    assert debian.op("Start nvidia-persistenced at boot").commands == (
        "systemctl enable nvidia-persistenced.service",)
    ubuntu = plan(nvidia_driver, fresh("ubuntu-24.04"), NODE)
    assert not [op for op in ubuntu.ops if "at boot" in op.name]


def test_debian_deb822_sources_are_completed_too():
    facts = fresh("debian-12")
    facts["files.FileContents"]["path=/etc/apt/sources.list"] = None
    facts["files.FileContents"]["path=/etc/apt/sources.list.d/debian.sources"] = [
        "Types: deb", "URIs: http://deb.debian.org/debian", "Suites: bookworm bookworm-updates",
        "Components: main", "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"]
    result = plan(nvidia_driver, facts, NODE)
    assert uploads(ending(result, "in /etc/apt/sources.list.d/debian.sources"))
    assert ending(result, "in /etc/apt/sources.list").commands == ()
    assert result.op("Refresh apt after enabling").commands == ("apt-get update",)


def test_lab_settings_skip_kernel_headers():
    data = {**NODE, "nvidia_driver_kernel_headers": False}
    result = plan(nvidia_driver, fresh("debian-12"), data)
    assert not [op for op in result.ops if "kernel headers" in op.name]


def test_full_driver_on_request():
    result = plan(nvidia_driver, fresh("debian-12"), {**NODE, "nvidia_driver_full": True})
    assert " nvidia-driver=535.261.03-1 " in result.op("Install the NVIDIA driver").commands[-1]


def test_reboot_if_needed_never_reboots_a_worker_in_the_run(caplog):
    """A scheduler's worker is rebooted only drained and in batches: not by the deploy (pyinfra
    would reboot every worker at once) but by `gpuinfra deploy` after the run (or the roll),
    which the run names; the reboot marker is recorded as with "never". Hypervisors keep the
    in-run reboot (tests/plan/test_vfio_plan.py)."""
    data = {**NODE, "reboot_policy": "if-needed"}
    with caplog.at_level("WARNING"):
        result = plan(nvidia_driver, fresh("debian-12"), data)
    assert not [op for op in result.ops if op.name.split(" | ")[1].startswith("Reboot")]
    assert result.op("Record that a reboot is needed: NVIDIA driver packages").commands
    assert ("a worker is rebooted to load the NVIDIA driver only drained and in batches, never "
            "by the deploy itself: `gpuinfra deploy --inventory inventory/<site>.py` does it "
            "after the run") in caplog.text
    assert "gpuinfra roll --inventory inventory/<site>.py --limit node1" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        plan(nvidia_driver, converged("debian-12"), data)
    assert "reboot needed" not in caplog.text  # nothing changed, nothing pending
    pending = converged("debian-12")
    pending["files.File"][f"path={reboot.REBOOT_MARKER}"] = {"mode": 644, "size": 40,
                                                             "user": "root", "group": "root"}
    with caplog.at_level("WARNING"):
        plan(nvidia_driver, pending, data)
    assert "a reboot recorded by an earlier deploy is still pending" in caplog.text


def test_unknown_reboot_policy_is_refused():
    with pytest.raises(PyinfraError, match="reboot_policy = 'always'.*\n.*if-needed"):
        plan(nvidia_driver, fresh("debian-12"), {**NODE, "reboot_policy": "always"})


# ----------------------------------------------------------------------------- converged host

@pytest.mark.parametrize("distro", DISTROS)
def test_converged_host_plans_no_command(distro):
    result = plan(nvidia_driver, converged(distro), NODE)
    assert result.commands == [], result.changing


def test_converged_check_can_fail_on_a_missing_hold():
    facts = converged("ubuntu-22.04")
    facts["gpuinfra_deploy.facts.apt.HeldPackages"].remove("nvidia-utils-535-server")
    result = plan(nvidia_driver, facts, NODE)
    assert [op.commands for op in result.changing] == [(f"{HOLD} nvidia-utils-535-server",)]


def test_a_new_pinned_version_installs_it_and_records_a_reboot():
    new = "535.309.01-0+deb12u1"
    facts = converged("debian-12")
    result = plan(nvidia_driver, facts, {**NODE, "nvidia_driver_version": new})
    changed = [op.name.split(" | ")[1] for op in result.changing]
    assert changed == ["Pin the NVIDIA driver to exact versions in apt preferences",
                       "Install the NVIDIA driver",
                       f"Record that a reboot is needed: {reboot.DRIVER_CHANGED}"]
    assert f"nvidia-smi={new}" in result.op("Install the NVIDIA driver").commands[-1]


def test_device_nodes_with_the_drivers_default_access_are_fixed():
    facts = converged("debian-12")
    nodes = facts["gpuinfra_deploy.facts.nvidia.NvidiaDeviceNodes"]
    nodes["/dev/nvidia0"] = {"gid": 0, "group": "root",
                                                              "mode": "0666"}
    result = plan(nvidia_driver, facts, NODE)
    assert [op.commands for op in result.changing] == [
        ("chgrp video /dev/nvidia0", "chmod 0660 /dev/nvidia0")]


def test_changed_persistenced_settings_restart_the_running_daemon():
    facts = converged("ubuntu-24.04")
    facts["files.Sha1File"][f"path={PERSISTENCED_DROPIN}"] = "0" * 40
    result = plan(nvidia_driver, facts, NODE)
    assert result.op("Reload systemd units").commands == ("systemctl daemon-reload",)
    assert result.op("Restart nvidia-persistenced").commands == (
        "systemctl restart nvidia-persistenced.service",)


# ----------------------------------------------------------------------------- device group

def test_a_missing_device_group_is_created_with_the_given_gid():
    data = {**NODE, "nvidia_driver_device_group": "gpu", "nvidia_driver_device_gid": 990}
    facts = converged("debian-12")
    result = plan(nvidia_driver, facts, data)
    assert result.op("Create the GPU group gpu").commands == ("groupadd -r gpu --gid 990",)
    assert uploads(result.op("Driver options: /dev/nvidia* for gid 990"))


def test_a_missing_device_group_without_gid_defers_the_driver_options():
    data = {**NODE, "nvidia_driver_device_group": "gpu"}
    result = plan(nvidia_driver, converged("debian-12"), data)
    assert result.op("Create the GPU group gpu").commands == ("groupadd -r gpu",)
    assert not [op for op in result.ops if "Driver options" in op.name]


# ----------------------------------------------------------------------------- errors

def test_unsupported_os_is_named_with_the_supported_ones():
    with pytest.raises(UnsupportedOS, match="debian-12, debian-13, ubuntu-22.04, ubuntu-24.04"):
        plan(nvidia_driver, fresh("debian-12", "centos-9"), NODE)


def test_a_version_of_another_branch_is_refused_before_anything_runs():
    with pytest.raises(GpuinfraError, match="not in branch 535"):
        plan(nvidia_driver, fresh("debian-12"), {**NODE, "nvidia_driver_version": "580.95.05-1"})


# ----------------------------------------------------------------------------- the fixture

def test_converged_fixture_checksums_are_what_the_role_writes():
    """If this fails, a renderer changed: update the Sha1File values in the gpu-converged*
    fixtures to the new text's sha1 (the converged tests then pass again)."""
    expected = {
        NOUVEAU_BLACKLIST: file_text(nouveau_blacklist()),
        DEVICE_UDEV_RULE: file_text(device_udev_rule("video", "0660")),
        NVIDIA_OPTIONS: file_text(nvidia_device_options(44, "0660")),
    }
    for distro in DISTROS:
        sums = converged(distro)["files.Sha1File"]
        expected_distro = {
            **expected,
            PERSISTENCED_DROPIN: file_text(persistenced_dropin(
                DISTRO[distro]["persistenced_user"], "video")),
            PIN_FILE: file_text(apt_preferences(
                _driver_pins(distro), "the NVIDIA driver: exact versions only")),
        }
        for path, text in expected_distro.items():
            assert sums[f"path={path}"] == hashlib.sha1(text.encode()).hexdigest(), (distro, path)


def _driver_pins(distro: str) -> dict[str, str]:
    return driver_packages(distro, "535", DRIVER_VERSIONS[(distro, "535")]).pins


def test_fixture_files_are_json_with_a_comment():
    for name in ("gpu-fresh", "gpu-converged", *(f"gpu-converged-{d}" for d in DISTROS)):
        assert "_comment" in json.loads(fact_file(name).read_text())
