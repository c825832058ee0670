"""The pyinfra internals that the plan (gpuinfra_deploy/plan.py), `gpuinfra render`
(gpuinfra_deploy/render/) and the run summary (gpuinfra_deploy/run/summary.py) read, or
replace for the length of a ``with`` block.

:data:`INTERNALS` names each one, what it is used for, and how its shape is checked. When
this module is imported (and so when anything in ``gpuinfra_deploy.pyinfra_patches`` is),
:func:`verify` checks that the installed pyinfra is :data:`PINNED` (pyproject.toml's
``pyinfra==3.10.0``) and that each internal still has the shape named here. If not, it raises
:class:`PyinfraChanged`, which names the internal and both versions. An upgrade then breaks
here, loudly, and not as a render that quietly misses files. Values that only exist on a live
object (a State's ``ops``, an Inventory's ``hosts``) are checked again when they are used.

Every replacement here is temporary. The attribute is set, and a ``finally`` sets it back
(:func:`_swapped`). There is no ``mock`` in product code. The lasting patches are engine.py,
uploads.py and loader.py (README.md).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from typing import Any
from weakref import WeakKeyDictionary

import pyinfra
from pyinfra.api.host import Host
from pyinfra.api.inventory import Inventory
from pyinfra.api.operation import OperationMeta
from pyinfra.api.state import State, StateOperationHostData, StateOperationMeta, StateStage
from pyinfra.context import ctx_host, ctx_state

from gpuinfra.errors import GpuinfraError

# The module (``pyinfra.api.operation`` as an attribute is the decorator, not the module).
pyinfra_operation = import_module("pyinfra.api.operation")
pyinfra_inventory = import_module("pyinfra.api.inventory")

# pyproject.toml pins this version (tests/unit/test_pyinfra_internals.py keeps the two equal).
PINNED = "3.10.0"


class PyinfraChanged(GpuinfraError):
    """An internal pyinfra used here is missing or has changed shape, or the installed pyinfra
    is not the pinned version."""


def _changed(name: str, problem: str, version: str | None = None) -> PyinfraChanged:
    version = version or getattr(pyinfra, "__version__", "unknown")
    return PyinfraChanged(
        f"pyinfra {version} (pinned: {PINNED}): {name}: {problem}. gpuinfra relies on this "
        "internal (gpuinfra_deploy/pyinfra_patches/internals.py); re-check it in the new "
        "pyinfra before moving the pin (pyinfra_patches/README.md, 'Upgrading pyinfra')")


# ------------------------------------------------------------------------------ the shapes

def _params(func: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(func).parameters.values()]


_P, _VAR, _KW = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.VAR_POSITIONAL,
                 inspect.Parameter.VAR_KEYWORD)


def _method(owner: Any, attr: str, params: list[tuple[str, Any]]) -> Callable[[], str | None]:
    def check() -> str | None:
        value = vars(owner).get(attr)
        if not callable(value):
            return "missing (no such method)"
        kinds = [kind for _, kind in _params(value)]
        if kinds != [kind for _, kind in params]:
            return f"takes {_params(value)}, expected {params}"
        return None

    return check


def _function(module: Any, attr: str, params: list[tuple[str, Any]]
              ) -> Callable[[], str | None]:
    def check() -> str | None:
        value = vars(module).get(attr)
        if not callable(value):
            return "missing (no such function)"
        if _params(value) != params:
            return f"takes {_params(value)}, expected {params}"
        return None

    return check


def _is_cli() -> str | None:
    if not isinstance(vars(pyinfra).get("is_cli"), bool):
        return "missing, or not a bool"
    return None


def _meta_fields() -> str | None:
    meta = OperationMeta("hash", True)
    if getattr(meta, "_hash", None) != "hash" or getattr(meta, "_maybe_is_change", None) \
            is not True:
        return "OperationMeta(hash, is_change) no longer keeps _hash and _maybe_is_change"
    return None


def _host_data_fields() -> str | None:
    fields = {f.name for f in dataclasses.fields(StateOperationHostData)}
    missing = {"command_generator", "global_arguments"} - fields
    return f"lacks the fields {sorted(missing)}" if missing else None


def _op_meta_names() -> str | None:
    if not isinstance(getattr(StateOperationMeta((0,)), "names", None), set):
        return "StateOperationMeta((0,)).names is not a set"
    return None


def _set_in(function: Any, attr: str) -> Callable[[], str | None]:
    def check() -> str | None:
        code = getattr(function, "__code__", None)
        if code is None or attr not in code.co_names:
            return f"{function.__qualname__} no longer sets .{attr}"
        return None

    return check


def _code_named(code: types.CodeType, name: str) -> types.CodeType | None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            found = _code_named(const, name)
            if found is not None:
                return found
    return None


def _generator_closure() -> str | None:
    wrap = vars(pyinfra_operation).get("_wrap_operation")
    code = _code_named(wrap.__code__, "command_generator") if wrap is not None else None
    if code is None:
        return "no command_generator inside pyinfra.api.operation._wrap_operation"
    missing = {"func", "args", "kwargs", "global_arguments"} - set(code.co_freevars)
    return f"its closure lacks {sorted(missing)}" if missing else None


def _has(owner: Any, attr: str) -> Callable[[], str | None]:
    def check() -> str | None:
        return None if hasattr(owner, attr) else "missing"

    return check


@dataclass(frozen=True)
class Internal:
    """One pyinfra internal: its dotted name, what gpuinfra does with it, and its check (a
    problem in words, or None)."""

    name: str
    use: str
    check: Callable[[], str | None]


INTERNALS: tuple[Internal, ...] = (
    Internal("pyinfra.is_cli",
             "set to True while the deploy is planned as `pyinfra INVENTORY deploy.py` plans "
             "it (cli_planning)", _is_cli),
    Internal("pyinfra.api.state.State.set_stage",
             "the Prepare stage a CLI run plans in (cli_planning)",
             _method(State, "set_stage", [("self", _P), ("stage", _P)])),
    Internal("pyinfra.api.host.Host.get_fact",
             "replaced while facts are answered from recorded ones (facts_answered_by)",
             _method(Host, "get_fact", [("self", _P), ("name_or_cls", _P), ("args", _VAR),
                                        ("kwargs", _KW)])),
    Internal("pyinfra.api.operation.OperationMeta.did_change",
             "replaced so that a handler follows its trigger in a plan "
             "(handlers_follow_triggers)",
             _method(OperationMeta, "did_change", [("self", _P)])),
    Internal("pyinfra.api.operation.OperationMeta._hash",
             "read by the plan's did_change: which operation it is", _meta_fields),
    Internal("pyinfra.api.operation.OperationMeta._maybe_is_change",
             "read by the plan's did_change: would the operation run commands", _meta_fields),
    Internal("pyinfra.api.state.State.set_op_data_for_host",
             "wrapped while a render notes the facts asked before each operation "
             "(noting_operations)",
             _method(State, "set_op_data_for_host", [("self", _P), ("host", _P),
                                                     ("op_hash", _P), ("op_data", _P)])),
    Internal("pyinfra.api.state.State.ops",
             "read: which operations a host has ({host: {op_hash: op data}})",
             _set_in(State.init, "ops")),
    Internal("pyinfra.api.state.State.get_op_data_for_host",
             "read: one operation's data on one host",
             _method(State, "get_op_data_for_host", [("self", _P), ("host", _P),
                                                     ("op_hash", _P)])),
    Internal("pyinfra.api.state.StateOperationHostData",
             "read: command_generator (the commands again) and global_arguments (the _if)",
             _host_data_fields),
    Internal("pyinfra.api.state.StateOperationMeta.names",
             "read: an operation's names (State.get_op_meta)", _op_meta_names),
    Internal("pyinfra.api.operation._wrap_operation.command_generator",
             "its closure read: the operation function and keyword arguments (op_call); "
             "its global_arguments shared (planning.share_arguments)",
             _generator_closure),
    Internal("pyinfra.api.host.Host.current_deploy_name",
             "read: the @deploy a host is in (deploy_name)", _has(Host, "current_deploy_name")),
    Internal("pyinfra.api.inventory.get_all_connectors",
             "listed once while an inventory of @fake hosts is made (connectors_listed_once)",
             _function(pyinfra_inventory, "get_all_connectors", [])),
    Internal("pyinfra.api.inventory.Inventory.hosts",
             "rebuilt when fake hosts are renamed ({name: Host}; rename_hosts)",
             _set_in(Inventory.make_hosts_and_groups, "hosts")),
)


def verify(version: str | None = None,
           internals: tuple[Internal, ...] = INTERNALS) -> None:
    """Raise :class:`PyinfraChanged` unless pyinfra is :data:`PINNED` and every internal
    has its expected shape (``version``: the installed one unless given)."""
    version = version or getattr(pyinfra, "__version__", "unknown")
    if version != PINNED:
        raise _changed("the installed version",
                       f"is {version}, not {PINNED}: every internal below may have moved", version)
    for internal in internals:
        try:
            problem = internal.check()
        except Exception as exc:  # a check that cannot even run: the shape moved
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            raise _changed(internal.name, problem, version)


verify()


# ------------------------------------------------------------------------------ swapping

@contextmanager
def _swapped(owner: Any, attr: str, value: Any) -> Iterator[None]:
    """``owner.attr`` is ``value`` within, and exactly what it was afterwards."""
    own = vars(owner)
    had, before = attr in own, own.get(attr)
    setattr(owner, attr, value)
    try:
        yield
    finally:
        if had:
            setattr(owner, attr, before)
        else:
            delattr(owner, attr)


@contextmanager
def cli_planning(state: State) -> Iterator[None]:
    """Within: ``state`` plans as `pyinfra INVENTORY deploy.py` does. The operations are
    identified and ordered by the lines of the deploy code (pyinfra's ``is_cli``), in the
    Prepare stage."""
    state.set_stage(StateStage.Prepare)
    with _swapped(pyinfra, "is_cli", True), ctx_state.use(state):
        yield


def fact_reader() -> Callable[..., Any]:
    """The ``Host.get_fact`` in place now (pyinfra's own, the engine's, or a plan's answerer),
    for a wrapper that still asks it."""
    return Host.get_fact


@contextmanager
def facts_answered_by(get_fact: Callable[..., Any]) -> Iterator[None]:
    """Within: every ``host.get_fact(cls, *args, **kwargs)`` is
    ``get_fact(host, cls, *args, **kwargs)``."""
    with _swapped(Host, "get_fact", get_fact):
        yield


def _planned_did_change(self: OperationMeta) -> bool:
    """A handler's trigger changed when it would run commands and its own conditions hold
    (an operation skipped by its ``_if`` changes nothing, as in a real run)."""
    if not self._maybe_is_change:
        return False
    state, host = ctx_state.get(), ctx_host.get()
    if state is None or host is None or self._hash not in _ops(state).get(host, {}):
        return True
    return all(cond() for cond in op_conditions(state, host, self._hash))


@contextmanager
def handlers_follow_triggers() -> Iterator[None]:
    """Within: ``op.did_change`` of a planned (never executed) operation says whether it would
    change something, so the handlers (``_if=op.did_change``) are planned as they would run."""
    with _swapped(OperationMeta, "did_change", _planned_did_change):
        yield


@contextmanager
def noting_operations(note: Callable[[Host, str], None]) -> Iterator[None]:
    """Within: ``note(host, op_hash)`` is called as each operation is planned on a host, just
    before pyinfra stores it."""
    original = State.set_op_data_for_host

    def noted(self: State, host: Host, op_hash: str, op_data: Any) -> None:
        note(host, op_hash)
        original(self, host, op_hash, op_data)

    with _swapped(State, "set_op_data_for_host", noted):
        yield


@contextmanager
def connectors_listed_once() -> Iterator[None]:
    """Within: pyinfra's inventory lists its connectors once. It lists them again for each
    ``@connector`` host it makes (the installed packages' entry points, read from their
    metadata: 8 ms a host, most of making a 10,000-host inventory of ``@fake`` hosts)."""
    listed = pyinfra_inventory.get_all_connectors()
    with _swapped(pyinfra_inventory, "get_all_connectors", lambda: listed):
        yield


def rename_hosts(inventory: Inventory, names: Mapping[str, str]) -> None:
    """Each host ``old`` of ``names`` is called ``names[old]``. Roles see "lab-head", not
    "@fake/lab-head", and find the other hosts by that name."""
    if not isinstance(getattr(inventory, "hosts", None), dict):
        raise _changed("pyinfra.api.inventory.Inventory.hosts", "not a dict of hosts by name")
    for old, new in names.items():
        inventory.get_host(old).name = new
    inventory.hosts = {host.name: host for host in inventory.hosts.values()}


# ------------------------------------------------------------------------------ reading

def _ops(state: State) -> dict[Host, dict[str, Any]]:
    ops = getattr(state, "ops", None)
    if not isinstance(ops, dict):
        raise _changed("pyinfra.api.state.State.ops", "not a dict {host: {op_hash: op data}}")
    return ops


def host_op_order(state: State, host: Host, order: Sequence[str] | None = None) -> list[str]:
    """The operations planned on ``host``, in the run's order (``order``: the state's
    ``get_op_order()``, when the caller already has it). A run's order can be much longer than
    one host's operations (the head has some for every node): then the host's own are sorted
    by their place in it, found once per order, not by walking the whole order per host."""
    own = _ops(state).get(host, {})
    order = order if order is not None else state.get_op_order()
    if len(order) <= 4 * len(own) + 64:
        return [h for h in order if h in own]
    positions = _positions(state, order)
    return sorted((h for h in own if h in positions), key=positions.__getitem__)


# A State -> (the order last asked about, each operation's place in it).
_POSITIONS: WeakKeyDictionary[State, tuple[Sequence[str], dict[str, int]]] = \
    WeakKeyDictionary()


def _positions(state: State, order: Sequence[str]) -> dict[str, int]:
    known = _POSITIONS.get(state)
    if known is None or known[0] is not order:
        known = (order, {h: i for i, h in enumerate(order)})
        _POSITIONS[state] = known
    return known[1]


def op_names(state: State, op_hash: str) -> set[str]:
    """The names pyinfra gives one operation (several when hosts named it differently)."""
    return set(state.get_op_meta(op_hash).names)


def op_conditions(state: State, host: Host, op_hash: str) -> list[Callable[[], bool]]:
    """The ``_if`` conditions of an operation on a host (empty: it always runs)."""
    found = state.get_op_data_for_host(host, op_hash).global_arguments.get("_if") or []
    return found if isinstance(found, list) else [found]


def op_commands(state: State, host: Host, op_hash: str) -> list[Any]:
    """The commands an operation would run on ``host`` now: its generator run again, with
    the facts as they are answered now."""
    generate = state.get_op_data_for_host(host, op_hash).command_generator
    with ctx_state.use(state), ctx_host.use(host):
        return list(generate())


def op_call(state: State, host: Host, op_hash: str) -> tuple[Any, Mapping[str, Any]]:
    """(function, keyword arguments) of an operation on a host. pyinfra keeps them only in
    the closure of the operation's command generator."""
    generate = state.get_op_data_for_host(host, op_hash).command_generator
    cells = dict(zip(generate.__code__.co_freevars, generate.__closure__ or (), strict=False))
    func = cells["func"].cell_contents if "func" in cells else None
    kwargs = cells["kwargs"].cell_contents if "kwargs" in cells else {}
    return func, kwargs


def deploy_name(host: Host) -> str | None:
    """The name of the ``@deploy`` (role) the host is planning now, None outside one."""
    return host.current_deploy_name
