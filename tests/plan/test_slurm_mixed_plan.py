"""Issue 49 item 3: a Slurm site whose head and workers are on different releases (Debian 12's
Slurm 22.05, Debian 13's 24.11) is refused while pyinfra plans, before any host is changed,
by the whole deploy and by `gpuinfra render`; a host the run does not reach is said, not
passed over (gpuinfra.slurm.mixed, roles/slurm/checks.py one_slurm_site)."""

from __future__ import annotations

import copy
import logging
from unittest import mock

import pytest
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.host import Host

from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy import render
from tests.plan.harness import DEPLOY, REPO, FakeHost, load_facts, plan_hosts
from tests.plan.test_slurm_plan import not_reached

DISTRIBUTION = "server.LinuxDistribution"
SITE = {"cluster_name": "t", "nvidia_driver_kernel_headers": False,
        "fabric_manager_enabled": False, "container_toolkit_enabled": False,
        "monitoring_dcgm": False}  # DCGM on trixie needs a repository of its own
GPU = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}


def on_debian_13(facts: dict) -> dict:
    """``facts`` of a Debian 12 host, its /etc/os-release saying Debian 13 (trixie): a recorded
    host upgraded in place."""
    facts = copy.deepcopy(facts)
    facts[DISTRIBUTION]["major"] = 13
    facts[DISTRIBUTION]["release_meta"].update(
        VERSION_ID="13", VERSION_CODENAME="trixie", PRETTY_NAME="Debian GNU/Linux 13 (trixie)")
    return facts


def head(distro: str) -> FakeHost:
    facts = load_facts("base-fresh", distro, "munge-fresh", "slurm-fresh", "monitoring-fresh")
    return FakeHost("head", ("head",), facts, {"ssh_hostname": "10.0.0.1"})


def worker(distro: str) -> FakeHost:
    facts = load_facts("base-fresh", distro, "gpu-fresh", f"gpu-{distro}", "munge-fresh",
                       "slurm-fresh", "slurm-lab-worker1")
    return FakeHost("gpu1", ("workers",), facts, {"ssh_hostname": "10.0.0.2", **GPU})


@pytest.fixture
def no_command():
    """Every command any host would run: none may (planning reads facts only, answered here)."""
    ran: list[str] = []
    with mock.patch.object(Host, "run_shell_command",
                           lambda self, *a, **k: ran.append(self.name) or (True, None)):
        yield ran


@pytest.mark.parametrize("head_on,worker_on,first,says", [
    ("debian-12", "debian-13", "head",
     "slurmd on gpu1 (debian-13, Slurm 24.11) is newer than slurmctld on head (debian-12, "
     "Slurm 22.05), which accepts no newer release"),
    ("debian-13", "debian-12", "gpu1",
     "slurmd on gpu1 (debian-12, Slurm 22.05) is too old for slurmctld on head (debian-13, "
     "Slurm 24.11), which accepts 24.05, 23.11, 23.02 besides its own"),
])
def test_a_head_and_a_worker_on_debian_12_and_13_stop_the_plan_before_any_change(
        head_on, worker_on, first, says, no_command):
    """Whichever host pyinfra plans first (the head, or a worker), the deploy stops there, on
    the first Slurm role it plans: no command ran on any host."""
    targets = [first, *({"head", "gpu1"} - {first})]
    with pytest.raises(GpuinfraError) as err:
        plan_hosts(DEPLOY, [head(head_on), worker(worker_on)], targets, SITE)
    message = str(err.value)
    assert isinstance(err.value, PyinfraError)  # pyinfra prints it and stops, no traceback
    assert says in message
    assert "(SchedMD's Upgrade Guide, https://slurm.schedmd.com/upgrades.html" in message
    assert "Fix: keep every Slurm node on one release, or move the whole Slurm site" in message
    assert message.count("Slurm's rule") == 1
    assert no_command == []


def test_one_release_everywhere_and_a_mix_slurm_runs_plan_as_usual(no_command):
    """Debian 12 or 13 everywhere, and a head on Ubuntu 24.04 (Slurm 23.11) over a Debian 12
    worker (22.05: within 23.11's window): both hosts plan their Slurm as usual."""
    for head_on, worker_on in (("debian-12", "debian-12"), ("debian-13", "debian-13"),
                               ("ubuntu-24.04", "debian-12")):
        plans = plan_hosts(DEPLOY, [head(head_on), worker(worker_on)], ["head", "gpu1"],
                           SITE).plans
        for name in ("head", "gpu1"):
            assert any(op.name.startswith("slurm |") for op in plans[name].changing), head_on
    assert no_command == []


def test_a_worker_the_run_does_not_reach_is_said_not_passed_over(caplog, no_command):
    """`--limit head` with the worker on Debian 13: its release is not read (pyinfra does not
    connect to it), so the check cannot judge it; the run says so and goes on."""
    with caplog.at_level(logging.WARNING), not_reached("gpu1"):
        plans = plan_hosts(DEPLOY, [head("debian-12"), worker("debian-13")], ["head"], SITE).plans
    assert any(op.name.startswith("slurm |") for op in plans["head"].changing)
    said = [r.getMessage() for r in caplog.records if "not reached by this run" in r.getMessage()]
    assert said == ["slurm: not reached by this run: gpu1: their distribution was not read, so "
                    "Slurm's version rules (slurmdbd >= slurmctld >= slurmd, SchedMD's upgrade "
                    "guide) were checked among the others only (debian-12); a run that reaches "
                    "every Slurm node checks them all"]


def test_render_refuses_recorded_facts_of_mixed_releases(capsys):
    """`gpuinfra render --os debian-12` of the example site, one worker's recorded facts
    saying Debian 13: the render stops with the deploy's refusal, naming the worker."""
    example = str(REPO / "inventory" / "example.py")
    recorded = {"hgx01": {DISTRIBUTION: on_debian_13(load_facts("debian-12"))[DISTRIBUTION]}}
    with pytest.raises(GpuinfraError, match=r"slurmd on hgx01 \(debian-13, Slurm 24.11\) is "
                                            r"newer than slurmctld on head01, head02 "
                                            r"\(debian-12, Slurm 22.05\)"):
        render.render_site(example, os_name="debian-12", recorded=recorded)
