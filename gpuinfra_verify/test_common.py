"""The base role (roles/common) on every host: what `deploy.py` promises each node."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from testinfra.host import Host

from gpuinfra.parsers.system import UNIT_STATES_COMMAND, parse_unit_states
from gpuinfra.spec import NodeSpec
from gpuinfra_verify.expect import (
    SiteUnderTest,
    missing_hosts_entries,
    problem,
    sysctl_mismatches,
    unit_failures,
)
from gpuinfra_verify.failure import fail

Note = Callable[[str, object], None]


def _service_state(host: Host, name: str) -> str:
    service = host.service(name)
    running = "running" if service.is_running else "not running"
    return f"{running}, {'enabled' if service.is_enabled else 'disabled'}"


def test_hostname(host: Host, node: NodeSpec) -> None:
    assert host.check_output("hostname") == node.short_name


def test_etc_hosts_lists_cluster(host: Host, site: SiteUnderTest, node: NodeSpec) -> None:
    if not node.settings["common_manage_hosts"]:
        pytest.skip("common_manage_hosts is False in this site's data: the site resolves names "
                    "with DNS, the role leaves /etc/hosts alone")
    expected = {n.short_name: n.address for n in site.spec.nodes if n.address}
    missing = missing_hosts_entries(expected, host.file("/etc/hosts").content_string)
    assert not missing, "/etc/hosts lacks: " + ", ".join(missing)


def test_chrony(host: Host, note: Note) -> None:
    state = _service_state(host, "chrony")
    note("chrony", state)
    assert state == "running, enabled"


def test_sshd(host: Host, note: Note) -> None:
    state = _service_state(host, "ssh")
    note("sshd", state)
    assert state.startswith("running")


def test_sysctls(host: Host, node: NodeSpec) -> None:
    expected = node.settings["common_sysctls"]
    observed = {key: host.run(f"sysctl -n {key}").stdout.strip() for key in expected}
    mismatches = sysctl_mismatches(expected, observed)
    assert not mismatches, "sysctls differ:\n  " + "\n  ".join(mismatches)


def test_admin_group(host: Host, node: NodeSpec) -> None:
    group = node.settings["common_admin_group"]
    assert host.group(group).exists, f"group {group} does not exist"


def test_base_packages(host: Host, node: NodeSpec) -> None:
    packages = node.settings["common_packages"]
    missing = [name for name in packages if not host.package(name).is_installed]
    assert not missing, "base packages not installed: " + ", ".join(missing)


def test_no_failed_unit(host: Host, node: NodeSpec, node_data: dict, note: Note) -> None:
    """Every unit came up: a failed one (a daemon that did not come back after a reboot, a
    GPU helper without its driver) is a failure, unless the site's lab data expects it."""
    units = parse_unit_states(host.run(UNIT_STATES_COMMAND).stdout)
    failed, expected = unit_failures(units, node_data.get("lab_expected_failures") or {})
    note("failed_units", ", ".join(failed) or "none")
    if failed:
        fail(note, problem(
            node.name, f"failed systemd unit(s): {', '.join(failed)}",
            "a service did not start or came back failed after a reboot (a dependency not "
            "ready, a bad configuration, a missing driver)",
            f"`systemctl status {failed[0]}` and `journalctl -b -u {failed[0]}` on the host; "
            "fix the cause, then `systemctl restart` it and deploy again"))


# The daemons of the schedulers (roles/munge, roles/slurm, roles/kubernetes): a host outside
# every scheduler (a hypervisor, a service host: node_schedulers) runs none of them.
SCHEDULER_UNITS = ("munge", "slurmd", "slurmctld", "kubelet")


def test_a_host_outside_every_scheduler_runs_none(host: Host, node: NodeSpec,
                                                  note: Note) -> None:
    if node.schedulers:
        pytest.skip(f"in {', '.join(node.schedulers)}: its scheduler's own checks judge it")
    running = [unit for unit in SCHEDULER_UNITS if host.service(unit).is_running]
    note("scheduler daemons", ", ".join(running) or "none")
    if running:
        fail(note, problem(node.name, f"{', '.join(running)} running on a host in no scheduler",
                     f"node_schedulers of {node.name} is empty (or it is neither head nor "
                     "worker), so no role put them there: left from an earlier deploy or "
                     "installed by hand",
                     f"`systemctl disable --now {' '.join(running)}` on {node.name}, or add "
                     "the scheduler to its node_schedulers"))
