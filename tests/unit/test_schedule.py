"""Each host at its own pace, meeting where the deploy says
(gpuinfra_deploy/pyinfra_patches/schedule.py), on a State-like object whose operations sleep."""

from __future__ import annotations

from types import SimpleNamespace

import gevent
import pytest
from pyinfra.api import operations as pyinfra_operations
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.state import State

from gpuinfra_deploy.pyinfra_patches import schedule


class Host(str):
    nested_executing_op_hash = None  # what pyinfra's Host.print_prefix reads
    print_prefix_padding = ""

    @property
    def name(self) -> str:
        return str(self)


class FakeState:
    """What run_ops reads of pyinfra's State; fail_hosts is pyinfra's own."""

    def __init__(self, plan: dict[str, list[str]], meetings=(), fail_percent=None, pool=None):
        self.order = list(dict.fromkeys(op for ops in plan.values() for op in ops))
        self.order.sort(key=lambda op: int(op[1:]))  # "o1", "o2"...: the deploy's order
        plan = {Host(h): ops for h, ops in plan.items()}
        self.ops = {h: {op: SimpleNamespace() for op in ops} for h, ops in plan.items()}
        self.active_hosts = set(plan)
        self.activated_hosts = set(plan)
        self.failed_hosts: set[str] = set()
        # pyinfra's CLI sets PARALLEL (from the open-files limit): every operation's
        # _parallel defaults to it
        self.config = SimpleNamespace(FAIL_PERCENT=fail_percent, PARALLEL=20)
        self.parallel: dict[str, int] = {}
        self.should_raise_failed_hosts = None
        self.pool = SimpleNamespace(size=pool) if pool else None
        self.inventory = SimpleNamespace(get_active_hosts=lambda: sorted(self.active_hosts))
        self.callbacks: list[tuple[str, str]] = []
        setattr(self, schedule._MEETINGS, set(meetings))

    def get_op_order(self):
        return self.order

    def get_op_meta(self, op):
        return SimpleNamespace(names={op}, args=[],
                               global_arguments={"_serial": False,
                                                 "_parallel": self.parallel.get(op, 20),
                                                 "_run_once": False})

    def trigger_callbacks(self, name, op):
        self.callbacks.append((name, op))

    def fail_hosts(self, hosts):
        State.fail_hosts(self, hosts)


@pytest.fixture
def ops(monkeypatch):
    """Each host operation sleeps ``took[(host, op)]`` (default 0.01 s); ``fails`` fail; the
    events (start/end, host, op) in order."""
    record = SimpleNamespace(events=[], took={}, fails=set())

    def run(state, host, op):
        record.events.append(("start", host, op))
        gevent.sleep(record.took.get((host, op), 0.01))
        record.events.append(("end", host, op))
        return (host, op) not in record.fails

    monkeypatch.setattr(pyinfra_operations, "_run_host_op_with_context", run)
    monkeypatch.delenv("GPUINFRA_PACED", raising=False)
    return record


def at(events, what, host, op):
    return events.index((what, host, op))


def not_called(*args, **kwargs):
    raise AssertionError("pyinfra's run_ops was called")


def test_a_host_does_not_wait_for_another_between_meetings(ops):
    # the workers' driver install (o1) and the head's Slurm install (o2): pyinfra ran them
    # one after the other; here the head starts o2 while the worker is still in o1
    state = FakeState({"head": ["o2"], "w1": ["o1"]})
    ops.took[("w1", "o1")] = 0.1
    schedule.run_ops(state, original=not_called)
    assert at(ops.events, "start", "head", "o2") < at(ops.events, "end", "w1", "o1")


def test_a_meeting_starts_once_every_host_finished_every_operation_before_it(ops):
    state = FakeState({"head": ["o2", "o3"], "w1": ["o1", "o3"], "w2": ["o1", "o3"]},
                      meetings={"o3"})
    ops.took[("w2", "o1")] = 0.1
    schedule.run_ops(state, original=not_called)
    for host in ("head", "w1", "w2"):
        assert at(ops.events, "start", host, "o3") > at(ops.events, "end", "w2", "o1")
    assert at(ops.events, "start", "head", "o2") < at(ops.events, "end", "w2", "o1")


def test_a_failed_host_stops_there_and_holds_no_meeting(ops):
    state = FakeState({"head": ["o1", "o2"], "w1": ["o1", "o2"], "w2": ["o1", "o2"]},
                      meetings={"o2"}, fail_percent=50)
    ops.fails.add(("w1", "o1"))
    ops.took[("w1", "o1")] = 0.05
    schedule.run_ops(state, original=not_called)
    assert state.failed_hosts == {"w1"}
    assert ("start", "w1", "o2") not in ops.events
    assert ("end", "head", "o2") in ops.events and ("end", "w2", "o2") in ops.events


def test_past_the_fail_percent_every_host_stops_and_pyinfras_error_is_raised(ops):
    state = FakeState({"head": ["o1", "o2", "o3"], "w1": ["o1"]}, fail_percent=0)
    ops.fails.add(("w1", "o1"))
    ops.took[("head", "o1")] = 0.05
    with pytest.raises(PyinfraError, match="Over 0% of hosts failed"):
        schedule.run_ops(state, original=not_called)
    assert ("start", "head", "o2") not in ops.events  # the head stopped at its next step


def test_each_operation_starts_and_ends_once_for_the_callbacks(ops):
    state = FakeState({"head": ["o1", "o2"], "w1": ["o1", "o2"]})
    ops.took[("w1", "o1")] = 0.05
    schedule.run_ops(state, original=not_called)
    assert sorted(state.callbacks) == sorted([("operation_start", "o1"),
                                              ("operation_end", "o1"),
                                              ("operation_start", "o2"),
                                              ("operation_end", "o2")])
    # o1 ends with its last host (w1), after the head went on to o2
    assert state.callbacks.index(("operation_end", "o1")) > \
        state.callbacks.index(("operation_start", "o2"))


def test_a_small_pool_bounds_the_hosts_at_work_and_a_meeting_still_meets(ops):
    state = FakeState({f"w{i}": ["o1", "o2"] for i in range(5)}, meetings={"o2"}, pool=2)
    busy = []
    run = pyinfra_operations._run_host_op_with_context

    def counted(state_, host, op):
        busy.append(1)
        assert len(busy) <= 2
        try:
            return run(state_, host, op)
        finally:
            busy.pop()

    pyinfra_operations._run_host_op_with_context = counted
    with gevent.Timeout(5):  # a meeting waiting for a host kept out of the pool would hang
        schedule.run_ops(state, original=not_called)
    assert sum(1 for e in ops.events if e[0] == "end") == 10


def test_off_serial_no_wait_and_one_host_are_pyinfras_own(ops, monkeypatch):
    called = []

    def original(state, serial=False, no_wait=False):
        called.append((serial, no_wait))

    two = {"head": ["o1"], "w1": ["o1"]}
    schedule.run_ops(FakeState(two), serial=True, original=original)
    schedule.run_ops(FakeState(two), no_wait=True, original=original)
    schedule.run_ops(FakeState({"head": ["o1"]}), original=original)
    one_at_a_time = FakeState(two)
    one_at_a_time.parallel["o1"] = 1  # an operation's own _parallel
    schedule.run_ops(one_at_a_time, original=original)
    monkeypatch.setenv("GPUINFRA_PACED", "off")
    schedule.run_ops(FakeState(two), original=original)
    assert called == [(True, False), (False, True), (False, False), (False, False),
                      (False, False)]
    assert ops.events == []


def test_an_error_in_one_host_stops_the_others_and_is_raised(ops, monkeypatch):
    state = FakeState({"head": ["o1", "o2"], "w1": ["o1", "o2"]})
    ops.took[("head", "o1")] = 0.05

    def broken(state_, host, op):
        if host == "w1":
            raise RuntimeError("a callback's bug")
        return run(state_, host, op)

    run = pyinfra_operations._run_host_op_with_context
    monkeypatch.setattr(pyinfra_operations, "_run_host_op_with_context", broken)
    with pytest.raises(RuntimeError, match="a callback's bug"):
        schedule.run_ops(state, original=not_called)
    assert ("start", "head", "o2") not in ops.events


def test_each_line_a_host_prints_names_its_operation(ops, monkeypatch):
    from pyinfra.api.host import Host as PyinfraHost

    from gpuinfra_deploy.pyinfra_patches import engine

    said = []

    def run(state, host, op):
        said.append(engine._print_prefix(host))
        return True

    monkeypatch.setattr(pyinfra_operations, "_run_host_op_with_context", run)
    monkeypatch.setitem(engine._INSTALLED, "print_prefix", PyinfraHost.print_prefix)
    schedule.run_ops(FakeState({"head": ["o1"], "w1": ["o2"]}), original=not_called)
    plain = PyinfraHost.print_prefix.fget
    assert sorted(said) == sorted([plain(Host("head")) + schedule.format_text("o1", "blue") + ": ",
                                   plain(Host("w1")) + schedule.format_text("o2", "blue") + ": "])
    assert engine._print_prefix(Host("head")) == plain(Host("head"))  # outside an operation
    said.clear()  # one operation (`pyinfra exec ... -- hostname`): pyinfra's lines, as parsed
    schedule.run_ops(FakeState({"head": ["o1"], "w1": ["o1"]}), original=not_called)
    assert sorted(said) == sorted([plain(Host("head")), plain(Host("w1"))])
