"""Plan tests of the `containerd` role: Debian 12, Ubuntu 22.04 and 24.04.

The facts are the recorded distribution layers (tests/plan/facts) plus, for a converged node,
the config.toml the role renders from that distribution's real `containerd config default`
(tests/fixtures/containerd: 1.6.20 for Debian 12, the 1.7 series for Ubuntu). The role also
runs for real in the lab (molecule's default scenario, gpuinfra_verify/test_containerd.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from pyinfra.api import FileUploadCommand, FunctionCommand

from gpuinfra.containers.containerd import CONFIG, containerd_config
from gpuinfra.knowledge.kubernetes import pause_image
from gpuinfra.units import boot_dropin, dropin_path
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_roles.containerd import BOOT, CHECK, STAGE, _stage_from_installed, containerd
from tests.conftest import REPO
from tests.plan.harness import FakeHost, load_facts, plan, plan_cluster, upload_text

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
FIXTURES = REPO / "tests" / "fixtures" / "containerd"
DEFAULT_FILE = {"debian-12": "config-default-1.6.20-debian12.toml",
                "ubuntu-22.04": "config-default-1.7.24-debian13.toml",
                "ubuntu-24.04": "config-default-1.7.24-debian13.toml"}
VERSION = {"debian-12": "1.6.20~ds1-1+deb12u3", "ubuntu-22.04": "1.7.28-0ubuntu1~22.04.1",
           "ubuntu-24.04": "1.7.28-0ubuntu1~24.04.1"}
PAUSE = pause_image("1.35.8")
# A host planned alone (tests/plan/harness.py: no scheduler, no head) that runs containerd.
KUBE_NODE = {"containerd_everywhere": True, "ssh_hostname": "10.0.0.11"}
STAMP = {"mode": 644, "size": 0, "user": "root", "group": "root",
         "mtime": {"__datetime__": "2026-11-22T03:30:00"}}
DIRECTORY = {"mode": 755, "user": "root", "group": "root"}


def default_text(distro: str) -> str:
    return (FIXTURES / DEFAULT_FILE[distro]).read_text()


def fresh(distro: str) -> dict[str, Any]:
    facts = load_facts("base-fresh", distro)
    facts["gpuinfra_roles.containerd.ContainerdDefaultConfig"] = None
    return facts


def merge(facts: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Layer ``more`` over ``facts`` (parametrised facts merged key by key)."""
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(facts.get(key), dict):
            facts[key] = {**facts[key], **value}
        else:
            facts[key] = value
    return facts


def converged_containerd(distro: str, pause: str = PAUSE) -> dict[str, Any]:
    """What a node holds once the role has run: the package, the rendered file, the service."""
    from datetime import datetime

    rendered = containerd_config(default_text(distro), pause)
    return {
        "deb.DebPackages": {"containerd": [VERSION[distro]]},
        "gpuinfra_roles.containerd.ContainerdDefaultConfig": default_text(distro),
        "files.FileContents": {f"path={CONFIG}": rendered.rstrip("\n").split("\n")},
        "files.Sha256File": {f"path={CONFIG}": hashlib.sha256(rendered.encode()).hexdigest()},
        "files.File": {"path=/var/lib/apt/periodic/update-success-stamp":
                       {**STAMP, "mtime": datetime.fromisoformat("2026-11-22T03:30:00")},
                       f"path={dropin_path(BOOT.unit)}":
                       {**STAMP, "mtime": datetime.fromisoformat("2026-11-22T03:30:00")}},
        "files.Directory": {"path=/etc/containerd": DIRECTORY,
                            f"path={dropin_path(BOOT.unit).rsplit('/', 1)[0]}": DIRECTORY},
        "files.Sha1File": {f"path={dropin_path(BOOT.unit)}": hashlib.sha1(
            file_text(boot_dropin(BOOT.why, BOOT.after, BOOT.wants)).encode()).hexdigest()},
        "systemd.SystemdStatus": {"*": {"containerd.service": True}},
        "systemd.SystemdEnabled": {"*": {"containerd.service": True}},
    }


def converged(distro: str) -> dict[str, Any]:
    return merge(fresh(distro), converged_containerd(distro))


@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_node_installs_renders_on_the_node_checks_and_starts(distro):
    result = plan(containerd, fresh(distro), KUBE_NODE)
    assert result.op("Install containerd").commands[-1].endswith(
        "install --no-install-recommends containerd")
    config = result.op("containerd config.toml")
    assert config.commands[0] == f"install -d -m 0700 {STAGE}"
    assert isinstance(config.raw[1], FunctionCommand)
    assert config.raw[1].function is _stage_from_installed and config.raw[1].args == (PAUSE,)
    assert config.commands[2] == CHECK
    assert config.commands[3].endswith(f"mv -f {CONFIG}.gpuinfra-new {CONFIG}")
    assert result.op("Restart containerd").commands == ("systemctl restart containerd.service",)
    assert result.op("Run containerd").commands  # start and enable
    dropin = result.op("containerd.service: boot order")
    assert any("Restart=on-failure" in upload_text(c.src) for c in dropin.raw
               if isinstance(c, FileUploadCommand))
    assert result.op("Reload systemd units").commands == ("systemctl daemon-reload",)


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_node_plans_nothing(distro):
    result = plan(containerd, converged(distro), KUBE_NODE)
    assert result.commands == [], result.changing


@pytest.mark.parametrize("distro", DISTROS)
def test_a_changed_sandbox_image_is_checked_then_moved_in_then_restarts(distro):
    facts = merge(fresh(distro), converged_containerd(distro, pause_image("1.33.5")))
    result = plan(containerd, facts, KUBE_NODE)
    config = result.op("containerd config.toml")
    assert config.commands[0] == f"install -d -m 0700 {STAGE}"
    assert config.commands[2] == CHECK
    assert result.op("Restart containerd").commands == ("systemctl restart containerd.service",)
    assert "SystemdCgroup = true" in upload_text(config.raw[1].src)


def test_the_check_runs_containerd_on_the_staged_file():
    assert f"containerd --config {STAGE}/config.toml config dump" in CHECK
    assert "gpuinfra: containerd refused the new configuration" in CHECK


def test_on_kubernetes_nodes_only_unless_the_site_asks_for_every_host():
    alone = {"ssh_hostname": "10.0.0.11"}
    assert plan(containerd, fresh("debian-12"), alone).commands == []
    head = FakeHost("k8s-head", ("head",), fresh("debian-12"), {"node_address": "10.0.0.10"})
    worker = FakeHost("gpu01", ("workers",), fresh("debian-12"), {"node_address": "10.0.0.11"})
    for data, expected in (({"schedulers": ["kubernetes"]}, True),
                           ({"schedulers": ["slurm"]}, False),
                           ({"schedulers": ["slurm"], "containerd_everywhere": True}, True)):
        result = plan_cluster(containerd, [head, worker], "gpu01", data)
        assert bool(result.commands) is expected, data
