"""What pyinfra spends planning one operation on one host, cut where it grows with the fleet.

Planning the deploy for 1 head + N workers costs pyinfra the same work per operation and host,
about 120 operations per worker (``python -m bench.plan_scale``). Profiled at 300 and 1,000
workers (cProfile, tracemalloc: docs/measurements.md), two pieces of that work were most of it:

1. **Time: the global arguments' defaults.** ``pop_global_arguments`` (api/arguments.py) looks
   up each of its 32 global arguments in the host's data, and each lookup
   (``HostData.__getattr__``) calls every layer of that data again: the override data, the
   host's, the merged data of its groups (a new dict per lookup), the inventory's, the
   @deploy's. 32 x 5 layer calls per operation was half of all planning time. Here the
   layers are read once per call, then looked up in pyinfra's order: the same values (a
   layer does not change while one operation's arguments are read).
2. **Memory: a dict of ~30 global arguments per operation and host.** Each planned operation
   keeps its own (``StateOperationHostData.global_arguments``, and the same dict in its
   command generator's closure), nearly always equal, key by key, to every other host's for
   that operation: 10,000 workers held 1.2 million of them. When a host's dict is the same as
   one an earlier host kept for that operation (same keys in the same order, values of the
   same type and equal, a callable the very same one or the same method of the same object),
   the host keeps that one (:func:`share_arguments`). No pyinfra code changes a stored
   operation's arguments (the CLI and the run read them, a fact read copies them), and a
   value that differs (a handler's ``_if=op.did_change``) keeps the host's own dict.

3. **Time and memory: each operation's hash.** pyinfra hashes an operation's line numbers
   (``make_hash``: a SHA-1 per number) on every host, each host keeping its own copy of the
   same 40 characters. :func:`make_hash` answers the same line numbers with the same string.

4. **Time: a host's print padding.** ``Host.init`` pads each host's printed name to the
   longest name of the inventory, measuring every name again for each host (quadratic: 10^8
   names measured for 10,000 hosts). :func:`host_init` measures them once per run's set of
   hosts.

5. **Time: the cyclic garbage collector while planning.** Planning makes millions of objects
   that live until the run ends and almost no cyclic garbage (238 objects found in the 13 full
   collections of planning 1,000 workers), and each full collection walks every live object:
   11-17% of planning's CPU at 1,000 workers. While the deploy is planned the collector runs
   less often (:data:`PLANNING_GC`); the run's operations execute with Python's thresholds
   again (:func:`collect_as_usual`).

Installed by ``engine.install()`` (config.py), as its third change (per-operation CPU).
"""

from __future__ import annotations

import functools
import gc
import shlex
import types
from copy import copy
from importlib import import_module
from typing import Any
from weakref import WeakKeyDictionary

from pyinfra.api.arguments import all_argument_meta
from pyinfra.api.exceptions import ArgumentTypeError
from pyinfra.api.util import make_hash as pyinfra_make_hash
from pyinfra.api.util import raise_if_bad_type
from pyinfra.context import ctx_config

# The module (``pyinfra.api`` re-exports names over its submodules): its all_global_arguments
# looked up at each call, as pyinfra's own function does (the engine computes it once).
pyinfra_arguments = import_module("pyinfra.api.arguments")

_SHARED = "_gpuinfra_shared_arguments"  # on a State: {op_hash: [arguments kept to share]}


def pop_global_arguments(state: Any, host: Any, kwargs: dict[str, Any],
                         ) -> tuple[dict[str, Any], list[str]]:
    """pyinfra's ``pop_global_arguments`` (api/arguments.py), each layer of the host's data
    read once (see the module docstring): the operation's global arguments, and the keys
    found in ``kwargs`` (popped from it)."""
    config = state.config
    if ctx_config.isset():
        config = ctx_config.get()
        assert config is not None
    meta_kwargs: dict[str, Any] = host.current_deploy_kwargs or {}
    names, table = _table(pyinfra_arguments.all_global_arguments())
    from_data = _host_values(host, names)

    arguments: dict[str, Any] = {}
    found_keys: list[str] = []
    for key, type_, default_of, handler in table:
        default: Any = copy(from_data[key]) if key in from_data else default_of(config)
        if key in kwargs:
            found_keys.append(key)
            value = kwargs.pop(key)
        else:
            value = meta_kwargs.get(key, default)
        if handler:
            value = handler(config, value)
        if value != default:
            _checked(value, type_, key)
        arguments[key] = value
    return arguments, found_keys


# (the global arguments as last listed, (their names, (name, type, default, handler) each))
_TABLE: list[Any] = [None, None]


def _table(keys: list[tuple[str, Any]]) -> tuple[frozenset[str], tuple[tuple[Any, ...], ...]]:
    """pyinfra's global arguments with what pop_global_arguments needs of each, made again
    only when the list changes."""
    if _TABLE[0] != keys:
        _TABLE[1] = (frozenset(key for key, _ in keys),
                     tuple((key, type_, all_argument_meta[key].default,
                            all_argument_meta[key].handler) for key, type_ in keys))
        _TABLE[0] = list(keys)
    return _TABLE[1]


def _host_values(host: Any, keys: frozenset[str]) -> dict[str, Any]:
    """``getattr(host.data, key)`` for each of ``keys`` the host's data has (pyinfra's
    ``HostData.__getattr__``: its layers called in order, the first holding the key wins),
    each layer called once."""
    found: dict[str, Any] = {}
    for data in host.data.datas:
        if callable(data):
            data = data()
        if type(data) is dict:
            present = keys & data.keys()
        else:
            present = {key for key in keys if _holds(data, key)}
        for key in present:
            if key not in found:
                found[key] = data[key]
    return found


# (argument, its type, what decides the check) -> passed. pyinfra checks every argument that is
# not its default with typeguard on each operation: a name (str) and an _if (a method, a
# function) on nearly every operation of every host, the same check each time.
_PASSED: dict[tuple[Any, ...], bool] = {}


def _checked(value: Any, type_: Any, key: str) -> None:
    """pyinfra's ``raise_if_bad_type`` on an argument, a check already passed not run again:
    for a plain value its type decides it, for a function or a method what typeguard reads of
    it (its parameters: :func:`_shape`)."""
    kind = type(value)
    decides: Any = None
    if kind in _PLAIN:
        decides = kind
    elif kind is types.FunctionType:
        decides = _shape(value)
    elif kind is types.MethodType and type(value.__func__) is types.FunctionType:
        shape = _shape(value.__func__)
        decides = None if shape is None else (kind, shape)
    memo = (key, type_, decides)
    if decides is not None and memo in _PASSED:
        return
    raise_if_bad_type(value, type_, ArgumentTypeError, f"Invalid argument `{key}`:")
    if decides is not None and len(_PASSED) < 4096:
        _PASSED[memo] = True


def _shape(func: types.FunctionType) -> Any:
    """What decides a function's signature's parameters (typeguard checks a callable by
    them): its code (names, kinds, count) and which have defaults; None for a function whose
    signature is given otherwise (a wrapper's, an explicit ``__signature__``)."""
    if hasattr(func, "__wrapped__") or hasattr(func, "__signature__"):
        return None
    return (func.__code__, len(func.__defaults__ or ()),
            tuple(sorted(func.__kwdefaults__ or ())))


def _holds(data: Any, key: str) -> bool:
    try:
        data[key]
    except KeyError:
        return False
    return True


# ------------------------------------------------------------------------------ collector

# gc thresholds while planning: a young collection every 50,000 allocations (Python: 700),
# a full one after 100 middle ones (Python: 10).
PLANNING_GC = (50_000, 20, 100)
_USUAL_GC: list[tuple[int, int, int]] = []


def collect_less() -> None:
    """The planning thresholds (:data:`PLANNING_GC`), the usual ones kept (idempotent)."""
    if not _USUAL_GC:
        _USUAL_GC.append(gc.get_threshold())
        gc.set_threshold(*PLANNING_GC)


def collect_as_usual() -> None:
    """The thresholds before :func:`collect_less` (no-op when they are in place)."""
    if _USUAL_GC:
        gc.set_threshold(*_USUAL_GC.pop())


# ------------------------------------------------------------------------------ host padding

# A run's State -> (its inventory's hosts dict, how many, the longest name's length).
_LONGEST: WeakKeyDictionary[Any, tuple[int, int, int]] = WeakKeyDictionary()


def host_init(host: Any, state: Any, original: Any) -> None:
    """pyinfra's ``Host.init`` (api/host.py): the host's state and connector, and its print
    padding to the longest name of the inventory, that longest name measured once while the
    inventory's hosts are the same (pyinfra measures every name for each host)."""
    inventory = host.inventory
    hosts = getattr(inventory, "hosts", None)
    try:
        known = _LONGEST.get(state)
    except TypeError:  # a state that cannot be weakly held: pyinfra's own
        original(host, state)
        return
    if not isinstance(hosts, dict):
        original(host, state)
        return
    if known is None or known[:2] != (id(hosts), len(hosts)):
        known = (id(hosts), len(hosts), max(len(each.name) for each in inventory))
        _LONGEST[state] = known
    host.state = state
    host.connector = host.connector_cls(state, host)
    host.print_prefix_padding = " " * (known[2] - len(host.name))


# ------------------------------------------------------------------------------ hashes

_HASHES: dict[tuple[int, ...], str] = {}
_MAX_HASHES = 1 << 16  # distinct operations of a deploy: hundreds; a bound all the same


def make_hash(obj: Any) -> str:
    """pyinfra's ``make_hash`` (api/util.py); for an operation's line numbers (a list of
    ints, as ``solve_operation_consistency`` passes them) the string already made for them."""
    if type(obj) is not list or not all(type(item) is int for item in obj):
        return str(pyinfra_make_hash(obj))
    key = tuple(obj)
    found = _HASHES.get(key)
    if found is None:
        found = str(pyinfra_make_hash(obj))
        if len(_HASHES) < _MAX_HASHES:
            _HASHES[key] = found
    return found


# ------------------------------------------------------------------------------ sharing

_PLAIN = (str, int, float, bool, bytes, type(None))


def same(a: Any, b: Any) -> bool:
    """Whether ``b`` can stand for ``a`` in an operation's arguments: the same object, or
    plain values (str, numbers, None, and lists, tuples, dicts of them) of the same types and
    equal, or the same method of the same object. Anything else only as the same object."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _PLAIN:
        return bool(a == b)
    if kind is list or kind is tuple:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):
            if x is not y and not same(x, y):
                return False
        return True
    if kind is dict:
        if len(a) != len(b):
            return False
        for (key, x), (other, y) in zip(a.items(), b.items(), strict=True):
            if (key is not other and not same(key, other)) or (x is not y and not same(x, y)):
                return False
        return True
    if kind is types.MethodType:
        return a.__self__ is b.__self__ and a.__func__ is b.__func__
    return False


def _equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (a value whose == raises: not the same)
        return False


# Per operation, the first few different dicts of arguments kept to share (the head's may
# differ from the workers', which all share one).
_KEPT = 4


def share_arguments(state: Any, op_hash: str, op_data: Any) -> None:
    """Give ``op_data`` (one host's planned operation) the global arguments dict an earlier
    host of ``op_hash`` keeps, when the two are :func:`same`; else leave its own."""
    shared = getattr(state, _SHARED, None)
    if shared is None:
        shared = {}
        setattr(state, _SHARED, shared)
    mine = op_data.global_arguments
    kept = shared.setdefault(op_hash, [])
    # == first (C, quick to say no), then the strict comparison
    first = next((kept_one for kept_one in kept
                  if kept_one is mine or (_equal(kept_one, mine) and same(kept_one, mine))),
                 None)
    if first is None:
        if len(kept) < _KEPT:
            kept.append(mine)
        return
    if first is mine:
        return
    generator = op_data.command_generator
    code = getattr(generator, "__code__", None)
    if code is None or "global_arguments" not in code.co_freevars or not generator.__closure__:
        return
    cell = generator.__closure__[code.co_freevars.index("global_arguments")]
    if cell.cell_contents is not mine:
        return
    cell.cell_contents = first
    op_data.global_arguments = first


@functools.lru_cache(maxsize=4096)
def _split_once(string: str) -> tuple[str, ...]:
    return tuple(shlex.split(string))


def _split(string: Any) -> Any:
    """``shlex.split``, each string split once: pyinfra's ``make_formatted_string_command``
    splits its format string (``"sha1sum {0}"``) on every call, the same few strings for every
    fact read of every host (about 140 a worker on a no-op: a tenth of the controller's CPU)."""
    if type(string) is str:
        return _split_once(string)
    return shlex.split(string)


# pyinfra.api.command's ``shlex`` while the engine is installed (it calls split and quote).
command_shlex = types.SimpleNamespace(split=_split, quote=shlex.quote)
