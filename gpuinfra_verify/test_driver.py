"""The NVIDIA driver stack on hosts whose spec lists GPUs, against the spec and the role data.

A host with the reboot marker (/run/gpuinfra/reboot-required, gpuinfra.reboot) fails once, in
``test_reboot_not_pending``, with "reboot pending: <reasons>"; the checks that need the driver
loaded then skip with that reason instead of failing misleadingly. Otherwise: driver at the
spec's branch, GPU count, persistence mode, nouveau not loaded, Fabric Manager where the profile
needs it, /dev/nvidia* group and mode, the container runtime where the toolkit is enabled.
Expected values are the roles' defaults.py with the host's data over them. In the lab,
nvidia-smi replays captures (gpuinfra_lab/README.md): the nvidia-smi checks prove their logic there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from testinfra.host import Host

from gpuinfra import reboot
from gpuinfra.containers.runtimes import CONFIG_PATHS, has_nvidia_runtime
from gpuinfra.spec import NodeSpec
from gpuinfra.verdicts import count_finding
from gpuinfra_verify.expect import (
    csv_column,
    device_problems,
    driver_package_problems,
    driver_version_problems,
    loaded_modules,
    problem,
    reboot_pending_message,
    smi_failure,
)
from gpuinfra_verify.failure import fail

VERIFY_NODES = "gpu"
Note = Callable[[str, object], None]
FM_SERVICE = "nvidia-fabricmanager"


@pytest.fixture(scope="module")
def reboot_reasons(host: Host) -> list[str]:
    """The reasons in the host's reboot marker ([] when no reboot is pending)."""
    result = host.run(f"cat {reboot.REBOOT_MARKER}")
    return reboot.reboot_reasons(result.stdout if result.rc == 0 else None)


@pytest.fixture(scope="module")
def driver(node: NodeSpec) -> Mapping[str, Any]:
    """The host's checked role settings (nvidia_driver_* and the rest)."""
    return node.settings



def _loaded_driver_needed(reasons: list[str]) -> None:
    if reasons:
        pytest.skip(f"reboot pending: {'; '.join(reasons)} (see test_reboot_not_pending)")


def _smi_column(host: Host, node: NodeSpec, field: str, note: Note) -> list[str]:
    command = f"nvidia-smi --query-gpu={field} --format=csv,noheader"
    result = host.run(command)
    if result.rc != 0:
        fail(note, problem(node.name, smi_failure(command, result.rc,
                                                   result.stderr or result.stdout),
                            "the NVIDIA driver is not installed or not loaded",
                            "deploy (nvidia_driver role), reboot, then check `dmesg | grep -i "
                            "nvrm` and `dkms status` for a module that did not build or load"))
    return csv_column(result.stdout)


def test_reboot_not_pending(reboot_reasons: list[str], node: NodeSpec, note: Note) -> None:
    if reboot_reasons:
        fail(note, reboot_pending_message(node.name, reboot_reasons))


def test_driver_branch(host: Host, node: NodeSpec, site: Any, reboot_reasons: list[str],
                       note: Note) -> None:
    _loaded_driver_needed(reboot_reasons)
    branch = site.spec.driver_branch
    versions = _smi_column(host, node, "driver_version", note)
    note("driver_seen", ", ".join(sorted(set(versions))) or "?")
    wrong = driver_version_problems(versions, branch)
    if wrong or not versions:
        fail(note, problem(
            node.name, "; ".join(wrong) or "nvidia-smi lists no GPU",
            f"the loaded driver is not of the spec's branch {branch} (another branch installed, "
            "a transitional package pulled a newer one, or the old module still loaded)",
            f"pin nvidia_driver_version to a {branch} build, deploy, reboot; check "
            "`apt-cache policy` and `cat /proc/driver/nvidia/version`"))


def test_driver_packages_of_the_branch(host: Host, node: NodeSpec, site: Any,
                                      note: Note) -> None:
    """The driver packages the deploy installed are of the spec's branch: read from dpkg, so it
    holds where nvidia-smi only replays a capture (the lab) and before the reboot that loads
    the driver."""
    branch = site.spec.driver_branch
    listed = host.run("dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev} "
                      "${source:Package}\\n' 'nvidia-*' 'libnvidia-*'")
    wrong = driver_package_problems(listed.stdout, branch)
    installed = [line.split()[0] for line in listed.stdout.splitlines()
                 if len(line.split()) >= 3 and line.split()[2].startswith("ii")]
    note("driver_packages", len(installed))
    if not installed:
        fail(note, problem(
            node.name, "no NVIDIA driver package installed (dpkg lists none)",
            "the driver on this node did not come from packages (NVIDIA's .run installer, or "
            "a host image that mounts it, as on the lent H100 VM: tests/fixtures/device/), or "
            "the deploy never ran: the role cannot pin or upgrade what dpkg does not know",
            f"remove the other installation and deploy the nvidia_driver role (it installs "
            f"the {branch} packages)"))
    if wrong:
        fail(note, problem(
            node.name, "; ".join(wrong),
            f"the packages are not the spec's branch {branch}: another branch installed by "
            "hand, a transitional package that pulls a newer branch, or the deploy never ran",
            f"deploy the nvidia_driver role (it pins {branch}); `apt-cache policy` names what "
            "each package would pull"))


def test_driver_gpu_count(host: Host, node: NodeSpec, reboot_reasons: list[str],
                          note: Note) -> None:
    assert node.gpus is not None
    _loaded_driver_needed(reboot_reasons)
    seen = len(_smi_column(host, node, "index", note))
    found = count_finding(node.gpus.count, [("nvidia-smi --query-gpu=index", seen)])
    if found.failed:
        fail(note, problem(node.name, f"{found.observed} GPU(s), the spec says "
                           f"{found.expected}", found.cause, found.fix))


def test_persistence_mode(host: Host, node: NodeSpec, driver: dict[str, Any],
                          reboot_reasons: list[str], note: Note) -> None:
    if not driver["nvidia_driver_persistence_mode"]:
        pytest.skip("nvidia_driver_persistence_mode is False in this site's data")
    _loaded_driver_needed(reboot_reasons)
    modes = _smi_column(host, node, "persistence_mode", note)
    off = [f"GPU{i}: {mode}" for i, mode in enumerate(modes) if mode != "Enabled"]
    if off:
        fail(note, problem(
            node.name, f"persistence mode not on: {', '.join(off)}",
            "nvidia-persistenced is not running with --persistence-mode (Ubuntu's unit starts "
            "it with --no-persistence-mode)",
            "deploy the nvidia_driver role (its persistenced drop-in), then `systemctl status "
            "nvidia-persistenced`"))


def test_persistenced_keeps_persistence_mode(host: Host, node: NodeSpec,
                                             driver: dict[str, Any], note: Note) -> None:
    """What the role changed for persistence mode: nvidia-persistenced started with
    ``--persistence-mode`` (its drop-in; Ubuntu's unit passes ``--no-persistence-mode``) and
    enabled at boot. Read from systemd, so it holds where the daemon cannot run (the lab)."""
    if not driver["nvidia_driver_persistence_mode"]:
        pytest.skip("nvidia_driver_persistence_mode is False in this site's data")
    start = host.run("systemctl show -p ExecStart --value nvidia-persistenced").stdout
    enabled = host.run("systemctl is-enabled nvidia-persistenced").stdout.strip() or "unknown"
    wrong = []
    if "--persistence-mode" not in start.split() or "--no-persistence-mode" in start:
        wrong.append("its command line lacks --persistence-mode")
    if enabled not in ("enabled", "static", "alias"):
        wrong.append(f"it is {enabled} at boot")
    if wrong:
        fail(note, problem(
            node.name, f"nvidia-persistenced: {'; '.join(wrong)}",
            "the role's drop-in (/etc/systemd/system/nvidia-persistenced.service.d/) is missing "
            "or systemd did not reload it, or the unit was disabled by hand",
            "deploy the nvidia_driver role; `systemctl cat nvidia-persistenced`"))


def test_persistenced_running(host: Host, node: NodeSpec, driver: dict[str, Any],
                              node_data: dict, reboot_reasons: list[str], note: Note) -> None:
    """The deploy enables nvidia-persistenced; only a running one keeps the GPUs initialised
    (a failed one leaves every job paying the driver's start-up, and hides a driver fault)."""
    if not driver["nvidia_driver_persistence_mode"]:
        pytest.skip("nvidia_driver_persistence_mode is False in this site's data")
    _loaded_driver_needed(reboot_reasons)
    run = host.run("systemctl is-active nvidia-persistenced")
    state = run.stdout.strip() or "unknown"
    if state == "active":
        return
    why = (node_data.get("lab_expected_failures") or {}).get("nvidia-persistenced.service")
    if why:
        pytest.skip(f"nvidia-persistenced is {state}, as expected in this lab: {why}")
    if run.rc == 127:
        state = "not managed: this host has no systemctl"
    cause = ("the daemon failed to start: the driver is not loaded, its user or group is "
             "missing, or /dev/nvidia* is not accessible to the group its drop-in names")
    modes = set(host.run("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader")
                .stdout.split())
    if modes == {"Enabled"}:
        # Seen on the lent H100 (tests/fixtures/device/h100-80gb-hbm3-vm-drv580.159.04): mode
        # Enabled, no daemon; the driver logs "Persistence mode is deprecated and will be
        # removed in a future release. Please use nvidia-persistenced instead."
        cause = ("persistence mode is on without the daemon (`nvidia-smi -pm 1`, which the "
                 "driver's own log calls deprecated): it is lost when the driver reloads")
    fail(note, problem(
        node.name, f"nvidia-persistenced is {state}, not active", cause,
        "`systemctl status nvidia-persistenced` and `journalctl -b -u nvidia-persistenced`; "
        "deploy the nvidia_driver role, reboot if a driver change is pending"))


def test_nouveau_not_loaded(host: Host, node: NodeSpec, reboot_reasons: list[str],
                            note: Note) -> None:
    modules = loaded_modules(host.run("cat /proc/modules").stdout)
    if "nouveau" in modules:
        _loaded_driver_needed(reboot_reasons)
        fail(note, problem(
            node.name, "nouveau is loaded",
            "the nouveau blacklist is missing or not in the initramfs, so nouveau claims the "
            "GPUs before the NVIDIA driver",
            "deploy (nvidia_driver_blacklist_nouveau), `update-initramfs -u`, reboot"))


def test_fabric_manager(host: Host, node: NodeSpec, reboot_reasons: list[str], note: Note) -> None:
    assert node.gpus is not None
    if not node.gpus.needs_fabric_manager:
        pytest.skip(f"{node.gpus.topology.name}: no NVSwitch, Fabric Manager not needed")
    if not node.settings["fabric_manager_enabled"]:
        pytest.skip("skipped: fabric_manager_enabled is False in this site's data (the "
                    f"{node.gpus.topology.name} profile requires Fabric Manager)")
    _loaded_driver_needed(reboot_reasons)
    active = host.run(f"systemctl is-active {FM_SERVICE}").stdout.strip() or "unknown"
    enabled = host.run(f"systemctl is-enabled {FM_SERVICE}").stdout.strip() or "unknown"
    if active != "active" or enabled != "enabled":
        fail(note, problem(
            node.name, f"{FM_SERVICE} is {active}, {enabled}; the NVSwitch profile needs it "
            "active and enabled",
            "Fabric Manager is not installed, or exits because its version differs from the "
            "driver's, so the NVSwitch fabric is not initialised (CUDA fails to start)",
            f"deploy the fabric_manager role; `journalctl -u {FM_SERVICE}` names a version "
            "mismatch"))


def test_device_permissions(host: Host, node: NodeSpec, driver: dict[str, Any],
                            reboot_reasons: list[str], note: Note) -> None:
    group = driver["nvidia_driver_device_group"]
    mode = str(driver["nvidia_driver_device_mode"]).rjust(4, "0")
    listing = host.run("stat -c '%n %U %G %a' /dev/nvidia[0-9]*")
    if listing.rc != 0:
        _loaded_driver_needed(reboot_reasons)
        fail(note, problem(node.name, "no /dev/nvidia[0-9]* device node",
                            "the NVIDIA driver is not loaded", "reboot; check `dmesg | grep NVRM`"))
    wrong = device_problems(listing.stdout, group, mode)
    if wrong:
        fail(note, problem(
            node.name, "GPU device access not as specified: " + "; ".join(wrong),
            "the driver options (NVreg_DeviceFile*) or the udev rule are missing or not applied, "
            "or someone changed the nodes by hand: other users may reach the GPUs",
            f"deploy the nvidia_driver role (nvidia_driver_device_group {group}, "
            f"nvidia_driver_device_mode {mode}); the nodes keep the options' access at the "
            "next module load"))


def test_container_runtime(host: Host, node: NodeSpec, note: Note) -> None:
    toolkit = node.settings
    if not toolkit["container_toolkit_enabled"]:
        pytest.skip("container_toolkit_enabled is False in this site's data: no runtime to check")
    missing = []
    for runtime in toolkit["container_toolkit_runtimes"]:
        paths = " ".join(CONFIG_PATHS[runtime])
        text = host.run(f'for f in {paths}; do [ -f "$f" ] && cat "$f"; done; true').stdout
        if not has_nvidia_runtime(runtime, text):
            missing.append(runtime)
    if missing:
        fail(note, problem(
            node.name, f"no nvidia runtime in the configuration of {', '.join(missing)}",
            "`nvidia-ctk runtime configure` did not run, or another tool rewrote the file",
            "deploy the container_toolkit role (it adds the runtime and restarts it)"))
