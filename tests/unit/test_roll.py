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
