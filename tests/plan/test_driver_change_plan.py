"""Plan tests of the `nvidia_driver` role's refusal to change the driver under running GPU
processes (issue 26, item 4), on Debian 12, Ubuntu 22.04 and 24.04.

The node: the converged GPU node of tests/plan/test_nvidia_driver_plan.py (branch 535
installed, held, loaded), its GPU 0 running the two processes of a real
`--query-compute-apps` capture (tests/fixtures/compute-apps: TensorFlowOnSpark issue 146; its
first three columns, the project's query); the fact is the one the MIG plan reads
(NvidiaMigState). The change: the site moves to branch 570 (or to another 535 build). A
refusal is the guard's one command, which fails the host with the message on stderr (so
pyinfra stops that host before its package changes and goes on with the others); the tests
run that command here.
"""

from __future__ import annotations

import logging
import shlex
import subprocess

import pytest

from gpuinfra.driverchange import OVERRIDE
from gpuinfra.knowledge.packages import DRIVER_VERSIONS
from gpuinfra_roles.nvidia_driver import nvidia_driver
from tests.plan.harness import plan
from tests.plan.test_nvidia_driver_plan import DISTROS, NODE, converged, fresh
from tests.unit.test_driverchange import UUID, captured_rows

MIG_STATE = "gpuinfra_deploy.facts.nvidia.NvidiaMigState"
BRANCH_570 = {**NODE, "driver_branch": "570"}
GUARD = "Change the NVIDIA driver only where no GPU process runs"


def busy(facts: dict) -> dict:
    """``facts`` with the captured processes running on GPU 0 (the capture's GPU UUID)."""
    state = dict(facts[MIG_STATE])
    state["list"] = state["list"].replace("GPU-00000000-0000-0000-0000-000000000000", UUID)
    state["apps"] = captured_rows()
    return {**facts, MIG_STATE: state}


def install_line(result) -> str:
    return result.op("Install the NVIDIA driver").commands[-1]


def refusal(result) -> str:
    """The message the guard stops the host with, from running its one command."""
    (command,) = result.op(GUARD).commands
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    assert run.returncode == 1 and run.stdout == "", run
    assert command == f"printf '%s\\n' {shlex.quote(run.stderr[:-1])} >&2; exit 1"
    return run.stderr[:-1]


@pytest.mark.parametrize("distro", DISTROS)
def test_a_branch_change_under_processes_is_refused_naming_them(distro):
    message = refusal(plan(nvidia_driver, busy(converged(distro)), BRANCH_570))
    assert message.startswith("nvidia_driver: node1: not changing the NVIDIA driver while 2 GPU "
                              f"process(es) run: pid 4910 /usr/bin/python on GPU 0 ({UUID}); "
                              f"pid 4911 /usr/bin/python on GPU 0 ({UUID}).")
    # the version it would install, and what is there now: Debian keeps the package names,
    # Ubuntu's carry the branch
    now = "535.261.03-1" if distro == "debian-12" else "not installed"
    assert f" {DRIVER_VERSIONS[(distro, '570')]} (now: {now})" in message
    assert "cannot be unloaded under them" in message
    assert f"set {OVERRIDE} = True for this host" in message
    assert message.endswith("The driver on node1 was left as it is")


def test_a_new_build_of_the_same_branch_under_processes_is_refused_too():
    data = {**NODE, "nvidia_driver_version": "535.309.01-0+deb12u1"}
    message = refusal(plan(nvidia_driver, busy(converged("debian-12")), data))
    assert "would install nvidia-kernel-dkms 535.309.01-0+deb12u1 (now: 535.261.03-1)" in message


@pytest.mark.parametrize("distro", DISTROS)
def test_a_first_install_is_never_refused(distro):
    """No nvidia-smi yet (gpu-fresh: NvidiaMigState is {}): the driver goes in."""
    result = plan(nvidia_driver, fresh(distro), BRANCH_570)
    assert f"={DRIVER_VERSIONS[(distro, '570')]}" in install_line(result)
    assert result.op(GUARD).commands == ()


@pytest.mark.parametrize("distro", DISTROS)
def test_an_unchanged_driver_is_never_refused_and_says_nothing(distro, caplog):
    with caplog.at_level(logging.WARNING):
        result = plan(nvidia_driver, busy(converged(distro)), NODE)
    assert result.commands == [], result.changing
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("distro", DISTROS)
def test_the_override_changes_the_driver_under_them_with_a_warning(distro, caplog):
    data = {**BRANCH_570, OVERRIDE: True}
    with caplog.at_level(logging.WARNING):
        result = plan(nvidia_driver, busy(converged(distro)), data)
    assert f"={DRIVER_VERSIONS[(distro, '570')]}" in install_line(result)
    assert result.op(GUARD).commands == ()
    assert "changing the NVIDIA driver under 2 GPU process(es)" in caplog.text
    assert "pid 4910 /usr/bin/python" in caplog.text


def test_the_check_comes_before_any_package_change():
    result = plan(nvidia_driver, converged("ubuntu-24.04"), BRANCH_570)
    names = [op.name for op in result.ops]
    guard = next(i for i, name in enumerate(names) if GUARD in name)
    changing = [i for i, op in enumerate(result.ops) if op.commands]
    assert changing and guard < min(changing)
    assert result.op(GUARD).commands == ()  # a check: it never runs a command


def test_an_idle_node_changes_its_driver():
    result = plan(nvidia_driver, converged("debian-12"), BRANCH_570)
    assert f"nvidia-smi={DRIVER_VERSIONS[('debian-12', '570')]}" in install_line(result)
    assert result.op(GUARD).commands == ()


def test_an_unreadable_process_list_is_refused():
    facts = busy(converged("ubuntu-22.04"))
    facts[MIG_STATE] = {**facts[MIG_STATE], "apps": f"{UUID}, [N/A], /usr/bin/python"}
    assert "GPU processes running there cannot be read" in refusal(
        plan(nvidia_driver, facts, BRANCH_570))
