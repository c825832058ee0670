"""The deploy planned on pyinfra ``@fake`` hosts whose facts come from recorded JSON.

The engine under `gpuinfra render` and the plan tests (tests/plan/harness.py): a real pyinfra
``State`` runs the real deploy file over ``@fake`` hosts, in CLI mode (operations identified
and ordered by the lines of the deploy code, as `pyinfra INVENTORY deploy.py` does), and every
fact an operation or a role asks is answered from recorded facts: nothing connects. The
pyinfra internals this relies on (CLI mode, the fact read, a handler's trigger, the planned
operations) are read and swapped only through gpuinfra_deploy/pyinfra_patches/internals.py.

Facts format (tests/plan/facts/*.json, and what `gpuinfra render --record-facts` writes):
``{"server.LinuxDistribution": {...}, "files.File": {"path=/etc/x": {...}}}``: a fact's
module (without ``pyinfra.facts.``) and class; a parametrised fact keyed by its arguments. A
parametrised fact may hold a ``"*"`` entry answering every argument not listed. A datetime is
``{"__datetime__": "2026-11-22T04:00:00"}``. A fact the facts lack raises :class:`MissingFact`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.host import Host
from pyinfra.context import ctx_host, ctx_inventory, ctx_state

from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy.entry import entry_file
from gpuinfra_deploy.pyinfra_patches import internals

# This project's deploy file: the table of contents of a deploy (the checkout's, or the one
# the wheel carries).
DEPLOY = entry_file("deploy.py")


class MissingFact(GpuinfraError, AssertionError):
    """A role asked for a fact the recorded facts do not hold."""


@dataclass(frozen=True)
class PlannedOp:
    name: str
    commands: tuple[str, ...]
    # The command objects themselves (StringCommand, FileUploadCommand, FunctionCommand...),
    # for a caller that looks inside one (an upload's content, a callback's arguments).
    raw: tuple[Any, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Plan:
    ops: tuple[PlannedOp, ...]

    @property
    def changing(self) -> list[PlannedOp]:
        return [op for op in self.ops if op.commands]

    @property
    def commands(self) -> list[str]:
        return [c for op in self.ops for c in op.commands]

    def op(self, words: str) -> PlannedOp:
        matches = [op for op in self.ops if words in op.name]
        assert len(matches) == 1, f"{len(matches)} ops named like {words!r}: {self.ops}"
        return matches[0]


# ----------------------------------------------------------------------------- facts as JSON

def decode(obj: dict[str, Any]) -> Any:
    """JSON hook: {"__datetime__": "2026-11-22T04:00:00"} becomes a datetime (File mtimes, Date)."""
    if set(obj) == {"__datetime__"}:
        return datetime.fromisoformat(obj["__datetime__"])
    return obj


def encode(value: Any) -> Any:
    """JSON ``default`` for recorded facts: datetimes as :func:`decode` reads them, sets and
    other iterables as lists."""
    if isinstance(value, datetime):
        return {"__datetime__": value.isoformat()}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    raise TypeError(f"a fact value of type {type(value).__name__} cannot be recorded")


def merge_facts(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Fact layers merged: a later layer overrides an earlier one per fact, and per argument
    of a parametrised fact."""
    facts: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, dict) and isinstance(facts.get(key), dict):
                facts[key] = {**facts[key], **value}
            else:
                facts[key] = value
    return facts


MAX_FACTS_BYTES = 64 << 20


def read_facts(path: Path) -> dict[str, Any]:
    """The facts of one JSON file; a :class:`GpuinfraError` naming the file (and the key) when
    it is not a facts file."""
    try:
        size = path.stat().st_size
        if size > MAX_FACTS_BYTES:
            raise GpuinfraError(f"{path}: {size >> 20} MiB: no facts file is that large (the "
                                "largest recorded is under 1 MiB); record them again with "
                                "`gpuinfra render --record-facts`")
        data = json.loads(path.read_text(encoding="utf-8"), object_hook=decode)
    except UnicodeDecodeError as exc:
        raise GpuinfraError(f"{path}: not text (byte {exc.object[exc.start]:#04x} at offset "
                            f"{exc.start}); a facts file is the JSON `gpuinfra render "
                            "--record-facts` writes") from None
    except OSError as exc:
        raise GpuinfraError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise GpuinfraError(f"{path}: not JSON (line {exc.lineno}: {exc.msg}); a facts file is "
                            "what `gpuinfra render --record-facts` writes") from None
    if not isinstance(data, dict):
        raise GpuinfraError(f"{path}: a facts file is a JSON object of facts "
                            "({\"server.Hostname\": ..., ...}), not a "
                            f"{type(data).__name__}")
    for key in data:
        if key.startswith("_"):
            continue  # "_comment" and the like
        if "." not in key:
            raise GpuinfraError(f"{path}: key {key!r} is not a fact name (module.Class, e.g. "
                                "server.LinuxDistribution)")
    return {k: v for k, v in data.items() if not k.startswith("_")}


def fact_key(cls: type) -> str:
    module = cls.__module__.removeprefix("pyinfra.facts.")
    return f"{module}.{cls.__name__}"


def arg_key(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    parts = [str(a) for a in args] + [f"{k}={v}" for k, v in sorted(kwargs.items())
                                      if v is not None]
    return ",".join(parts)


def fact_label(cls: type, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """``files.File[path=/etc/x]``: a fact question as the facts files key it."""
    kwargs = {k: v for k, v in kwargs.items() if not k.startswith("_")}
    arg = arg_key(args, kwargs)
    return f"{fact_key(cls)}[{arg}]" if arg else fact_key(cls)


def answer(facts: Mapping[str, Any], asked: list[str] | None, cls: type,
           args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """The recorded value of fact ``cls(*args, **kwargs)`` in ``facts``; MissingFact if none.
    ``asked``: where each question is noted (None: not noted)."""
    key = fact_key(cls)
    kwargs = {k: v for k, v in kwargs.items() if not k.startswith("_")}
    if key not in facts:
        raise MissingFact(f"fixture lacks fact {key} (args {args}, {kwargs})")
    value = facts[key]
    if not (args or kwargs):
        if asked is not None:
            asked.append(key)
        return value
    arg = arg_key(args, kwargs)
    if asked is not None:
        asked.append(f"{key}[{arg}]")
    if not isinstance(value, Mapping) or arg not in value:
        # Parametrised facts may give a "*" default (e.g. "no such file" for any path).
        if isinstance(value, Mapping) and "*" in value:
            return value["*"]
        raise MissingFact(f"fixture lacks {key} for {arg!r}")
    return value[arg]


def raw_command(command: Any) -> str:
    getter = getattr(command, "get_raw_value", None)
    return getter() if getter else str(command)


# ----------------------------------------------------------------------------- the fake run

# Data every fake host gets: no simulated delay.
FAKE = {"fake_delay": 0, "fake_delay_jitter": 0}


def deploy_file(path: Path, name: str = "deploy.deploy") -> Callable[[], None]:
    """A deploy file run as pyinfra runs it: its code executed (as module ``name``)."""
    code = compile(path.read_text(), str(path), "exec")

    def run() -> None:
        exec(code, {"__name__": name, "__file__": str(path)})

    return run


def deploy_as_cli(state: State, deploy_func: Callable[[], Any], hosts: Sequence[Host]) -> None:
    """Run the deploy for ``hosts`` as `pyinfra INVENTORY deploy.py` does (CLI mode).

    The API (add_deploy) numbers each host's operations 0, 1, 2..., so different operations at
    the same position on two hosts (the head's key op, a worker's copy op) become one operation
    run on both at once. The CLI orders and identifies operations by the lines of the deploy
    code that call them, which is what a real run does; add_deploy refuses CLI mode, so the
    deploy is called here the way add_deploy calls it.
    """
    with internals.cli_planning(state):
        for host in hosts:
            with ctx_host.use(host):
                deploy_func()


def op_label(state: State, op_hash: str) -> str:
    """An operation's name as a plan shows it: its names (one per way hosts named it)."""
    return ", ".join(sorted(internals.op_names(state, op_hash)))


def collect(state: State, host: Host, order: Sequence[str] | None = None,
            labels: dict[str, str] | None = None) -> Plan:
    """The operations planned for ``host``, with the commands each would run (``order``: the
    state's operation order, when the caller already has it; ``labels``: each operation's
    :func:`op_label` as it is made, kept for the next host's plan, so a plan of many hosts
    holds one name per operation)."""
    labels = {} if labels is None else labels
    ops = []
    for op_hash in internals.host_op_order(state, host, order):
        with ctx_state.use(state), ctx_host.use(host):
            run = all(cond() for cond in internals.op_conditions(state, host, op_hash))
        raw = tuple(internals.op_commands(state, host, op_hash)) if run else ()
        label = labels.get(op_hash)
        if label is None:
            label = labels[op_hash] = op_label(state, op_hash)
        ops.append(PlannedOp(label, tuple(raw_command(c) for c in raw), raw))
    return Plan(tuple(ops))


@dataclass(frozen=True)
class FakeHost:
    """A host of a fake run: name, inventory groups, recorded facts and host data."""

    name: str
    groups: tuple[str, ...]
    facts: Mapping[str, Any]
    data: Mapping[str, Any] = field(default_factory=dict)


def fake_state(hosts: Sequence[FakeHost], data: Mapping[str, Any] | None = None,
               connect: Callable[[State], None] = connect_all) -> tuple[State, Inventory]:
    """A pyinfra State over ``@fake`` hosts named as ``hosts`` (``data``: data of every host),
    connected with ``connect`` (the fake connector: nothing leaves this machine)."""
    names = {h.name: f"@fake/{h.name}" for h in hosts}
    groups: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for h in hosts:
        for group in h.groups:
            groups.setdefault(group, ([], {}))[0].append(names[h.name])
    with internals.connectors_listed_once():
        inventory = Inventory(([(names[h.name], dict(h.data)) for h in hosts],
                               {**FAKE, **(data or {})}), **groups)
    state = State(inventory, Config())
    connect(state)
    # Roles see "lab-head", not the connector prefix, and find other hosts by that name.
    internals.rename_hosts(inventory, {fake: name for name, fake in names.items()})
    return state, inventory


def per_host_answerer(facts_of: Mapping[str, Mapping[str, Any]],
                      asked: list[str] | None) -> Callable[..., Any]:
    """Facts answered from the recorded facts of the host they are asked of."""
    def get_fact(self: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        if self.name not in facts_of:
            raise MissingFact(f"no facts recorded for host {self.name}")
        try:
            return answer(facts_of[self.name], asked, cls, args, kwargs)
        except MissingFact as exc:
            raise MissingFact(f"{self.name}: {exc}") from None

    return get_fact


@contextmanager
def answering(get_fact: Callable[..., Any], inventory: Inventory) -> Iterator[None]:
    """Within: every fact is asked of ``get_fact``, handlers follow their trigger (changed
    when it would run commands), and ``inventory`` is the run's."""
    with internals.facts_answered_by(get_fact), internals.handlers_follow_triggers(), \
            ctx_inventory.use(inventory):
        yield
