"""gpuinfra_deploy/pyinfra_patches/internals.py: the one adapter for the pyinfra internals that
the plan, the render and the run summary use. It refuses another pyinfra version and a missing
or reshaped internal loudly (naming the internal and the versions), it undoes every swap, and
README.md lists what it guards."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from pyinfra.api.host import Host
from pyinfra.api.operation import OperationMeta
from pyinfra.api.state import State

from gpuinfra_deploy.pyinfra_patches import internals
from gpuinfra_deploy.pyinfra_patches.internals import PINNED, PyinfraChanged, verify
from tests.conftest import REPO

README = REPO / "gpuinfra_deploy" / "pyinfra_patches" / "README.md"


def test_the_pin_is_pyprojects():
    pins = re.findall(r'"pyinfra==([\d.]+)"', (REPO / "pyproject.toml").read_text())
    assert pins == [PINNED]


def test_every_internal_holds_on_the_installed_pyinfra():
    verify()
    assert {i.name: i.check() for i in internals.INTERNALS} == \
        {i.name: None for i in internals.INTERNALS}


def test_another_version_fails_loudly():
    with pytest.raises(PyinfraChanged, match=r"^pyinfra 3\.11\.0 \(pinned: 3\.10\.0\): the "
                       r"installed version: is 3\.11\.0, not 3\.10\.0"):
        verify(version="3.11.0")


def test_importing_the_render_under_another_pyinfra_fails_loudly():
    """At import, before anything is planned: `gpuinfra render` cannot run half-blind."""
    code = ("import pyinfra; pyinfra.__version__ = '3.11.0'\n"
            "import gpuinfra_deploy.render\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=False, timeout=120)
    assert run.returncode != 0
    assert "PyinfraChanged: pyinfra 3.11.0 (pinned: 3.10.0): the installed version" \
        in run.stderr


def _init_keeping_nothing(self, hash, is_change):  # pyinfra's own parameter names
    pass


@pytest.mark.parametrize(("owner", "attr", "value", "named", "says"), [
    (Host, "current_deploy_name", None, "pyinfra.api.host.Host.current_deploy_name",
     "missing"),
    (State, "set_op_data_for_host", lambda self, host, op_hash: None,
     "pyinfra.api.state.State.set_op_data_for_host", "takes"),
    (OperationMeta, "did_change", None, "pyinfra.api.operation.OperationMeta.did_change",
     "missing"),
    (OperationMeta, "__init__", _init_keeping_nothing,
     "pyinfra.api.operation.OperationMeta._hash", "no longer keeps _hash"),
    (internals.pyinfra_operation, "_wrap_operation", lambda func: func,
     "pyinfra.api.operation._wrap_operation.command_generator", "no command_generator"),
])
def test_a_missing_or_reshaped_internal_fails_loudly_naming_it(monkeypatch, owner, attr, value,
                                                               named, says):
    if value is None:
        monkeypatch.delattr(owner, attr)
    else:
        monkeypatch.setattr(owner, attr, value)
    with pytest.raises(PyinfraChanged) as caught:
        verify()
    message = str(caught.value)
    assert message.startswith(f"pyinfra 3.10.0 (pinned: 3.10.0): {named}: ")
    assert says in message and "internals.py" in message


def test_a_live_structure_that_changed_fails_at_use():
    class NoOps:
        def get_op_order(self):
            return []

    with pytest.raises(PyinfraChanged, match=r"pyinfra\.api\.state\.State\.ops"):
        internals.host_op_order(NoOps(), None)  # type: ignore[arg-type]


def _owned() -> dict[str, object]:
    import pyinfra

    return {"is_cli": vars(pyinfra)["is_cli"], "get_fact": vars(Host)["get_fact"],
            "did_change": vars(OperationMeta)["did_change"],
            "set_op_data_for_host": vars(State)["set_op_data_for_host"],
            "get_all_connectors": vars(internals.pyinfra_inventory)["get_all_connectors"]}


def test_each_swap_is_undone_even_when_the_block_raises():
    from gpuinfra_deploy.plan import FakeHost, fake_state

    before = _owned()
    state, _ = fake_state([FakeHost("node1", ("workers",), {})])
    swaps = [internals.cli_planning(state), internals.facts_answered_by(lambda *a, **k: None),
             internals.handlers_follow_triggers(), internals.noting_operations(lambda h, o: None),
             internals.connectors_listed_once()]
    for swap in swaps:
        with pytest.raises(RuntimeError), swap:
            assert _owned() != before
            raise RuntimeError("inside")
        assert _owned() == before
    # an attribute the owner only inherited is removed again, not copied onto it

    class Child(OperationMeta):
        pass

    with internals._swapped(Child, "did_change", len):
        assert Child.did_change is len
    assert "did_change" not in vars(Child)


def test_the_readers_on_a_planned_operation(tmp_path):
    """What render and plan read of a planned operation: its order, names, conditions,
    commands, the function and keyword arguments it was called with, and the @deploy."""
    from gpuinfra_deploy.plan import FakeHost, answering, deploy_as_cli, deploy_file, fake_state

    deploy = tmp_path / "deploy.py"
    deploy.write_text("from pyinfra.operations import server\n"
                      "server.shell(name='say hi', commands=['echo hi'])\n"
                      "server.shell(name='never', commands=['false'], _if=lambda: False)\n")
    state, inventory = fake_state([FakeHost("node1", ("workers",), {})])
    host = inventory.get_host("node1")
    seen: list[tuple[str, str | None]] = []
    with answering(lambda *a, **k: None, inventory), \
            internals.noting_operations(lambda h, o: seen.append((h.name, o))):
        deploy_as_cli(state, deploy_file(deploy), [host])
    order = internals.host_op_order(state, host)
    assert [o for _, o in seen] == order and len(order) == 2
    first, second = order
    assert internals.op_names(state, first) == {"say hi"}
    assert internals.op_conditions(state, host, first) == []
    assert [c() for c in internals.op_conditions(state, host, second)] == [False]
    with answering(lambda *a, **k: None, inventory):
        assert [str(c) for c in internals.op_commands(state, host, first)] == ["echo hi"]
    func, kwargs = internals.op_call(state, host, first)
    assert func.__name__ == "shell" and kwargs == {"commands": ["echo hi"]}
    assert internals.deploy_name(host) is None


def test_the_readme_lists_every_guarded_internal():
    section = README.read_text().split("## Internals read or swapped for a while")[1]
    section = section.split("\n## ")[0]
    listed = re.findall(r"^\| `([\w.]+)` \|", section, re.M)
    assert listed == [i.name for i in internals.INTERNALS]


def test_a_hosts_operations_in_a_long_run_order_are_in_that_order():
    """The head has operations for every node: a worker's own are found in the run's order
    by their places (once per order), the same as walking the order."""
    from gpuinfra_deploy.plan import FakeHost, fake_state

    state, inventory = fake_state([FakeHost("node1", ("workers",), {})])
    host = inventory.get_host("node1")
    order = [f"op{i}" for i in range(1000)]
    state.ops[host] = {h: None for h in ("op900", "op3", "op512", "elsewhere")}
    assert internals.host_op_order(state, host, order) == ["op3", "op512", "op900"]
    assert internals.host_op_order(state, host, order[:5]) == ["op3"]  # a short one: walked
    assert internals.host_op_order(state, host, list(reversed(order))) == \
        ["op900", "op512", "op3"]  # another order: its own places
