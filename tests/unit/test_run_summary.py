"""The end-of-run list of failed hosts."""

from __future__ import annotations

from types import SimpleNamespace

from gpuinfra_deploy.run.summary import Failure, _Recorder, failure_summary


def test_nothing_failed_prints_nothing():
    assert failure_summary([], 3, 50) == ""


def test_a_failed_worker_is_named_with_its_step_and_the_next_command():
    text = failure_summary([Failure("w2", "nvidia_driver | Install", False)], 3, 50)
    assert "1 of 3 host(s) failed" in text
    assert "w2: failed at nvidia_driver | Install" in text
    assert "healthy hosts were deployed" in text and "max_fail_percent = 50%" in text
    assert "rerun the same command" in text


def test_a_failed_head_says_the_scheduler_roles_were_skipped():
    text = failure_summary([Failure("w1", "connecting (timed out)", False),
                            Failure("head", "common | Install", True)], 3, 50)
    assert text.splitlines()[1] == "  - head (head): failed at common | Install"
    assert "munge and slurm were skipped on every host" in text
    assert "healthy hosts were deployed" not in text


def test_the_recorder_keeps_each_hosts_first_failed_step():
    rec = _Recorder()
    meta = {"a": SimpleNamespace(names={"slurm | Start"}), "b": SimpleNamespace(names={"x"})}
    state = SimpleNamespace(get_op_meta=meta.__getitem__)
    w = SimpleNamespace(name="w1")
    rec.operation_host_error(state, w, "a")
    rec.operation_host_error(state, w, "b")
    rec.host_connect_error(state, SimpleNamespace(name="w2"), "refused")
    assert rec.steps == {"w1": "slurm | Start", "w2": "connecting (refused)"}


def test_installed_before_init_the_recorder_joins_the_initialised_state(monkeypatch):
    import atexit

    from pyinfra.api import Config, Inventory, State

    from gpuinfra_deploy.run import summary

    exits = []
    monkeypatch.setattr(atexit, "register", exits.append)
    state = State()
    summary.install(state, frozenset({"head"}))  # as the gate does: before state.init
    state.init(Inventory((["head", "w1"], {})), Config())
    assert any(isinstance(h, summary._Recorder) for h in state.callback_handlers)
    assert len(exits) == 1


def test_a_run_stopped_part_way_does_not_claim_the_healthy_hosts_were_deployed():
    text = failure_summary([Failure("w2", "connecting (refused)", False)], 3, 50,
                           finished=False)
    assert "stopped before its end" in text
    assert "healthy hosts were deployed" not in text
