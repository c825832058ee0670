"""Plan tests of the `health` role on a GPU worker (Debian 12, Ubuntu 22.04, 24.04): what it
installs, the expectation judged by the program itself before it goes live, and the role off.
Live: molecule broken-nvlink and `make demo` (gpuinfra_lab/health_drain.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

from gpuinfra.health.expectation import PATH
from gpuinfra.slurm.conf import HEALTH_PROGRAMS
from gpuinfra_deploy.nodecode import node_zip
from gpuinfra_roles.health import COMMAND, PROGRAM, ZIP, health
from tests.plan.harness import FakeHost, load_facts, plan, plan_hosts, upload_text

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
GPU = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all",
       "ssh_hostname": "10.0.0.11"}


def fresh(distro: str) -> dict:
    return load_facts("base-fresh", distro, "gpu-fresh", f"gpu-{distro}")


def uploads(result) -> dict[str, str]:
    return {c.dest: upload_text(c.src) for op in result.ops for c in op.raw
            if hasattr(getattr(c, "src", None), "getvalue")}


@pytest.mark.parametrize("distro", DISTROS)
def test_a_gpu_worker_gets_the_program_its_library_and_its_expectation(distro):
    result = plan(health, fresh(distro), GPU)
    installs = [c for c in result.op("Install Python 3").commands if " install " in c]
    # Debian 12's recorded GPU node has python3 already; the Ubuntu ones get it.
    assert all(c.endswith("install --no-install-recommends python3") for c in installs)
    assert bool(installs) == (distro != "debian-12")
    files = uploads(result)
    digest = hashlib.sha256(node_zip()).hexdigest()
    assert files[ZIP] == f"<binary: {len(node_zip())} bytes, sha256 {digest}>"
    assert files[PROGRAM].startswith('"""gpuinfra-health: the node health check')
    for mode, path in [(None, COMMAND), *HEALTH_PROGRAMS.items()]:
        assert files[path].endswith(f"exec /usr/bin/python3 -I {PROGRAM}"
                                    f"{f' {mode}' if mode else ''} \"$@\"\n")
    staged = next(text for dest, text in files.items() if dest.endswith("/health.json"))
    expect = json.loads(staged)
    assert (expect["gpus"]["count"], expect["gpus"]["topology"]) == (8, "nvswitch-all-to-all")
    # The program itself judges the staged copy before it replaces the live file.
    check = " ".join(result.op("checked by the health check itself").commands)
    assert f"{COMMAND} validate /etc/gpuinfra/.gpuinfra-staged/health.json" in check
    assert check.index("validate") < check.index(f"mv -f {PATH}.gpuinfra-new {PATH}")


def test_the_role_off_removes_the_expectation_and_installs_nothing():
    result = plan(health, fresh("debian-12"), {**GPU, "health_enabled": False})
    assert [op.name for op in result.ops] == [f"health | {PATH} absent (health_enabled is False)"]


def test_a_kubernetes_only_worker_gets_no_slurm_hooks():
    """Issue 46 item 5: each node gets its own scheduler's files only. A Kubernetes-only GPU
    worker (node-problem-detector runs the command there) gets the command, not the Slurm
    HealthCheckProgram/Prolog/Epilog scripts, which are removed if an earlier deploy left them.
    A node of no scheduler (the role run alone, as in the test above) keeps them."""
    facts = fresh("debian-12")
    hosts = [FakeHost("k8s-head", ("head",), facts, {"node_address": "10.0.0.10"}),
             FakeHost("gpu01", ("workers",), facts, {**GPU, "node_address": "10.0.0.11"})]
    result = plan_hosts(health, hosts, ["gpu01"], {"schedulers": ["kubernetes"]}).plans["gpu01"]
    files = uploads(result)
    assert COMMAND in files
    assert not set(HEALTH_PROGRAMS.values()) & set(files)
    for path in HEALTH_PROGRAMS.values():
        assert result.op(f"{path} absent (a Kubernetes node, not Slurm's)")
