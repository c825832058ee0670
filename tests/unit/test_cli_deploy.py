"""`gpuinfra deploy` (gpuinfra_cli/deploy.py): the deploy, then the workers that need a reboot
rolled; its input refused before any host is touched, and what it does with what the
workers' markers say. Live in the lab: gpuinfra_lab/whole_deploy.py."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace as NS

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra_cli import deploy as cli
from gpuinfra_cli.main import main

INVENTORY = (
    'head = [("h1", {"ssh_hostname": "192.0.2.1"})]\n'
    'workers = [("w1", {"ssh_hostname": "192.0.2.2", "gpu_model": "H100-SXM5-80GB", '
    '"gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}), '
    '("w2", {"ssh_hostname": "192.0.2.3", "gpu_model": "H100-SXM5-80GB", "gpu_count": 8, '
    '"gpu_topology": "nvswitch-all-to-all"})]\n')


@pytest.mark.parametrize(("args", "words"), [
    (["--limit", "nosuch"], "--limit nosuch: not a host of inventory/site.py"),
    (["--max-unavailable", "0"], "--max-unavailable 0: at least one node"),
    (["--max-unavailable", "2"], "a roll never takes every worker out at once"),
    (["--max-unavailable", "150%"], "a share above 0% and at most 100%"),
    (["--wait-jobs", "-1"], "--wait-jobs -1: seconds, 0 or more"),
    (["--data", "novalue"], "--data 'novalue': KEY=VALUE"),
    (["--data", "reboot_policy=always"], "--data reboot_policy=always: one of never, if-needed"),
])
def test_bad_input_is_refused_before_any_host_is_touched(args, words, capsys, tmp_path,
                                                         monkeypatch) -> None:
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "site.py").write_text(INVENTORY)
    monkeypatch.chdir(tmp_path)
    ran: list[list[str]] = []
    real = subprocess.run
    monkeypatch.setattr(cli.subprocess, "run", lambda command, **kw: ran.append(command)
                        or real(command, **kw))
    assert main(["deploy", "--inventory", "inventory/site.py", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not [c for c in ran if "pyinfra" in str(c[0])]  # no deploy started


def test_the_last_data_reboot_policy_wins_over_the_sites() -> None:
    assert cli.policy_of("never", []) == "never"
    assert cli.policy_of("never", ["reboot_policy=if-needed"]) == "if-needed"
    assert cli.policy_of("if-needed", ['reboot_policy="never"', "x=1"]) == "never"
    with pytest.raises(GpuinfraError, match="one of never, if-needed"):
        cli.policy_of("never", ["reboot_policy=sometimes"])


def _flow(monkeypatch, policy: str, markers: dict[str, str], deploy_rc: int = 0,
          sudo: bool = False):
    """cmd_deploy with the site, pyinfra, the markers and the roll faked: what it ran."""
    nodes = [NS(name="h1", is_worker=False), NS(name="w1", is_worker=True),
             NS(name="w2", is_worker=True)]
    site = NS(spec=NS(nodes=nodes, reboot_policy=policy))
    ran, rolled = [], []
    monkeypatch.setattr(cli, "_site", lambda inventory: site)
    monkeypatch.setattr(cli.subprocess, "run", lambda command, **kw: ran.append(command)
                        or NS(returncode=deploy_rc))
    monkeypatch.setattr(cli, "waiting", lambda site, names, sudo=False: {
        n: markers[n] for n in names if n in markers})
    import gpuinfra_cli.roll as roll

    monkeypatch.setattr(roll, "cmd_roll", lambda args: rolled.append(args) or 0)
    args = NS(inventory="inventory/x.py", max_unavailable="1", wait_jobs=60, limit=[], data=[],
              sudo=sudo)
    return cli.cmd_deploy(args), ran, rolled


def test_never_names_the_workers_and_the_command_and_rolls_nothing(monkeypatch, capsys) -> None:
    rc, ran, rolled = _flow(monkeypatch, "never", {"w2": "NVIDIA driver packages installed"})
    out = capsys.readouterr().out
    assert rc == 0 and not rolled
    assert ran[0][2] == "--config" and ran[0][3].endswith("config.py")
    assert ran[0][4] == "inventory/x.py" and ran[0][5].endswith("/deploy.py") and ran[0][-2:] == [
        "--data", "reboot_policy=never"]  # the deploy itself never reboots
    assert "deploy: w2 needs a reboot: NVIDIA driver packages installed" in out
    assert "gpuinfra roll --inventory inventory/x.py --limit w2 (drained, a few at a time)" in out


def test_if_needed_rolls_exactly_the_workers_that_need_it(monkeypatch) -> None:
    rc, _, rolled = _flow(monkeypatch, "if-needed", {"w2": "x"})
    assert rc == 0 and len(rolled) == 1
    assert rolled[0].limit == ["w2"] and rolled[0].max_unavailable == "1"
    assert "reboot_policy=never" in rolled[0].data and not rolled[0].reboot


def test_nothing_to_reboot_and_a_failed_deploy_roll_nothing(monkeypatch, capsys) -> None:
    rc, _, rolled = _flow(monkeypatch, "if-needed", {})
    assert rc == 0 and not rolled and "no worker needs a reboot (2 checked)" in \
        capsys.readouterr().out
    rc, _, rolled = _flow(monkeypatch, "if-needed", {"w1": "x"}, deploy_rc=1)
    assert rc == 1 and not rolled
    assert "nothing rebooted" in capsys.readouterr().err


def test_sudo_reaches_pyinfra_and_the_roll(monkeypatch) -> None:
    """Issue 48 item 4: a non-root SSH user: pyinfra's --sudo on the deploy, and the roll it
    starts runs its node commands through sudo too."""
    rc, ran, rolled = _flow(monkeypatch, "if-needed", {"w2": "x"}, sudo=True)
    assert rc == 0 and ran[0][-1] == "--sudo" and rolled[0].sudo is True
    rc, ran, rolled = _flow(monkeypatch, "if-needed", {"w2": "x"})
    assert "--sudo" not in ran[0] and rolled[0].sudo is False


def test_the_rolls_node_commands_run_as_root_through_sudo_without_a_prompt() -> None:
    from gpuinfra_cli.roll import Ssh

    assert Ssh(None).wrapped("test -e /run/x && echo same") == "test -e /run/x && echo same"
    assert Ssh(None, sudo=True).wrapped("test -e /run/x && echo 'a b'") == \
        "sudo -n sh -c 'test -e /run/x && echo '\"'\"'a b'\"'\"''"


def test_the_rolls_deploy_runs_pyinfra_with_sudo(monkeypatch, tmp_path) -> None:
    import gpuinfra_cli.roll as roll

    ran = []
    monkeypatch.setattr(roll.subprocess, "run", lambda command, **kw: ran.append(command)
                        or NS(returncode=0))
    head = NS(name="h1", short_name="h1")
    site = NS(spec=NS(head=[head]), target=lambda name: name)
    for sudo in (True, False):
        roller = roll.Roll("inventory/x.py", site, 1, 0, 60, sudo=sudo, log_dir=tmp_path)
        assert roller.deploy(["w1"], "") and roller.head.sudo is sudo
        assert ("--sudo" in ran[-1]) is sudo
