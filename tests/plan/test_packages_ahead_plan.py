"""deploy.py installs the roles' plain packages in one apt transaction per host, right after
the common role (gpuinfra_deploy/run/ahead.py): each role's own install then finds them there.

Held on the example site rendered with fresh Debian 12 and Ubuntu 24.04 facts: every package a
role installs unpinned later in the deploy is in that host's one transaction, but for the
installs that stay the role's own, each named here with why. A role that starts installing a
package without declaring it (``Role.packages``) fails here: the deploy would still work, one
apt transaction slower per host.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest

from gpuinfra_deploy.render import render_site
from gpuinfra_deploy.run.ahead import NAME
from gpuinfra_lab.fleet import install_args
from tests.plan.harness import DEPLOY, REPO, plan_hosts
from tests.plan.test_deploy_plan import HEAD, SITE, WORKER, _changing

EXAMPLE = str(REPO / "inventory" / "example.py")
AHEAD = f"packages | {NAME}"

# Installs that stay the role's own: op name -> the packages it may add (None: any), and why.
OWN = {
    # Names the operator may set (nvidia_driver_kernel_headers), installed with the driver.
    "nvidia_driver | Install kernel headers for DKMS": None,
    # The inbox stack goes in only after DOCA-OFED's repository is removed: before that, apt
    # could take DOCA's versions of the same names.
    "rdma | Install the RDMA stack": None,
    # contrib / multiverse, built against the driver's NVML: after the driver's sources and pins.
    "slurm | Install Slurm": {"slurm-wlm-nvml-plugin"},
}


@pytest.fixture(scope="module", params=["debian-12", "ubuntu-24.04"])
def rendered(request):
    quiet = logging.getLogger("pyinfra")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return request.param, render_site(EXAMPLE, os_name=request.param)
    finally:
        quiet.setLevel(level)


def _own_installs_beyond_ahead(result) -> dict[tuple[str, str], list[str]]:
    """(host, op) -> the unpinned packages a role's own install adds to what the host's one
    transaction installed (pinned ``name=version`` words are the pinned installs' own)."""
    found = {}
    for host, ops in result.ops.items():
        names = [name for name, _ in ops]
        assert names.count(AHEAD) == 1, (host, "no single ahead install")
        at = names.index(AHEAD)
        before = {name.split(" | ")[0] for name in names[:at]}
        assert before == {"common"}, (host, before)  # right after apt is set up, nothing else
        ahead = {w for c in ops[at][1] for w in install_args(c)}
        for name, commands in ops[at + 1:]:
            plain = [w for c in commands for w in install_args(c) if "=" not in w]
            beyond = [w for w in plain if w not in ahead]
            allowed = next((v for k, v in OWN.items() if name.startswith(k)), set())
            if allowed is not None:
                beyond = [w for w in beyond if w not in allowed]
                if beyond:
                    found[(host, name)] = beyond
    return found


def test_every_role_package_is_in_the_one_transaction(rendered):
    os_name, result = rendered
    assert _own_installs_beyond_ahead(result) == {}, os_name


def test_the_one_transaction_holds_each_roles_packages(rendered):
    os_name, result = rendered
    ahead = {host: {w for name, cmds in ops if name == AHEAD for c in cmds for w in install_args(c)}
             for host, ops in result.ops.items()}
    # The head: Slurm's controller, Prometheus, the logs' receiver (the example keeps no
    # accounting: MariaDB is the lab's, held by the cold deploy in bench.cold).
    assert {"slurmctld", "prometheus", "systemd-journal-remote", "munge"} <= ahead["head01"]
    if os_name == "debian-12":
        assert "stunnel4" in ahead["head01"]
        assert "python3-yaml" in ahead["hgx02"]  # the MIG node's YAML reader
    # The hypervisor: driverctl (vfio); no worker gets the head's daemons.
    assert "driverctl" in ahead["kvm01"]
    assert not {"slurmctld", "prometheus"} & ahead["hgx01"]


def test_a_role_package_left_undeclared_goes_red(rendered, monkeypatch):
    """The check above can fail: monitoring's node_exporter list without dbus."""
    from gpuinfra_roles import monitoring

    os_name, _ = rendered
    original = monitoring.packages
    monkeypatch.setattr(monitoring, "ROLE", dataclasses.replace(
        monitoring.ROLE, packages=lambda site, node: [p for p in original(site, node)
                                                      if p != "dbus"]))
    quiet = logging.getLogger("pyinfra")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        result = render_site(EXAMPLE, os_name=os_name)
    finally:
        quiet.setLevel(level)
    found = _own_installs_beyond_ahead(result)
    assert found and all(v == ["dbus"] and "node_exporter" in op for (_, op), v in found.items())


def test_a_failed_head_skips_the_one_transaction_and_the_roles_install_their_own():
    """Slurm's and MUNGE's packages are in it: with the head failed it is skipped like those
    roles, and the roles that still run (monitoring, logs, health) install their own."""
    up = plan_hosts(DEPLOY, [HEAD, WORKER], ["gpu1"], SITE).plans["gpu1"]
    down = plan_hosts(DEPLOY, [HEAD, WORKER], ["gpu1"], SITE, failed=["head"]).plans["gpu1"]
    assert _changing(up, "packages |") and _changing(down, "packages |") == []
    assert _changing(down, "health | Install Python 3")
