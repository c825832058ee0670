"""The rules of `gpuinfra roll` (gpuinfra/roll.py) and its command line's refusals of bad input
(gpuinfra_cli/roll.py); the roll itself runs live in the lab (gpuinfra_lab/rolling.py)."""

from __future__ import annotations

import pytest

from gpuinfra import roll
from gpuinfra.errors import GpuinfraError
from gpuinfra.health.slurm import decide
from gpuinfra.parsers.slurm import SlurmNode
from gpuinfra_cli.main import main


def node(state: str, reason: str = "none") -> SlurmNode:
    return SlurmNode("n1", state, "gpu:h100:8", reason)


@pytest.mark.parametrize(("text", "workers", "count"), [
    ("1", 2, 1), ("3", 8, 3), ("25%", 8, 2), ("10%", 4, 1), ("50%", 2, 1), ("1", 1, 1)])
def test_max_unavailable_is_a_count_or_a_share_of_the_workers(text, workers, count) -> None:
    assert roll.max_unavailable(text, workers) == count


@pytest.mark.parametrize(("text", "workers", "words"), [
    ("0", 4, "--max-unavailable 0: at least one node is taken at a time"),
    ("0%", 4, "a share above 0% and at most 100%"),
    ("150%", 4, "a share above 0% and at most 100%"),
    ("5", 4, "5 of the site's 4 worker(s); a roll never takes every worker out at once"),
    ("4", 4, "a roll never takes every worker out at once: between 1 and 3"),
    ("100%", 4, "4 of the site's 4 worker(s)"),
    ("two", 4, "--max-unavailable 'two': a number of nodes or a share")])
def test_max_unavailable_refuses_none_all_and_nonsense(text, workers, words) -> None:
    with pytest.raises(GpuinfraError) as exc:
        roll.max_unavailable(text, workers)
    assert words in str(exc.value)


def test_max_fail_is_a_count_or_a_share_of_the_rolls_nodes() -> None:
    assert roll.max_fail("0", 10) == 0 and roll.max_fail("2", 10) == 2
    assert roll.max_fail("25%", 10) == 2
    for bad in ("-1", "x", "101%"):
        with pytest.raises(GpuinfraError, match="--max-fail"):
            roll.max_fail(bad, 10)


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
    # Slurm reboots the node once idle and resumes it when back (scontrol(1), reboot)
    assert roll.reboot(["gpu1"], "driver 580") == (
        "scontrol reboot ASAP nextstate=RESUME reason='gpuinfra-roll: driver 580' gpu1")


@pytest.mark.parametrize(("state", "rebooting"), [
    ("draining@", True), ("reboot", True), ("reboot^", True), ("idle*", True),
    ("down", True), ("idle", False), ("mixed", False), ("drained", False)])
def test_a_node_is_rebooting_until_slurmd_registers_after_the_boot(state, rebooting) -> None:
    assert roll.rebooting(node(state)) is rebooting
    assert roll.rebooting(None) is True


def test_jobs_are_found_on_each_node_of_a_hostlist() -> None:
    jobs = roll.jobs_on("7 gpu[01-02]\n8 gpu03,login1\n9 other\n")
    found = roll.jobs_by_node(jobs, {"gpu01": "gpu01.site", "gpu02": "gpu02.site",
                                     "gpu03": "gpu03.site"})
    assert found == {"gpu01.site": ["7"], "gpu02.site": ["7"], "gpu03.site": ["8"]}


def state(**kw) -> roll.RollState:
    nodes = kw.pop("nodes", [roll.NodeState("gpu1"), roll.NodeState("gpu2"),
                             roll.NodeState("gpu3")])
    base = {"why": "driver 580", "data": ["x=1"], "reboot": False, "max_unavailable": 1,
            "max_fail": 0, "nodes": nodes, "started": 1.0, "by": "ops@laptop"}
    return roll.RollState(**{**base, **kw})


def test_the_state_reads_back_what_was_written_and_refuses_what_it_cannot_read() -> None:
    written = state(driver="pid 1 on laptop abc", nodes=[
        roll.NodeState("gpu1", "done", 5.0), roll.NodeState("gpu2", "failed", 6.0, "Xid 79"),
        roll.NodeState("gpu3", "waiting", 7.0, "RMA 42", kept=True)])
    assert roll.RollState.from_json(written.to_json()) == written
    for bad in ("{", '{"format": 2}', written.to_json().replace('"waiting"', '"asleep"'),
                written.to_json().replace('"why"', '"who"')):
        with pytest.raises(GpuinfraError) as exc:
            roll.RollState.from_json(bad)
        assert "/var/lib/gpuinfra/roll.json" in str(exc.value)
        assert "gpuinfra roll --abandon" in str(exc.value)


def test_the_window_slides_and_stops_taking_nodes_past_the_failures_allowed() -> None:
    live = state(max_unavailable=2)
    assert live.may_start()
    live.nodes[0].phase = live.nodes[1].phase = "waiting"
    assert not live.may_start() and not live.settled()  # two out: the window is full
    live.nodes[0].phase = "done"
    assert live.may_start()  # one back: the next is taken
    live.nodes[1].phase = "failed"
    assert not live.may_start() and live.settled()  # max_fail 0: no new node after a failure
    live.max_fail = 1
    assert live.may_start()


def test_another_roll_is_refused_and_a_rerun_takes_over_a_silent_command() -> None:
    live = state(driver="pid 9 on laptop tok9")
    other = state(why="kernel 6.1")
    said = roll.refusal(live, other, 999, "tok1")
    assert "a roll is live on the head: 'driver 580', started by ops@laptop, 0 of 3" in said
    assert "gpuinfra roll --status" in said and "gpuinfra roll --abandon" in said
    assert "Finish it first" in roll.refusal(live, state(data=["x=2"]), 999, "tok1")
    # the same roll: refused while its command is alive, taken over once it fell silent
    assert "another command drives it now (pid 9 on laptop" in roll.refusal(live, state(), 5,
                                                                            "tok1")
    assert roll.refusal(live, state(), roll.STALE_S + 1, "tok1") == ""
    assert roll.refusal(state(driver=""), state(), 1, "tok1") == ""
    assert roll.refusal(state(finished=True), other, 1, "tok1") == ""


def test_status_says_where_each_node_is() -> None:
    live = state(nodes=[roll.NodeState("gpu1", "done", 100.0),
                        roll.NodeState("gpu2", "waiting", 100.0),
                        roll.NodeState("gpu3", "failed", 100.0, "gpuinfra: GPU0 Xid 79")])
    lines = roll.status_lines(live, {"gpu2": node("draining")}, {"gpu2": ["41", "42"]}, 160.0,
                              "not driven now")
    text = "\n".join(lines)
    assert "1 of 3 done, 1 failed" in lines[0] and lines[1] == "  not driven now"
    assert "gpu2                 drained, waiting for job(s) 41, 42 since" in text
    assert "(1 min 0 s ago) [slurm: draining]" in text
    assert "gpu3                 failed, left drained: gpuinfra: GPU0 Xid 79" in text


@pytest.mark.parametrize(("args", "words"), [
    (["--limit", "nosuch"], "--limit nosuch: not a worker of inventory/lab-example.py"),
    (["--max-unavailable", "0"], "--max-unavailable 0: at least one node"),
    (["--max-unavailable", "2"], "a roll never takes every worker out at once"),
    (["--max-fail", "-1"], "--max-fail '-1'"),
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
    """Three workers: gpu1 on Slurm and Kubernetes, gpu2 and gpu3 on Slurm; head h1."""

    def __init__(self) -> None:
        from types import SimpleNamespace as NS

        both, slurm = ("slurm", "kubernetes"), ("slurm",)
        nodes = {"h1": NS(name="h1", short_name="h1", schedulers=both, is_worker=False),
                 "gpu1": NS(name="gpu1", short_name="gpu1", schedulers=both, is_worker=True),
                 "gpu2": NS(name="gpu2", short_name="gpu2", schedulers=slurm, is_worker=True),
                 "gpu3": NS(name="gpu3", short_name="gpu3", schedulers=slurm, is_worker=True)}
        self.spec = NS(head=[nodes["h1"]], node=nodes.__getitem__, nodes=list(nodes.values()))

    def target(self, name: str) -> str:
        return name


class Cluster:
    """The head's answers, faked: node states, the jobs on each node, the roll's state file;
    the head's Slurm (``sinfo --version``) and each node's release (its /etc/os-release)."""

    def __init__(self, jobs: dict[str, int] | None = None, failing: str = "",
                 reboots: tuple[str, ...] = (), slurm: str = "slurm 22.05.8",
                 release: str = "debian-12") -> None:
        self.slurm = slurm
        self.releases = dict.fromkeys(("gpu1", "gpu2", "gpu3"), release)
        self.states = {n: ("idle", "none") for n in ("gpu1", "gpu2", "gpu3")}
        self.jobs = dict(jobs or {})   # node -> rounds its job still runs
        self.failing, self.reboots = failing, set(reboots)
        self.sent: list[str] = []
        self.deployed: list[list[str]] = []
        self.file: str | None = None
        self.age = 0.0


class FakeNode:
    """A node's SSH channel: what was sent to it (``cluster.sent``, as ``name: command``) and its
    release for the roll's check."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster, self.name = cluster, name

    def run(self, command: str, timeout: float = 0) -> tuple[int, str, str]:
        from gpuinfra.platforms import RELEASE_COMMAND as RELEASE

        self.cluster.sent.append(f"{self.name}: {command}")
        return (0, f"{self.cluster.releases[self.name]}\n" if command == RELEASE else "", "")

    try_run = run

    def close(self) -> None:
        pass


def patched(monkeypatch, cluster: Cluster, interrupt_at=0):
    """The roll's command with ``cluster`` answering for the head and the nodes."""
    from gpuinfra_cli import roll as cli

    rounds = {"n": 0}

    def on_head(self, command: str, what: str = "") -> str:
        cluster.sent.append(command)
        if command == "sinfo --version":
            return f"{cluster.slurm}\n"
        if command.startswith("sinfo"):
            asked = command.rsplit("-n ", 1)[1].split(",")
            return "".join(f"{n}|{cluster.states[n][0]}|gpu:h100:8|{cluster.states[n][1]}\n"
                           for n in asked if n in cluster.states)
        if command.startswith("squeue"):
            asked = command.split("-w ", 1)[1].split()[0].split(",")
            if any(n not in cluster.states for n in asked):  # as squeue refuses a name
                raise GpuinfraError(f"squeue: error: Invalid node name specified: {asked}")
            return "".join(f"{40 + i} {n}\n" for i, n in enumerate(asked)
                           if cluster.jobs.get(n, 0) > 0)
        if "state=drain" in command:
            name = command.split("nodename=")[1].split()[0]
            cluster.states[name] = ("drained", command.split("reason=")[1].strip("'"))
        if "state=resume" in command:
            cluster.states[command.split("nodename=")[1].split()[0]] = ("idle", "none")
        return ""

    def read_state(self):
        return (roll.RollState.from_json(cluster.file) if cluster.file else None), cluster.age

    def save(self):
        cluster.file = self.state.to_json() if self.state else cluster.file

    def sleep(seconds):
        rounds["n"] += 1
        if interrupt_at and rounds["n"] == interrupt_at:
            raise KeyboardInterrupt
        for name in list(cluster.jobs):
            cluster.jobs[name] -= 1

    def change(self, nodes):
        cluster.deployed.append([n.name for n in nodes])
        for node in nodes:
            cluster.states.setdefault(node.name, ("idle", "none"))  # its slurmd registers
            if node.name in cluster.reboots:
                node.phase = "rebooting"
            else:
                self.judge(node)

    monkeypatch.setattr(cli.Roll, "on_head", on_head)
    monkeypatch.setattr(cli.Roll, "read_state", read_state)
    monkeypatch.setattr(cli.Roll, "save", save)
    monkeypatch.setattr(cli.Roll, "change", change)
    monkeypatch.setattr(cli.Roll, "rebooted", lambda self, node: True)
    monkeypatch.setattr(cli.Roll, "after_reboot", lambda self, nodes: [self.judge(n)
                                                                        for n in nodes])
    monkeypatch.setattr(cli.Roll, "healthy", lambda self, name: "gpuinfra: GPU0 xid: Xid 79"
                        if name == cluster.failing else "")
    monkeypatch.setattr(cli.time, "sleep", sleep)
    monkeypatch.setattr(cli.Roll, "idle", _idle_without_kubectl(cli.Roll.idle))
    monkeypatch.setattr(cli.Roll, "host", lambda self, name: self.hosts.setdefault(
        name, FakeNode(cluster, name)))
    return cli


def rolling(monkeypatch, cluster: Cluster, names=("gpu1", "gpu2", "gpu3"), interrupt_at=0,
            **kw):
    """A roll of ``names`` against ``cluster``: its exit code, with what it sent."""
    cli = patched(monkeypatch, cluster, interrupt_at)
    job = cli.Roll("inventory/x.py", FakeSite(), **{"max_unavailable": 1, "why": "driver 580",
                                                    **kw})
    try:
        return job.run(list(names))
    except KeyboardInterrupt:
        return 130


def _idle_without_kubectl(idle):
    """The real wait, with `kubectl drain` answered at once (the head's fake has no kubectl)."""
    def wrapped(self, nodes):
        from types import SimpleNamespace as NS

        self.head = NS(run=lambda command, timeout=0: (0, "", ""), close=lambda: None)
        return idle(self, nodes)
    return wrapped


def slurm_changes(cluster: Cluster) -> list[str]:
    return [c for c in cluster.sent if "state=" in c or "kubectl" in c]


def test_a_roll_drains_waits_changes_and_resumes_one_node_at_a_time(monkeypatch) -> None:
    cluster = Cluster(jobs={"gpu1": 3})
    assert rolling(monkeypatch, cluster) == 0
    assert cluster.deployed == [["gpu1"], ["gpu2"], ["gpu3"]]
    assert slurm_changes(cluster) == [
        "scontrol update nodename=gpu1 state=drain reason='gpuinfra-roll: driver 580'",
        "scontrol update nodename=gpu1 state=resume", "kubectl uncordon gpu1",
        "scontrol update nodename=gpu2 state=drain reason='gpuinfra-roll: driver 580'",
        "scontrol update nodename=gpu2 state=resume",
        "scontrol update nodename=gpu3 state=drain reason='gpuinfra-roll: driver 580'",
        "scontrol update nodename=gpu3 state=resume"]
    final = roll.RollState.from_json(cluster.file)
    assert final.finished and final.driver == "" and len(final.phase("done")) == 3


def test_the_window_takes_as_many_nodes_as_allowed(monkeypatch) -> None:
    cluster = Cluster(jobs={"gpu1": 5})
    assert rolling(monkeypatch, cluster, max_unavailable=2) == 0
    # gpu1's job holds it; gpu2 was taken beside it and done first, then gpu3 took its place
    assert cluster.deployed == [["gpu2"], ["gpu3"], ["gpu1"]]


def test_a_failing_node_stays_drained_with_its_cause_and_no_new_node_is_taken(
        monkeypatch, capsys) -> None:
    cluster = Cluster(failing="gpu1")
    assert rolling(monkeypatch, cluster) == 1
    assert cluster.deployed == [["gpu1"]]  # gpu2 never deployed, never drained
    assert cluster.states["gpu1"] == ("drained", "gpuinfra-roll: gpuinfra: GPU0 xid: Xid 79")
    assert not [c for c in cluster.sent if "gpu2" in c and "state=" in c]
    assert "kubectl uncordon gpu1" not in cluster.sent
    out = capsys.readouterr().out
    assert "stopped: 1 node(s) failed (more than --max-fail 0): gpu1: gpuinfra: GPU0" in out
    # the roll stays live on the head; the same command resumes it and tries gpu1 again
    live = roll.RollState.from_json(cluster.file)
    assert not live.finished and live.node("gpu1").phase == "failed"
    cluster.failing = ""
    assert rolling(monkeypatch, cluster) == 0
    assert cluster.deployed == [["gpu1"], ["gpu1"], ["gpu2"], ["gpu3"]]


def test_more_failures_allowed_keep_the_roll_going(monkeypatch) -> None:
    cluster = Cluster(failing="gpu1")
    assert rolling(monkeypatch, cluster, max_fail=1) == 1  # it went on, then said who failed
    assert cluster.deployed == [["gpu1"], ["gpu2"], ["gpu3"]]
    assert cluster.states["gpu1"][0] == "drained" and cluster.states["gpu3"][0] == "idle"


def test_an_interrupted_roll_is_resumed_where_it_stopped(monkeypatch) -> None:
    cluster = Cluster(jobs={"gpu1": 2, "gpu2": 50})
    assert rolling(monkeypatch, cluster, interrupt_at=4) == 130
    live = roll.RollState.from_json(cluster.file)
    assert [n.phase for n in live.nodes] == ["done", "waiting", "pending"]
    assert live.driver == ""  # let go: a rerun takes it over at once
    cluster.jobs["gpu2"] = 1
    assert rolling(monkeypatch, cluster) == 0
    assert cluster.deployed == [["gpu1"], ["gpu2"], ["gpu3"]]  # gpu1 not rolled twice
    drains = [c for c in cluster.sent if "state=drain" in c]
    assert len(drains) == 3  # gpu2's drain was not repeated either


def test_a_different_roll_is_refused_while_one_is_live(monkeypatch) -> None:
    cluster = Cluster(jobs={"gpu1": 50})
    assert rolling(monkeypatch, cluster, interrupt_at=2) == 130
    with pytest.raises(GpuinfraError, match="a roll is live on the head: 'driver 580'"):
        rolling(monkeypatch, cluster, why="kernel 6.1")


def test_reboots_are_slurms_and_the_node_is_judged_when_back(monkeypatch) -> None:
    cluster = Cluster(reboots=("gpu2",))
    assert rolling(monkeypatch, cluster) == 0
    assert roll.RollState.from_json(cluster.file).node("gpu2").phase == "done"


def test_jobs_past_the_bound_put_the_node_back_untouched(monkeypatch, capsys) -> None:
    cluster = Cluster(jobs={"gpu1": 50})
    assert rolling(monkeypatch, cluster, wait_s=0) == 1
    assert cluster.deployed == []
    assert slurm_changes(cluster)[-2:] == ["scontrol update nodename=gpu1 state=resume",
                                          "kubectl uncordon gpu1"]
    out = capsys.readouterr().out
    assert "jobs still running after 0 s: 40 (on gpu1)" in out
    assert roll.RollState.from_json(cluster.file).node("gpu1").phase == "pending"


def test_the_rolls_series_say_whether_it_is_live_and_where_its_nodes_are() -> None:
    live = state(nodes=[roll.NodeState("gpu1", "done"), roll.NodeState("gpu2", "waiting")])
    text = roll.metrics_text(live)
    assert "gpuinfra_roll_live 1\n" in text
    assert "gpuinfra_roll_last_step_timestamp_seconds $NOW\n" in text  # the head's clock
    assert 'gpuinfra_roll_nodes{phase="waiting"} 1\n' in text
    assert "gpuinfra_roll_live 0\n" in roll.metrics_text(state(finished=True))


def test_a_node_slurm_does_not_list_yet_is_rolled_without_asking_slurm_for_it(
        monkeypatch) -> None:
    cluster = Cluster()
    del cluster.states["gpu3"]  # a first deploy: its slurmd never registered
    assert rolling(monkeypatch, cluster) == 0
    assert cluster.deployed == [["gpu1"], ["gpu2"], ["gpu3"]]
    assert not [c for c in cluster.sent if "gpu3" in c and "scontrol" in c]


def test_a_reboot_slurm_was_asked_for_by_a_killed_command_is_waited_for(monkeypatch) -> None:
    """Killed after `scontrol reboot` and before the state said so: the rerun finds the node
    "waiting" but Slurm rebooting it, and waits for the reboot instead of deploying to it."""
    cluster = Cluster()
    cluster.states["gpu1"] = ("reboot^", "gpuinfra-roll: driver 580 : reboot issued")
    cluster.file = state(data=[], nodes=[roll.NodeState("gpu1", "waiting", 1.0),
                                roll.NodeState("gpu2"), roll.NodeState("gpu3")]).to_json()
    assert rolling(monkeypatch, cluster) == 0
    assert cluster.deployed == [["gpu2"], ["gpu3"]]  # gpu1 judged after its reboot, not redeployed


# ------------------------------------------------------------ the Slurm release check (issue 49)

def test_a_debian_13_worker_under_a_debian_12_head_stops_the_roll_before_any_drain(
        monkeypatch, capsys) -> None:
    cluster = Cluster(slurm="slurm 22.05.8")
    cluster.releases["gpu2"] = "debian-13"  # reinstalled on trixie, its head still on bookworm
    cli = patched(monkeypatch, cluster)
    monkeypatch.setattr(cli, "load_site", lambda inventory: FakeSite())
    assert main(["roll", "--inventory", "inventory/x.py", "--why", "trixie"]) == 2
    err = capsys.readouterr().err
    assert ("gpu2 (debian-13) runs slurmd 24.11, newer than the head h1's slurmctld 22.05, "
            "which accepts no newer release") in err
    assert "https://slurm.schedmd.com/upgrades.html" in err and "slurmdbd >= slurmctld" in err
    assert "head first: slurmdbd, slurmctld, then the workers (docs/upgrade-debian-13.md" in err
    assert "gpu1" not in err.split("Slurm's rule")[0]  # only the refused node is named
    # what was sent: the head's version and each node's release, read-only; no drain, no
    # state written, nothing deployed
    assert cluster.sent[0] == "sinfo --version"
    assert sorted(cluster.sent[1:]) == [f"gpu{i}: . /etc/os-release && echo \"$ID-$VERSION_ID\""
                                        for i in (1, 2, 3)]
    assert cluster.file is None and cluster.deployed == []
    assert cluster.states["gpu2"] == ("idle", "none")


def test_a_roll_whose_nodes_run_the_heads_slurm_proceeds_past_the_check(monkeypatch) -> None:
    cluster = Cluster(slurm="slurm-wlm 24.11.5", release="debian-13")  # Debian 13's own words
    cluster.releases["gpu3"] = "ubuntu-24.04"  # 23.11: within 24.11's three majors
    assert rolling(monkeypatch, cluster) == 0
    first_drain = next(i for i, c in enumerate(cluster.sent) if "state=drain" in c)
    assert cluster.sent.index("sinfo --version") < first_drain
    assert cluster.deployed == [["gpu1"], ["gpu2"], ["gpu3"]]


def test_the_check_reads_only_the_slurm_nodes_still_to_roll(monkeypatch) -> None:
    """A resumed roll reads the nodes it has yet to take (gpu1 is done); a roll of nodes
    outside Slurm asks the head nothing about Slurm."""
    cluster = Cluster(slurm="slurm 22.05.8")
    cluster.releases["gpu1"] = "debian-13"  # done before the check: not read again
    cluster.file = state(data=[], nodes=[roll.NodeState("gpu1", "done", 1.0),
                                roll.NodeState("gpu2"), roll.NodeState("gpu3")]).to_json()
    assert rolling(monkeypatch, cluster) == 0
    assert not [c for c in cluster.sent if c.startswith("gpu1: ")]
    kube_only = Cluster(release="debian-13")
    from gpuinfra_cli import roll as cli

    monkeypatch.setattr(cli.Roll, "in_slurm", lambda self, name: False)
    assert rolling(monkeypatch, kube_only) == 0
    assert "sinfo --version" not in kube_only.sent
    assert not [c for c in kube_only.sent if "os-release" in c]


def test_a_node_whose_release_cannot_be_read_stops_the_roll(monkeypatch) -> None:
    cluster = Cluster()
    cluster.releases["gpu3"] = "debian-14"
    with pytest.raises(GpuinfraError, match="gpu3 runs 'debian-14', a release whose Slurm"):
        rolling(monkeypatch, cluster)
    assert not [c for c in cluster.sent if "state=drain" in c]
    cluster = Cluster(slurm="sinfo: command not found")
    with pytest.raises(GpuinfraError, match="the head h1: sinfo --version: no 'slurm"):
        rolling(monkeypatch, cluster)
    cluster = Cluster()
    del cluster.releases["gpu2"]  # its SSH channel fails
    with pytest.raises(GpuinfraError, match="gpu2: cannot read its release over SSH"):
        rolling(monkeypatch, cluster)
    assert not [c for c in cluster.sent if "state=drain" in c]
