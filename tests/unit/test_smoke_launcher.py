"""Issue 49 item 5: `gpuinfra smoke run` picks the launcher that works with the torch of the
distribution the job's nodes run (gpuinfra.jobs.smoke.choose_launcher, LAUNCHER_BY_DISTRO):
Debian 12's python3-torch 1.13 cannot run torchrun under Python 3.11, so srun there."""

from __future__ import annotations

import pytest

from gpuinfra.jobs.smoke import LAUNCHER_BY_DISTRO, SmokeError, choose_launcher
from gpuinfra.knowledge.drivers import SUPPORTED_OS
from tests.unit.test_cli_nccl import repo_cwd, run  # noqa: F401 (fixture)

AUTO = {"debian-12": "srun", "debian-13": "srun", "ubuntu-22.04": "torchrun",
        "ubuntu-24.04": "torchrun"}


def test_the_table_knows_every_distribution_the_roles_support():
    # a distribution the roles take up without an entry here: `smoke run` refuses it
    assert set(SUPPORTED_OS) <= set(LAUNCHER_BY_DISTRO)
    for launcher, why in LAUNCHER_BY_DISTRO.values():
        assert launcher in ("torchrun", "srun") and why


@pytest.mark.parametrize(("distro", "launcher"), AUTO.items())
def test_auto_picks_the_launcher_of_the_nodes_distribution(distro, launcher):
    assert choose_launcher("auto", "node01", distro)[0] == launcher


def test_auto_says_why_debian_12_gets_srun():
    launcher, why = choose_launcher("auto", "node01", "debian-12")
    assert launcher == "srun" and "1.13" in why and "3.11" in why


def test_auto_on_an_unknown_distribution_is_refused_with_host_value_and_fix():
    with pytest.raises(SmokeError) as refused:
        choose_launcher("auto", "node07", "rocky-9")
    said = str(refused.value)
    for words in ("node07", "rocky-9", "--launcher srun", "--launcher torchrun"):
        assert words in said, said
    with pytest.raises(SmokeError, match="node07 runs an unnamed distribution"):
        choose_launcher("auto", "node07", "")


def test_auto_with_a_container_trusts_its_torch():
    launcher, why = choose_launcher("auto", "node01", "debian-12", container="/b/torch")
    assert launcher == "torchrun" and "/b/torch" in why


def test_torchrun_on_debian_12s_own_torch_is_refused_naming_the_flag_and_the_fix():
    for python in ("python3", "/usr/bin/python3"):
        with pytest.raises(SmokeError) as refused:
            choose_launcher("torchrun", "lab-worker1", "debian-12", python=python)
        said = str(refused.value)
        for words in ("--launcher torchrun", "lab-worker1", "debian-12", "1.13",
                      "give --launcher srun", "leave --launcher out"):
            assert words in said, said


def test_torchrun_stays_where_it_works_or_the_torch_is_the_sites():
    assert choose_launcher("torchrun", "n", "ubuntu-24.04")[0] == "torchrun"
    with pytest.raises(SmokeError, match="built without libuv"):
        choose_launcher("torchrun", "n", "debian-13")  # Debian's own torch 2.6: no libuv
    assert choose_launcher("torchrun", "n", "debian-13", container="/b")[0] == "torchrun"
    assert choose_launcher("torchrun", "n", "rocky-9")[0] == "torchrun"  # asked for: kept
    assert choose_launcher("torchrun", "n", "debian-12",
                           python="/opt/venv/bin/python")[0] == "torchrun"
    assert choose_launcher("torchrun", "n", "debian-12", container="/b")[0] == "torchrun"


@pytest.mark.parametrize("distro", [*AUTO, "rocky-9", ""])
def test_srun_is_kept_everywhere(distro):
    assert choose_launcher("srun", "n", distro)[0] == "srun"


def test_an_unknown_launcher_is_refused():
    with pytest.raises(SmokeError, match="'mpirun': auto, torchrun or srun"):
        choose_launcher("mpirun", "n", "debian-12")


# ---------------------------------------------------------------------------- the command

def fake_ssh(monkeypatch, distro: str | None, rc: int = 0):
    """Ssh stand-ins: the first node answers /etc/os-release with ``distro`` (None: cannot be
    reached), the head refuses sbatch; what each host was asked is recorded."""
    import gpuinfra_cli.roll as roll

    asked: list[tuple[str, str]] = []

    class Host:
        def __init__(self, target, sudo=False):
            self.name = target.name

        def run(self, command, timeout=120):
            asked.append((self.name, command))
            if "/etc/os-release" in command:
                return rc, f"{distro}\n" if rc == 0 else "", "" if rc == 0 else "no such file"
            return 1, "", "sbatch: error: stop here"

        def try_run(self, command, timeout=30):
            return None if distro is None else self.run(command, timeout)

        def close(self):
            pass

    monkeypatch.setattr(roll, "Ssh", Host)
    return asked


SMOKE_RUN = ["smoke", "run", "--inventory", "inventory/lab.py", "--backend", "gloo",
             "--nodes", "2"]


def sbatch_text(asked: list[tuple[str, str]]) -> str:
    sent = [command for _, command in asked if command.startswith("sbatch")]
    assert len(sent) == 1, asked
    return sent[0]


@pytest.mark.parametrize(("distro", "srun_ranks"), [("debian-12", True), ("debian-13", True),
                                                     ("ubuntu-24.04", False)])
def test_run_picks_the_launcher_from_the_first_nodes_os_release(capsys, repo_cwd, monkeypatch,  # noqa: F811
                                                                distro, srun_ranks):
    asked = fake_ssh(monkeypatch, distro)
    code, _, err = run(capsys, *SMOKE_RUN)
    assert code == 3  # the stand-in head refuses sbatch
    assert asked[0] == ("lab-worker1", '. /etc/os-release && echo "$ID-$VERSION_ID"')
    script = sbatch_text(asked)
    assert ("RANK=$SLURM_PROCID" in script) == srun_ranks
    assert ("torch.distributed.run" in script) == (not srun_ranks)
    launcher = "srun" if srun_ranks else "torchrun"
    assert f"note: launcher {launcher}: lab-worker1 runs {distro}" in err
    from gpuinfra_lab.training_smoke import PICKED  # the lab proof reads this note

    picked = PICKED.search(err)
    assert picked is not None and picked.groups() == (launcher, "lab-worker1", distro)


def test_run_refuses_an_unknown_distribution_before_submitting(capsys, repo_cwd, monkeypatch):  # noqa: F811
    asked = fake_ssh(monkeypatch, "rocky-9")
    code, _, err = run(capsys, *SMOKE_RUN)
    assert code == 2 and not [c for _, c in asked if c.startswith("sbatch")]
    for words in ("lab-worker1", "rocky-9", "--launcher srun", "--launcher torchrun"):
        assert words in err, err


def test_run_refuses_torchrun_on_debian_12_before_submitting(capsys, repo_cwd, monkeypatch):  # noqa: F811
    asked = fake_ssh(monkeypatch, "debian-12")
    code, _, err = run(capsys, *SMOKE_RUN, "--launcher", "torchrun")
    assert code == 2 and not [c for _, c in asked if c.startswith("sbatch")]
    assert "--launcher torchrun: lab-worker1 runs debian-12" in err
    assert "give --launcher srun" in err


def test_run_with_srun_asks_no_node(capsys, repo_cwd, monkeypatch):  # noqa: F811
    asked = fake_ssh(monkeypatch, "rocky-9")
    code, _, _ = run(capsys, *SMOKE_RUN, "--launcher", "srun")
    assert code == 3 and [host for host, _ in asked] == ["lab-head"]
    assert "RANK=$SLURM_PROCID" in sbatch_text(asked)


@pytest.mark.parametrize("rc", [0, 1])
def test_run_says_when_the_first_node_cannot_be_asked(capsys, repo_cwd, monkeypatch, rc):  # noqa: F811
    asked = fake_ssh(monkeypatch, None if rc == 0 else "debian-12", rc)
    code, _, err = run(capsys, *SMOKE_RUN)
    assert code == 3 and not [c for _, c in asked if c.startswith("sbatch")]
    assert "cannot read /etc/os-release on lab-worker1" in err and "--launcher srun" in err


def test_script_keeps_torchrun_and_has_no_auto(capsys, repo_cwd):  # noqa: F811
    code, out, _ = run(capsys, "smoke", "script", "--inventory", "inventory/lab.py",
                       "--backend", "gloo", "--nodes", "2")
    assert code == 0 and "torch.distributed.run" in out
    with pytest.raises(SystemExit):
        run(capsys, "smoke", "script", "--inventory", "inventory/lab.py", "--launcher", "auto")
