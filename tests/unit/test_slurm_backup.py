"""Issue 45 items 3 and 5: Slurm's backup controllers (the 'slurm_backup' group) with a shared
StateSaveLocation: refused before any host is touched without one, and in slurm.conf, slurmd's
--conf-server and the role's shared-folder check when given; login nodes (the 'login' group):
in Slurm alone, no slurmd, and hosts of their own."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from gpuinfra.parsers.slurm import parse_scontrol_ping
from gpuinfra.slurm.conf import slurm_conf
from gpuinfra.slurm.running import conf_server, configless_dropin
from gpuinfra.spec import HostInput
from gpuinfra_deploy.ops.checked import digest
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_deploy.templates import role_file
from gpuinfra_lab.controller_failover import ping_states
from gpuinfra_lab.podman import wanted_labels
from gpuinfra_lab.profiles import BACKUP_NAME, host_address, plan_hosts
from gpuinfra_roles.slurm.operations import STATE_MARK, state_mark_text, state_shared_script
from tests.unit.test_slurmconf import SETTINGS
from tests.unit.test_spec_cross import PCIE, problems

SHARED = {"slurm_state_save_location": "/shared/slurm/state"}


def hosts(backup: dict[str, Any] | None = None, groups: tuple[str, ...] = ("slurm_backup",),
          **everywhere: Any) -> list[HostInput]:
    every = {**SHARED, **everywhere}
    return [HostInput("head01", ("head",), {"node_address": "10.0.0.1", **every}),
            HostInput("ctl02", groups, {"node_address": "10.0.0.2", **every, **(backup or {})}),
            HostInput("gpu01", ("workers",), {"node_address": "10.0.0.3", **PCIE, **every})]


def test_a_backup_with_shared_state_is_a_second_slurmctld_host() -> None:
    assert problems(hosts()) == []
    spec = build_spec(hosts())
    backup = spec.node("ctl02")
    assert backup.is_backup_controller and backup.is_controller and not backup.is_worker
    assert backup.schedulers == ("slurm",)
    conf = slurm_conf(spec, addresses={n.name: n.address for n in spec.nodes},
                      hardware={"gpu01": None}, gres_type_of={"gpu01": "gpu"})
    assert conf.controller_hosts == ["head01(10.0.0.1)", "ctl02(10.0.0.2)"]
    text = role_file("slurm", "/etc/slurm/slurm.conf", conf=conf,
                     settings={**SETTINGS, "state_save_location": "/shared/slurm/state",
                               "ctld_timeout": 20})
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert [line for line in lines if line.startswith("SlurmctldHost=")] == [
        "SlurmctldHost=head01(10.0.0.1)", "SlurmctldHost=ctl02(10.0.0.2)"]
    assert "StateSaveLocation=/shared/slurm/state" in lines
    assert "SlurmctldTimeout=20" in lines
    # Only the workers are Slurm nodes: the backup has no NodeName line.
    assert [n.name for n in conf.nodes] == ["gpu01"]


def test_slurmd_knows_every_controller_primary_first() -> None:
    server = conf_server("head01", "10.0.0.1", [("ctl02", "10.0.0.2"), ("ctl03", None)])
    assert server == "10.0.0.1:6817,10.0.0.2:6817,ctl03:6817"
    assert f"--conf-server {server} " in str(configless_dropin(server))


def test_a_backup_without_shared_state_is_refused() -> None:
    found = [e for e in problems(hosts(slurm_state_save_location="/var/lib/slurm/slurmctld"))
             if e.field == "slurm_state_save_location"]
    assert len(found) == 1 and found[0].host == "ctl02"
    assert "each host's own disk" in found[0].problem and "ctl02" in found[0].problem
    assert "mount a shared filesystem" in found[0].fix
    # The default (no slurm_state_save_location at all) is the same local folder.
    bare = [HostInput(h.name, h.groups, {k: v for k, v in h.data.items()
                                         if k != "slurm_state_save_location"})
            for h in hosts()]
    assert [e.field for e in problems(bare)] == ["slurm_state_save_location"]


@pytest.mark.parametrize(("value", "words"), [
    ("relative/state", "absolute path"), ("/tmp/slurm", "not under"), ("/run/slurm", "not under"),
    ("/shared/../etc", "'..'"), ("/shared/my state", "spaces"), ("/", "absolute path"),
])
def test_a_state_folder_that_would_not_survive_is_refused(value: str, words: str) -> None:
    found = [e for e in problems(hosts(slurm_state_save_location=value))
             if e.field == "slurm_state_save_location"]
    assert found and words in found[0].allowed + found[0].problem, found


@pytest.mark.parametrize(("groups", "words"), [
    (("slurm_backup", "workers"), "a worker's CPUs and memory are its jobs'"),
    (("slurm_backup", "head"), "the head runs the primary slurmctld"),
    (("slurm_backup", "hypervisors"), "VMs'"),
])
def test_a_backup_is_a_host_of_its_own(groups: tuple[str, ...], words: str) -> None:
    found = [e for e in problems(hosts(groups=groups)) if e.field == "group"]
    assert any(words in e.problem for e in found), [e.problem for e in found]


def test_a_backup_on_a_site_without_slurm_and_other_schedulers_are_refused() -> None:
    k8s = [e for e in problems(hosts(schedulers=["kubernetes"])) if e.host == "ctl02"]
    assert any("without Slurm" in e.problem for e in k8s), k8s
    other = [e for e in problems(hosts(backup={"node_schedulers": ["kubernetes"]},
                                       schedulers=["slurm", "kubernetes"],
                                       scheduler_sharing="drain"))
             if e.field == "node_schedulers"]
    assert any("and nothing else's" in e.problem for e in other), other


def test_the_site_may_not_set_the_controllers_in_slurm_conf_extra() -> None:
    for key in ("SlurmctldHost", "StateSaveLocation", "SlurmctldTimeout"):
        found = [e for e in problems(hosts(slurm_conf_extra={key: "x"}))
                 if e.field.startswith("slurm_conf_extra")]
        assert found, key


def run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)


def test_the_backup_refuses_a_state_folder_it_does_not_share(tmp_path) -> None:
    """The check the backup runs before its slurmctld starts: it passes only when the head's
    mark is in the folder (shared), and otherwise fails saying what to mount."""
    text = state_mark_text("lab", "head01")
    script = state_shared_script(str(tmp_path), "head01", digest(text), "ctl02", wait_s=1)
    missing = run(script)
    assert missing.returncode == 1
    assert "ctl02 does not see head01's file" in missing.stderr
    assert "Mount the shared filesystem" in missing.stderr
    (tmp_path / STATE_MARK).write_text(state_mark_text("other-cluster", "head01"))
    assert run(script).returncode == 1
    (tmp_path / STATE_MARK).write_text(text)
    assert run(script).returncode == 0


def test_scontrol_ping_is_read_per_controller() -> None:
    """22.05.8's lines (src/scontrol/scontrol.c _print_ping: "Slurmctld(%s) at %s is %s")."""
    text = ("Slurmctld(primary) at lab-head is DOWN\n"
            "Slurmctld(backup) at lab-head2 is UP\n")
    assert parse_scontrol_ping(text) == {"lab-head": ("primary", "DOWN"),
                                         "lab-head2": ("backup", "UP")}
    assert ping_states(text) == {"primary": "DOWN", "backup": "UP"}
    assert parse_scontrol_ping("slurm_load_ctl_conf error: Unable to contact") == {}


def test_lab_up_backup_adds_a_controller_sharing_the_heads_state() -> None:
    plan = plan_hosts(backup=True)
    assert [(h.name, h.groups, h.shared_state) for h in plan[:2]] == [
        ("lab-head", ("head",), True), (BACKUP_NAME, ("slurm_backup",), True)]
    assert not any(h.shared_state for h in plan_hosts())
    assert host_address("10.89.0.0/24", BACKUP_NAME) == "10.89.0.9"
    labels = wanted_labels(plan[1], "img", "10.89.0.9", "id")
    assert labels["gpuinfra.lab.shared-state"] == "1"
    head = wanted_labels(plan_hosts()[0], "img", "10.89.0.10", "id")
    assert head["gpuinfra.lab.shared-state"] == ""


def login_site(groups: tuple[str, ...] = ("login",), **data: Any) -> list[HostInput]:
    return [*hosts(), HostInput("login01", groups, {"node_address": "10.0.0.9", **SHARED,
                                                    **data})]


def test_a_login_node_is_in_slurm_alone_with_no_slurmd() -> None:
    assert problems(login_site()) == []
    spec = build_spec(login_site())
    login = spec.node("login01")
    assert login.is_login and not (login.is_worker or login.is_controller)
    assert login.schedulers == ("slurm",)
    conf = slurm_conf(spec, addresses={n.name: n.address for n in spec.nodes},
                      hardware={"gpu01": None}, gres_type_of={"gpu01": "gpu"})
    assert [n.name for n in conf.nodes] == ["gpu01"]  # no NodeName line: no slurmd there


@pytest.mark.parametrize(("groups", "data", "words"), [
    (("login", "workers"), {}, "a worker runs slurmd and a login node none"),
    (("login", "head"), {}, "users' sessions on the head"),
    (("login", "slurm_backup"), {}, "a Slurm backup controller is a host of its own"),
    (("login",), {"node_schedulers": ["kubernetes"]}, "Slurm's (its backup controller, or a "
                                                      "login node) and nothing else's"),
])
def test_a_login_node_that_is_something_else_too_is_refused(groups, data, words) -> None:
    found = [e for e in problems(login_site(groups, **data)) if e.host == "login01"]
    assert any(words in e.problem for e in found), [e.problem for e in found]
