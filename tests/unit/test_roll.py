"""The rules of `gpuinfra roll` (gpuinfra/roll.py) and its command line's refusals of bad input
(gpuinfra_cli/roll.py); the roll itself runs live in the lab (gpuinfra_lab/rolling.py)."""

from __future__ import annotations

import pytest

from gpuinfra import roll
from gpuinfra.health.slurm import decide
from gpuinfra.parsers.slurm import SlurmNode
from gpuinfra_cli.main import main


def node(state: str, reason: str = "none") -> SlurmNode:
    return SlurmNode("n1", state, "gpu:h100:8", reason)


def test_batches_keep_the_order_and_the_size() -> None:
    assert roll.batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]
    assert roll.batches(["a", "b"], 1) == [["a"], ["b"]]
    with pytest.raises(ValueError):
        roll.batches(["a"], 0)


def test_the_reason_is_one_short_line_the_health_check_leaves_alone() -> None:
    text = roll.reason("driver 580\nupgrade " + "x" * 200)
    assert text.startswith("gpuinfra-roll: driver 580 upgrade ") and len(text) == 120
    assert "\n" not in text
    # The health check resumes what it drained itself ("gpuinfra:"), never a roll's drain.
    drained = node("drained", roll.reason("driver upgrade"))
    assert decide(drained, "", "drain").kind == "none"
    assert decide(node("drained", "gpuinfra: GPU0 xid"), "", "drain").kind == "resume"


def test_a_node_drained_by_someone_else_is_never_resumed_by_the_roll() -> None:
    assert roll.drained_by_someone_else(node("drained", "RMA ticket 42"))
    assert roll.drained_by_someone_else(node("down*", "Not responding"))
    assert not roll.drained_by_someone_else(node("drained", roll.reason("x")))
    assert not roll.drained_by_someone_else(node("idle"))


@pytest.mark.parametrize(("state", "back"), [
    ("idle", True), ("drained", True), ("mixed", True), ("drained*", False),
    ("down*", False), ("down", False), ("inval", False), ("unknown", False)])
def test_back_means_slurmd_answers_with_a_valid_registration(state: str, back: bool) -> None:
    assert roll.back(node(state)) is back
    assert roll.back(None) is False


def test_jobs_are_read_from_squeue_and_named_when_the_roll_stops() -> None:
    jobs = roll.jobs_on("12 lab-worker1\n13 lab-worker[1-2]\n\n")
    assert jobs == [roll.Job("12", "lab-worker1"), roll.Job("13", "lab-worker[1-2]")]
    said = roll.stopped_for_jobs(jobs, 600)
    assert "12 (on lab-worker1), 13 (on lab-worker[1-2])" in said and "600 s" in said
    assert "--wait-jobs" in said


def test_commands_quote_what_they_are_given() -> None:
    assert roll.drain(["a", "b"], "it's") == (
        "scontrol update nodename=a,b state=drain reason='gpuinfra-roll: it'\"'\"'s'")
    assert roll.resume(["a"]) == "scontrol update nodename=a state=resume"
    assert roll.squeue(["a", "b"]) == "squeue -h -w a,b -o '%i %N'"
    assert roll.kube_drain("gpu1", 600).endswith("--ignore-daemonsets --delete-emptydir-data "
                                                "--timeout=600s")
    assert roll.kube_uncordon("gpu1") == "kubectl uncordon gpu1"


@pytest.mark.parametrize(("args", "words"), [
    (["--limit", "nosuch"], "--limit nosuch: not a worker of inventory/lab-example.py"),
    (["--batch", "0"], "--batch 0: between 1 and"),
    (["--batch", "2"], "a roll never takes every worker out at once"),
    (["--wait-jobs", "-1"], "--wait-jobs -1: seconds, 0 or more"),
    (["--data", "novalue"], "--data 'novalue': KEY=VALUE"),
])
def test_bad_input_is_refused_before_any_host_is_touched(args, words, capsys, tmp_path,
                                                         monkeypatch) -> None:
    inventory = tmp_path / "lab-example.py"
    inventory.write_text(
        'head = [("h1", {"ssh_hostname": "192.0.2.1"})]\n'
        'workers = [("w1", {"ssh_hostname": "192.0.2.2", "gpu_model": "H100-SXM5-80GB", '
        '"gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}), '
        '("w2", {"ssh_hostname": "192.0.2.3", "gpu_model": "H100-SXM5-80GB", "gpu_count": 8, '
        '"gpu_topology": "nvswitch-all-to-all"})]\n')
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "lab-example.py").write_text(inventory.read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["roll", "--inventory", "inventory/lab-example.py", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


class FakeSite:
    """Two workers: gpu1 on Slurm and Kubernetes, gpu2 on Slurm; head h1."""

    def __init__(self) -> None:
        from types import SimpleNamespace as NS

        nodes = {"h1": NS(name="h1", short_name="h1", schedulers=("slurm", "kubernetes")),
                 "gpu1": NS(name="gpu1", short_name="gpu1", schedulers=("slurm", "kubernetes")),
                 "gpu2": NS(name="gpu2", short_name="gpu2", schedulers=("slurm",))}
        self.spec = NS(head=[nodes["h1"]], node=nodes.__getitem__)

    def target(self, name: str) -> str:
        return name


def rolled(monkeypatch, failing: str = "", jobs: str = ""):
    """What a roll of gpu1 then gpu2 sends to the head and deploys, with the nodes' answers
    faked: ``failing`` fails its health check after the deploy; ``jobs`` stay on gpu1."""
    from gpuinfra_cli import roll as cli

    sent: list[str] = []
    deployed: list[list[str]] = []

    def on_head(self, command: str) -> str:
        sent.append(command)
        if command.startswith("sinfo"):
            name = command.rsplit("-n ", 1)[1]
            return f"{name}|idle|gpu:h100:8|none\n"
        if command.startswith("squeue"):
            return jobs if "gpu1" in command else ""
        return ""

    monkeypatch.setattr(cli.Roll, "on_head", on_head)
    monkeypatch.setattr(cli.Roll, "deploy", lambda self, names, why="": deployed.append(names)
                        or True)
    monkeypatch.setattr(cli.Roll, "reboot_if_needed", lambda self, name: "")
    monkeypatch.setattr(cli.Roll, "back_and_healthy",
                        lambda self, name: "gpuinfra: GPU0 xid: Xid 79" if name == failing
                        else "")
    job = cli.Roll("inventory/x.py", FakeSite(), batch=1, wait_s=0, why="driver 580")
    return job.run(["gpu1", "gpu2"]), sent, deployed


def test_a_roll_drains_changes_and_resumes_one_node_at_a_time(monkeypatch) -> None:
    rc, sent, deployed = rolled(monkeypatch)
    assert rc == 0 and deployed == [["gpu1"], ["gpu2"]]
    drains = [c for c in sent if "state=" in c or "kubectl" in c]
    assert drains == [
        "scontrol update nodename=gpu1 state=drain reason='gpuinfra-roll: driver 580'",
        "kubectl drain gpu1 --ignore-daemonsets --delete-emptydir-data --timeout=0s",
        "scontrol update nodename=gpu1 state=resume", "kubectl uncordon gpu1",
        "scontrol update nodename=gpu2 state=drain reason='gpuinfra-roll: driver 580'",
        "scontrol update nodename=gpu2 state=resume"]


def test_a_failing_node_stays_drained_with_its_cause_and_stops_the_roll(monkeypatch) -> None:
    rc, sent, deployed = rolled(monkeypatch, failing="gpu1")
    assert rc == 1 and deployed == [["gpu1"]]  # gpu2 never deployed
    assert sent[-1] == ("scontrol update nodename=gpu1 state=drain "
                        "reason='gpuinfra-roll: gpuinfra: GPU0 xid: Xid 79'")
    assert not [c for c in sent if "gpu2" in c and "state=" in c]
    assert "kubectl uncordon gpu1" not in sent


def test_jobs_past_the_bound_put_the_batch_back_untouched(monkeypatch, capsys) -> None:
    rc, sent, deployed = rolled(monkeypatch, jobs="41 gpu1\n")
    assert rc == 1 and deployed == []
    assert sent[-2:] == ["scontrol update nodename=gpu1 state=resume", "kubectl uncordon gpu1"]
    assert "jobs still running after 0 s: 41 (on gpu1)" in capsys.readouterr().out
