"""Plan tests of the `container_toolkit` role. NVIDIA's repository is unreachable from the lab:
these plan tests are the role's coverage until it runs on a real site."""

from __future__ import annotations

import pytest
from pyinfra.api import OperationError

from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra.knowledge.repositories import TOOLKIT_KEYRING
from gpuinfra_deploy.ops.apt import keyring_script
from gpuinfra_roles.container_toolkit import CDI_SPEC, container_toolkit
from tests.plan.harness import KEYRING_KEYS, pinned_keyrings, plan
from tests.plan.test_nvidia_driver_plan import DISTROS, converged, fresh, uploads

GPU = {"ssh_hostname": "10.0.0.5", "gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
       "gpu_topology": "bridged-pairs"}
ON = GPU  # on by default: a GPU site runs containers
NOW = 1_780_000_000
PACKAGES = ("nvidia-container-toolkit=1.17.8-1 nvidia-container-toolkit-base=1.17.8-1 "
            "libnvidia-container-tools=1.17.8-1 libnvidia-container1=1.17.8-1")


@pytest.mark.parametrize("distro", DISTROS)
def test_on_by_default_on_gpu_nodes_off_when_the_site_says_so(distro):
    assert plan(container_toolkit, fresh(distro), GPU).op("Install the NVIDIA Container Toolkit")
    off = {**GPU, "container_toolkit_enabled": False}
    assert plan(container_toolkit, fresh(distro), off).ops == ()
    assert plan(container_toolkit, fresh(distro), {"ssh_hostname": "10.0.0.5"}).ops == ()


@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_host_gets_repository_toolkit_and_runtime(distro):
    result = plan(container_toolkit, fresh(distro), ON)
    assert result.op("signing key").commands == (keyring_script(
        "https://nvidia.github.io/libnvidia-container/gpgkey", TOOLKIT_KEYRING,
        SIGNING_KEYS["container-toolkit"]),)
    assert uploads(result.op("List the container toolkit repository"))
    assert result.op("Refresh apt after adding").commands == ("apt-get update",)
    assert result.op("Install the NVIDIA Container Toolkit").commands[-1].endswith(PACKAGES)
    assert result.op("Hold the NVIDIA Container Toolkit").commands == (
        "apt-mark hold nvidia-container-toolkit nvidia-container-toolkit-base "
        "libnvidia-container-tools libnvidia-container1",)
    assert result.op("Add the nvidia runtime to containerd").commands == (
        "nvidia-ctk runtime configure --runtime=containerd",)
    assert result.op("Restart containerd").commands == ()  # not running on this host
    # No driver loaded yet: no CDI spec can be generated (the role warns instead).
    assert not [op for op in result.ops if "CDI" in op.name]


def test_offline_mirror_replaces_nvidias_url():
    data = {**ON, "nvidia_repo_mirror": "http://mirror.example.internal/libnvidia-container"}
    result = plan(container_toolkit, fresh("debian-12"), data)
    assert "curl -fsSL http://mirror.example.internal/libnvidia-container/gpgkey -o" in \
        result.op("signing key").commands[0]
    assert SIGNING_KEYS["container-toolkit"] in result.op("signing key").commands[0]


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_host_plans_no_command(distro):
    result = plan(container_toolkit, converged(distro), ON)
    assert result.commands == [], result.changing


def test_converged_check_can_fail_when_the_runtime_lost_its_entry():
    """E.g. a Kubespray re-run rewrote config.toml without the nvidia runtime."""
    facts = converged("ubuntu-22.04")
    runtime = facts["gpuinfra_deploy.facts.nvidia.ContainerRuntimeConfig"]
    runtime["runtime=containerd"] = "version = 2\n"
    result = plan(container_toolkit, facts, ON)
    assert [op.commands for op in result.changing] == [
        ("nvidia-ctk runtime configure --runtime=containerd",),
        ("systemctl restart containerd.service",)]


def test_docker_as_default_runtime():
    data = {**ON, "container_toolkit_runtimes": ["docker"], "container_toolkit_set_default": True}
    facts = converged("debian-12")
    runtime = facts["gpuinfra_deploy.facts.nvidia.ContainerRuntimeConfig"]
    runtime["runtime=docker"] = '{"log-driver": "local"}'
    result = plan(container_toolkit, facts, data)
    assert result.op("Add the nvidia runtime to docker").commands == (
        "nvidia-ctk runtime configure --runtime=docker --set-as-default",)


def test_cdi_spec_regenerated_for_a_new_driver():
    facts = converged("debian-12")
    facts["files.FileContents"][f"path={CDI_SPEC}"] = [
        "  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.216.03"]
    result = plan(container_toolkit, facts, ON)
    assert [op.commands for op in result.changing] == [
        (f"nvidia-ctk cdi generate --output={CDI_SPEC}",)]


def test_cdi_spec_waits_for_a_pending_reboot(caplog):
    facts = converged("debian-12")
    facts["files.FileContents"][f"path={CDI_SPEC}"] = None
    facts["files.File"]["path=/run/gpuinfra/reboot-required"] = {"mode": 644, "size": 1,
                                                                 "user": "root", "group": "root"}
    result = plan(container_toolkit, facts, ON)
    assert result.commands == []
    assert f"{CDI_SPEC} is missing" in caplog.text


# Issue 23, finding 9: a keyring that exists is judged on every run, not trusted for being there.

def _keyring(facts: dict, fingerprint: str, expires: int | None) -> dict:
    facts[KEYRING_KEYS] = pinned_keyrings({TOOLKIT_KEYRING: fingerprint}, now=NOW,
                                          expires=expires)
    return facts


def test_an_existing_keyring_with_another_key_fails_the_host_naming_both():
    impostor = "0123456789ABCDEF0123456789ABCDEF01234567"
    with pytest.raises(OperationError) as failed:
        plan(container_toolkit, _keyring(converged("debian-12"), impostor, None), ON)
    message = str(failed.value)
    for part in ("node1", TOOLKIT_KEYRING, impostor, SIGNING_KEYS["container-toolkit"],
                 f"rm {TOOLKIT_KEYRING}", "deploy again"):
        assert part in message, part


@pytest.mark.parametrize(("days_left", "refreshed"), [(365, False), (29, True), (-3, True)])
def test_a_keyring_whose_expiry_is_near_is_fetched_again(days_left, refreshed):
    facts = _keyring(converged("ubuntu-24.04"), SIGNING_KEYS["container-toolkit"],
                     NOW + days_left * 86400)
    result = plan(container_toolkit, facts, ON)
    expected = (keyring_script("https://nvidia.github.io/libnvidia-container/gpgkey",
                               TOOLKIT_KEYRING, SIGNING_KEYS["container-toolkit"],
                               fresh_for_days=1),) if refreshed else ()
    assert result.op("signing key").commands == expected
    if not refreshed:
        assert result.commands == [], result.changing


def test_a_keyring_gpg_cannot_read_because_gpg_is_missing_fails_naming_the_fix():
    facts = converged("debian-12")
    facts[KEYRING_KEYS] = {f"path={TOOLKIT_KEYRING}": {"gpg": False, "now": NOW, "keys": []}}
    with pytest.raises(OperationError, match=r"node1: gpg is not installed.*apt-get install gnupg"):
        plan(container_toolkit, facts, ON)
