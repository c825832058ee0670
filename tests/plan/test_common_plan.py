"""Plan tests of the `common` role on recorded facts: Debian 12, Ubuntu 22.04 and 24.04."""

from __future__ import annotations

import pytest

from gpuinfra.platforms import UnsupportedOS
from gpuinfra_deploy.ops.apt import APT_STAGE, AptHealth
from gpuinfra_roles.common import CHRONY_SOURCES, PROXY_FILE, common
from gpuinfra_roles.common.defaults import DEFAULTS
from tests.plan.harness import MissingFact, load_facts, plan, upload_text

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
NODE = {"ssh_hostname": "10.0.0.5"}


@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_host_gets_the_whole_base(distro):
    result = plan(common, load_facts("base-fresh", distro), NODE)
    assert result.op("Set the hostname").commands[0] == "hostnamectl set-hostname node1"
    hosts = result.op("List every cluster node")
    assert upload_text(hosts.raw[0].src) == "10.0.0.5 node1\n"
    assert hosts.commands[1].startswith("touch /etc/hosts && ")
    install = result.op("Install base packages").commands
    assert install[0] == "apt-get update"
    assert install[-1].endswith("install --no-install-recommends " +
                                " ".join(_missing(distro)))
    assert result.op("Run chrony").commands == ("systemctl start chrony.service",
                                                "systemctl enable chrony.service")
    for key, value in DEFAULTS["common_sysctls"].items():
        assert f"sysctl {key}={value}" in result.op(f"Set {key}").commands
    assert result.op("Create the admin group").commands == ("groupadd -r gpuadmin",)
    assert result.op("No apt proxy").commands == ()
    assert result.op("Reload chrony sources").commands == ()  # no NTP change: no reload


def _missing(distro: str) -> list[str]:
    installed = load_facts(distro)["deb.DebPackages"]
    return [p for p in DEFAULTS["common_packages"] if p not in installed]


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_host_plans_no_command(distro):
    result = plan(common, load_facts("base-fresh", distro, "common-converged"), NODE)
    assert result.commands == [], result.changing


def test_converged_check_can_fail():
    """The converged fixture minus one package must plan exactly that install."""
    facts = load_facts("base-fresh", "debian-12", "common-converged")
    del facts["deb.DebPackages"]["chrony"]
    result = plan(common, facts, NODE)
    assert [op.name for op in result.changing] == ["common | Install base packages"]
    assert result.commands[-1].endswith("install --no-install-recommends chrony")


def test_site_proxy_and_ntp_servers_are_configured_and_chrony_reloaded():
    data = {**NODE, "apt_proxy": "http://proxy.example:3128",
            "common_ntp_servers": ["ntp1.example", "ntp2.example"]}
    result = plan(common, load_facts("base-fresh", "debian-12", "common-converged"), data)
    changed = {op.name.split(" | ")[1] for op in result.changing}
    assert changed == {"Send apt through the site's proxy",
                       "Point chrony at the site's NTP servers", "Reload chrony sources"}
    assert any(PROXY_FILE in c for c in result.op("proxy").commands)
    # The file may hold proxy credentials: root only, never world-readable.
    assert f"chmod 640 {PROXY_FILE}" in result.op("proxy").commands
    assert f"chown root:root {PROXY_FILE}" in result.op("proxy").commands
    assert any(CHRONY_SOURCES in c for c in result.op("NTP servers").commands)
    assert result.op("Reload chrony sources").commands == ("systemctl reload chrony.service",)


def test_host_without_known_address_gets_no_hosts_block():
    # (monitoring off: with it on, the gate refuses a host without an address)
    result = plan(common, load_facts("base-fresh", "debian-12"),
                  {"ssh_hostname": "node1.dc", "monitoring_enabled": False})
    assert not [op for op in result.ops if "/etc/hosts" in op.name]


def test_unsupported_os_is_named_with_the_supported_ones():
    with pytest.raises(UnsupportedOS, match="debian-12, debian-13, ubuntu-22.04, ubuntu-24.04"):
        plan(common, load_facts("base-fresh", "centos-9"), NODE)


def test_fixture_missing_a_fact_fails_loudly():
    facts = load_facts("base-fresh", "debian-12")
    del facts["server.Groups"]
    with pytest.raises(MissingFact, match="server.Groups"):
        plan(common, facts, NODE)


MIRRORS = {"debian": "http://mirror.site/debian", "ubuntu": "http://mirror.site/ubuntu"}
SOURCES = {"debian-12": "/etc/apt/sources.list.d/debian.sources",
           "ubuntu-22.04": "/etc/apt/sources.list", "ubuntu-24.04":
           "/etc/apt/sources.list.d/ubuntu.sources"}


@pytest.mark.parametrize("distro", DISTROS)
def test_offline_site_points_apt_at_its_mirror(distro):
    result = plan(common, load_facts("base-fresh", distro, "common-converged"),
                  {**NODE, "apt_mirror": MIRRORS})
    path = SOURCES[distro]
    keep = result.op(f"Keep the original {path}").commands
    point = result.op(f"Point {path} at the site's apt mirror").commands
    assert any(f"{path}.gpuinfra-orig" in c for c in keep)
    assert any(path in c for c in point)
    assert result.op("Refresh apt lists").commands == ("apt-get update",)
    # Ubuntu 24.04's sources.list holds only a comment: nothing to point, nothing written.
    assert not [op for op in result.ops if op.name.endswith("/etc/apt/sources.list")
                and distro == "ubuntu-24.04"]


def test_sources_already_on_the_mirror_plan_nothing():
    facts = load_facts("base-fresh", "debian-12", "common-converged")
    facts["files.FileContents"] = {"path=/etc/apt/sources.list": [
        "deb http://mirror.site/debian bookworm main"], "*": None}
    result = plan(common, facts, {**NODE, "apt_mirror": "http://mirror.site/debian"})
    assert result.commands == []


# ----------------------------------------------------------------------------- apt ready

def test_fresh_host_gets_the_lock_wait_checked_by_apt_config_first():
    result = plan(common, load_facts("base-fresh", "debian-12"), NODE)
    first = result.changing[0]
    assert "waits up to 300 s for the dpkg lock" in first.name
    check = [c for c in first.commands if "apt-config" in c]
    assert check and f"apt-config -c {APT_STAGE}/90gpuinfra-lock-timeout dump" in check[0]
    assert result.op("dpkg ready").commands == ()  # nothing interrupted, nothing running


def test_an_interrupted_dpkg_is_finished_before_any_apt_get():
    facts = load_facts("base-fresh", "debian-12")
    facts["gpuinfra_deploy.ops.apt.AptHealth"] = {"interrupted": True, "running": []}
    result = plan(common, facts, NODE)
    assert result.op("dpkg ready").commands == (
        "DEBIAN_FRONTEND=noninteractive dpkg --configure -a --force-confdef --force-confold",)
    names = [op.name for op in result.changing]
    position = {words: next(i for i, n in enumerate(names) if words in n)
                for words in ("dpkg ready", "Install base packages")}
    assert position["dpkg ready"] < position["Install base packages"]


def test_a_running_apt_is_waited_for_with_a_bound():
    facts = load_facts("base-fresh", "debian-12", "common-converged")
    facts["gpuinfra_deploy.ops.apt.AptHealth"] = {"interrupted": True, "running": ["apt-get"]}
    wait, configure = plan(common, facts, NODE).op("dpkg ready").commands
    assert "while pgrep -x 'apt|apt-get|aptitude|dpkg|unattended-upgr'" in wait
    assert "+ 300 ))" in wait and "exit 1" in wait
    assert configure.startswith("DEBIAN_FRONTEND=noninteractive dpkg --configure -a")


def test_apt_health_fact_reads_dpkg_and_the_process_table():
    fact = AptHealth()
    assert "/var/lib/dpkg/updates" in fact.command() and "dpkg --audit" in fact.command()
    assert fact.process([]) == {"interrupted": False, "running": []}
    # pyinfra answers default() when the command prints nothing (the usual, healthy case)
    assert fact.default() == {"interrupted": False, "running": []}
    assert fact.process(["interrupted", "running apt-get", "running dpkg"]) == {
        "interrupted": True, "running": ["apt-get", "dpkg"]}


def test_a_limited_run_names_the_hosts_whose_hosts_file_it_leaves(caplog):
    """A run that does not reach some hosts (``--limit``) says which keep /etc/hosts as of
    their last run; a run reaching every host says nothing of it."""
    from tests.plan.harness import FakeHost, plan_hosts
    from tests.plan.test_slurm_plan import not_reached

    facts = load_facts("base-fresh", "debian-12")
    hosts = [FakeHost("head1", ("head",), facts, {"ssh_hostname": "10.0.0.10"}),
             FakeHost("node1", ("workers",), facts, {"ssh_hostname": "10.0.0.11"}),
             FakeHost("node2", ("workers",), facts, {"ssh_hostname": "10.0.0.12"})]
    said = "their /etc/hosts lists the nodes as of their last run"
    with caplog.at_level("WARNING"):
        plan_hosts(common, hosts, ["head1"])
    assert said not in caplog.text
    with not_reached("node2"), caplog.at_level("WARNING"):
        plan_hosts(common, hosts, ["head1"])
    assert f"not in this run: node2: {said}" in caplog.text
