"""gpuinfra_deploy/pyinfra_patches/planning.py: what one operation costs pyinfra to plan, per
host, cut without changing what is planned (compared with pyinfra's own functions)."""

from __future__ import annotations

from importlib import import_module

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.arguments import pop_global_arguments as pyinfra_pop
from pyinfra.api.connect import connect_all
from pyinfra.api.exceptions import ArgumentTypeError
from pyinfra.api.operation import OperationMeta
from pyinfra.api.state import StateOperationHostData
from pyinfra.api.util import make_hash as pyinfra_make_hash
from pyinfra.context import ctx_host
from pyinfra.operations import files, server

from gpuinfra_deploy.pyinfra_patches import engine, internals, planning

pyinfra_operation = import_module("pyinfra.api.operation")


@pytest.fixture
def hosts():
    """Two hosts with data in every layer pyinfra reads an argument's default from."""
    inventory = Inventory(
        ([("@fake/a", {"_sudo": True, "_env": {"A": "1"}}), "@fake/b", "@fake/c"],
         {"fake_delay": 0, "fake_delay_jitter": 0, "_timeout": 30}),
        workers=(["@fake/a", "@fake/b", "@fake/c"], {"_sudo_user": "ops", "_retries": 2}))
    state = State(inventory, Config())
    connect_all(state)
    return state, *(inventory.get_host(f"@fake/{name}") for name in "abc")


# ------------------------------------------------------------------------------ arguments

@pytest.mark.parametrize("kwargs", [
    {},
    {"name": "Set it", "_sudo": False, "path": "/etc/x"},
    {"_if": [lambda: True], "_env": {"B": "2"}, "_timeout": 5},
    {"_success_exit_codes": [0, 1], "_retries": 0, "_serial": True},
])
def test_arguments_are_pyinfras(hosts, kwargs):
    state, a, b, _ = hosts
    a.data._sudo_password = "from an override"  # the override layer too
    for host in (a, b):
        mine, theirs = dict(kwargs), dict(kwargs)
        assert planning.pop_global_arguments(state, host, mine) == pyinfra_pop(
            state, host, theirs)
        assert mine == theirs  # the same keys popped


def test_deploy_arguments_and_data_are_pyinfras(hosts):
    state, a, *_ = hosts
    with a.deploy(name="role", kwargs={"_sudo": False, "_chdir": "/tmp"},
                  data={"_su_user": "svc", "_sudo": True}):
        assert planning.pop_global_arguments(state, a, {"name": "x"}) == pyinfra_pop(
            state, a, {"name": "x"})


def test_a_value_of_the_wrong_type_is_refused_as_pyinfra_does(hosts):
    state, a, *_ = hosts
    for pop in (pyinfra_pop, planning.pop_global_arguments):
        with pytest.raises(ArgumentTypeError, match="Invalid argument `_timeout`"):
            pop(state, a, {"_timeout": "soon"})
        with pytest.raises(ArgumentTypeError, match="Invalid argument `_if`"):
            pop(state, a, {"_if": lambda needs_an_argument: True})
    # a check passed once is not a pass for a value of another type or signature
    planning.pop_global_arguments(state, a, {"_if": lambda: True})
    with pytest.raises(ArgumentTypeError):
        planning.pop_global_arguments(state, a, {"_if": lambda one, two: True})


def test_a_hosts_data_value_is_its_own_copy(hosts):
    state, a, *_ = hosts
    first, _ = planning.pop_global_arguments(state, a, {})
    first["_env"]["A"] = "changed"
    again, _ = planning.pop_global_arguments(state, a, {})
    assert again["_env"] == {"A": "1"}


# ------------------------------------------------------------------- formatted commands

@pytest.mark.parametrize(("string", "args"), [
    ("sha1sum {0} 2> /dev/null || shasum {0}", ("/etc/a b",)),
    ("test -e {0} && echo 'it is {1}'", ("/x'y", "there")),
    ("stat -c '%a %U' {0}", ("/etc/slurm/slurm.conf",)),
])
def test_formatted_commands_are_pyinfras_with_each_string_split_once(string, args):
    """make_formatted_string_command gives pyinfra's command with the engine installed, and
    a format string met again is not split again."""
    from pyinfra.api.command import QuoteString, make_formatted_string_command

    def made() -> tuple[str, str]:
        command = make_formatted_string_command(string, *[QuoteString(a) for a in args])
        return command.get_raw_value(), command.get_masked_value()

    theirs = made()
    engine.install()
    try:
        planning._split_once.cache_clear()
        assert made() == theirs
        assert made() == theirs
        info = planning._split_once.cache_info()
        assert (info.misses, info.hits) == (1, 1)
    finally:
        engine.uninstall()
    assert made() == theirs


# ------------------------------------------------------------------------------ hashes

@pytest.mark.parametrize("value", [[], [3, 14, 15], [1, True], (1, 2), {"a": [1]}, "x"])
def test_hashes_are_pyinfras(value):
    assert planning.make_hash(value) == pyinfra_make_hash(value)
    assert planning.make_hash(value) == pyinfra_make_hash(value)  # and from the memo


# ------------------------------------------------------------------------------ sharing

class Owner:
    def check(self) -> bool:
        return True


def test_same_is_strict():
    one, two = Owner(), Owner()
    assert planning.same({"a": [1, "x"], "b": None}, {"a": [1, "x"], "b": None})
    assert planning.same(one.check, one.check)  # two bound methods, one object's
    assert not planning.same(one.check, two.check)
    assert not planning.same({"t": 1}, {"t": True})  # equal, not the same type
    assert not planning.same({"a": 1, "b": 2}, {"b": 2, "a": 1})  # another order
    assert not planning.same([lambda: True], [lambda: True])  # only as the same object
    assert not planning.same({"e": {"A": "1"}}, {"e": {"A": "2"}})


def _op_data(global_arguments: dict):
    def command_generator():  # closes over global_arguments, as pyinfra's does
        yield global_arguments["name"]

    return StateOperationHostData(command_generator, global_arguments, OperationMeta("h", True))


def _closed_over(op_data) -> dict:
    generator = op_data.command_generator
    return generator.__closure__[generator.__code__.co_freevars.index("global_arguments")] \
        .cell_contents


def test_equal_arguments_are_shared_and_others_kept():
    state = State(Inventory(([], {})), Config())
    first = _op_data({"name": "x", "_if": None, "_env": {}})
    equal = _op_data({"name": "x", "_if": None, "_env": {}})
    other = _op_data({"name": "y", "_if": None, "_env": {}})
    for op_data in (first, equal, other):
        planning.share_arguments(state, "h", op_data)
    assert equal.global_arguments is first.global_arguments
    assert _closed_over(equal) is first.global_arguments  # the generator reads the same
    assert list(equal.command_generator()) == ["x"]
    assert other.global_arguments is not first.global_arguments
    assert _closed_over(other) is other.global_arguments


def test_a_planned_operation_shares_its_arguments_with_an_earlier_hosts(hosts):
    state, a, b, c = hosts
    engine.install()
    try:
        with internals.cli_planning(state):
            for host in (a, b, c):
                with ctx_host.use(host):
                    server.shell(name="Say hello", commands=["echo hello"])
                    files.file(name="Marker", path="/tmp/marker")
    finally:
        engine.uninstall()
    assert len(state.ops[c]) == 2
    for op_hash, theirs in state.ops[c].items():
        # a's data has a _sudo and an _env of its own: b's and c's equal each other only
        assert theirs.global_arguments is state.ops[b][op_hash].global_arguments
        assert theirs.global_arguments is not state.ops[a][op_hash].global_arguments
        generator = theirs.command_generator
        cell = generator.__closure__[generator.__code__.co_freevars.index("global_arguments")]
        assert cell.cell_contents is theirs.global_arguments  # the generator reads the same


def test_install_replaces_every_caller_and_uninstall_restores_them():
    callers = [import_module(f"pyinfra.api.{name}")
               for name in ("arguments", "operation", "deploy", "facts")]
    before = [module.pop_global_arguments for module in callers]
    engine.install()
    try:
        assert all(module.pop_global_arguments is planning.pop_global_arguments
                   for module in callers)
        assert pyinfra_operation.make_hash is planning.make_hash
    finally:
        engine.uninstall()
    assert [module.pop_global_arguments for module in callers] == before
    assert pyinfra_operation.make_hash is pyinfra_make_hash


# ------------------------------------------------------------------------------ padding

def test_each_hosts_print_padding_is_pyinfras():
    names = ["@fake/a", "@fake/a-much-longer-name", "@fake/mid-name"]
    padding = {}
    for installed in (False, True):
        if installed:
            engine.install()
        try:
            inventory = Inventory((names, {"fake_delay": 0, "fake_delay_jitter": 0}))
            state = State(inventory, Config())
            padding[installed] = {h.name: h.print_prefix_padding for h in inventory}
            assert all(h.state is state and h.connector is not None for h in inventory)
        finally:
            if installed:
                engine.uninstall()
    assert padding[True] == padding[False]
    assert padding[True]["@fake/a"] == " " * (len(names[1]) - len(names[0]))


# ------------------------------------------------------------------------------ collector

def test_the_collector_runs_less_while_planning_and_as_usual_for_the_operations(monkeypatch):
    import gc

    from gpuinfra_deploy.pyinfra_patches import schedule

    usual = gc.get_threshold()
    engine.install()
    try:
        assert gc.get_threshold() == planning.PLANNING_GC
        monkeypatch.setattr(schedule, "run_ops", lambda *a, **k: None)
        engine._run_ops_paced(None)  # the CLI runs the planned operations
        assert gc.get_threshold() == usual
    finally:
        engine.uninstall()
    assert gc.get_threshold() == usual
    engine.install()
    engine.uninstall()  # planned, nothing run: the usual thresholds back too
    assert gc.get_threshold() == usual
