"""containerd's config.toml from each real `containerd config default` (tests/fixtures/containerd):
SystemdCgroup on, the sandbox image set, everything else as containerd wrote it, and the
container toolkit's nvidia runtime kept across rewrites."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from gpuinfra.containers.containerd import (
    CRI_RUNTIME_PLUGIN,
    config_version,
    containerd_config,
    live_settings,
    same_config,
    toolkit_additions,
)
from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.kubernetes import pause_image
from tests.conftest import REPO

DEFAULTS = sorted((REPO / "tests" / "fixtures" / "containerd").glob("config-default-*.toml"))
PAUSE = pause_image("1.35.8")


@pytest.fixture(params=DEFAULTS, ids=[p.stem for p in DEFAULTS])
def default(request) -> str:
    return Path(request.param).read_text()


def _runc(data: dict) -> dict:
    cri = CRI_RUNTIME_PLUGIN[data["version"]]
    return data["plugins"][cri]["containerd"]["runtimes"]["runc"]


def test_three_real_defaults_are_recorded():
    assert [config_version(p.read_text()) for p in DEFAULTS] == [2, 2, 3]


def test_only_systemd_cgroup_and_sandbox_change(default):
    rendered = containerd_config(default, PAUSE)
    assert live_settings(default)["systemd_cgroup"] is False
    assert live_settings(rendered) == {"systemd_cgroup": True, "sandbox_image": PAUSE}
    changed = [(a, b) for a, b in zip(default.splitlines(), rendered.splitlines(), strict=True)
               if a != b]
    assert len(changed) == 2, changed
    assert any("SystemdCgroup = true" in b for _, b in changed)


def test_rendering_is_stable_and_compares_by_meaning(default):
    rendered = containerd_config(default, PAUSE)
    assert containerd_config(default, PAUSE, rendered) == rendered
    assert same_config(rendered, rendered)
    assert not same_config(rendered, default)
    assert not same_config(rendered, None)
    assert not same_config(rendered, "version = 2\n[plugins\n")


def _with_toolkit_runtime(rendered: str, default_runtime: bool) -> str:
    """The file as `nvidia-ctk runtime configure` leaves it: the runc runtime's options copied
    into runtimes.nvidia with BinaryName set, the whole file re-serialised (here: every table
    re-emitted in another layout), optionally nvidia as the default runtime (CONSTRUCTED from
    the toolkit's documented behaviour, docs/hardware-reference.md 2)."""
    data = tomllib.loads(rendered)
    containerd = data["plugins"][CRI_RUNTIME_PLUGIN[data["version"]]]["containerd"]
    nvidia = dict(containerd["runtimes"]["runc"])
    nvidia["options"] = {**nvidia["options"], "BinaryName": "/usr/bin/nvidia-container-runtime"}
    containerd["runtimes"]["nvidia"] = nvidia
    if default_runtime:
        containerd["default_runtime_name"] = "nvidia"
    text = tomli_w.dumps(data)
    assert tomllib.loads(text) == data
    return text


@pytest.mark.parametrize("default_runtime", [False, True])
def test_the_toolkits_nvidia_runtime_is_kept(default, default_runtime):
    rendered = containerd_config(default, PAUSE)
    live = _with_toolkit_runtime(rendered, default_runtime)
    assert rendered != live
    again = containerd_config(default, PAUSE, live)
    assert same_config(again, live), "a rerun would rewrite the file the toolkit edited"
    carried = toolkit_additions(live, config_version(default))
    assert set(carried["runtimes"]) == {"nvidia"}
    assert (carried.get("default_runtime_name") == "nvidia") is default_runtime


def test_a_changed_sandbox_rewrites_but_keeps_the_toolkit(default):
    live = _with_toolkit_runtime(containerd_config(default, pause_image("1.33.5")), False)
    again = containerd_config(default, PAUSE, live)
    assert not same_config(again, live)
    assert "nvidia" in _runc_parent(again)
    assert live_settings(again)["sandbox_image"] == PAUSE


def _runc_parent(text: str) -> dict:
    data = tomllib.loads(text)
    return data["plugins"][CRI_RUNTIME_PLUGIN[data["version"]]]["containerd"]["runtimes"]


def test_a_live_file_of_another_version_carries_nothing():
    v2, v3 = DEFAULTS[0].read_text(), DEFAULTS[2].read_text()
    live = _with_toolkit_runtime(containerd_config(v2, PAUSE), True)
    assert toolkit_additions(live, 3) == {}
    assert "nvidia" not in _runc_parent(containerd_config(v3, PAUSE, live))


@pytest.mark.parametrize("bad", ["pause:3.10", "registry.k8s.io/pause",
                                 "registry.k8s.io/pause:3.10\"\n",
                                 "registry.k8s.io/pause:3.10 ; rm"])
def test_a_bad_sandbox_image_is_refused(bad):
    with pytest.raises(GpuinfraError, match="not an image reference"):
        containerd_config(DEFAULTS[0].read_text(), bad)


def test_a_default_of_unknown_shape_is_refused():
    text = DEFAULTS[0].read_text().replace("SystemdCgroup = false", "SystemdCgroup = true")
    with pytest.raises(GpuinfraError, match="0 'SystemdCgroup = false' line"):
        containerd_config(text, PAUSE)
    with pytest.raises(GpuinfraError, match="not valid TOML"):
        containerd_config("version = 2\n[plugins\n", PAUSE)
