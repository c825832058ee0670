"""Plan a role against a fake host whose facts come from a recorded JSON file.

A real pyinfra ``State`` runs the role's ``@deploy`` function over an ``@fake`` host; every
fact the role asks for is answered from the fixture (``tests/plan/facts/<name>.json``), and a
fact the fixture lacks raises, so a fixture can never pass by accident. The result is the
list of operations with the shell commands each would run: a converged host must yield none.

Fixture format: ``{"server.LinuxDistribution": {...}, "files.File": {"path=/etc/x": {...}}}``
(parametrised facts keyed by their arguments, as in pyinfra's own test fixtures).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.host import Host
from pyinfra.api.operation import OperationMeta
from pyinfra.context import ctx_host, ctx_inventory, ctx_state

FACTS = Path(__file__).parent / "facts"


class MissingFact(AssertionError):
    """The role asked for a fact the fixture does not record."""


@dataclass(frozen=True)
class PlannedOp:
    name: str
    commands: tuple[str, ...]


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


def _decode(obj: dict[str, Any]) -> Any:
    """JSON hook: {"__datetime__": "2026-11-22T04:00:00"} becomes a datetime (File mtimes, Date)."""
    if set(obj) == {"__datetime__"}:
        return datetime.fromisoformat(obj["__datetime__"])
    return obj


def load_facts(*names: str) -> dict[str, Any]:
    """Facts from tests/plan/facts/<name>.json; later files override earlier ones per fact."""
    facts: dict[str, Any] = {}
    for name in names:
        for key, value in json.loads((FACTS / f"{name}.json").read_text(),
                                     object_hook=_decode).items():
            if isinstance(value, dict) and isinstance(facts.get(key), dict):
                facts[key] = {**facts[key], **value}
            else:
                facts[key] = value
    return facts


def _fact_key(cls: type) -> str:
    module = cls.__module__.removeprefix("pyinfra.facts.")
    return f"{module}.{cls.__name__}"


def _arg_key(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    parts = [str(a) for a in args] + [f"{k}={v}" for k, v in sorted(kwargs.items())
                                      if v is not None]
    return ",".join(parts)


def _fact_answerer(facts: Mapping[str, Any], asked: list[str]) -> Callable[..., Any]:
    def get_fact(self: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        key = _fact_key(cls)
        kwargs = {k: v for k, v in kwargs.items() if not k.startswith("_")}
        if key not in facts:
            raise MissingFact(f"fixture lacks fact {key} (args {args}, {kwargs})")
        value = facts[key]
        if not (args or kwargs):
            asked.append(key)
            return value
        arg = _arg_key(args, kwargs)
        asked.append(f"{key}[{arg}]")
        if not isinstance(value, Mapping) or arg not in value:
            # Parametrised facts may give a "*" default (e.g. "no such file" for any path).
            if isinstance(value, Mapping) and "*" in value:
                return value["*"]
            raise MissingFact(f"fixture lacks {key} for {arg!r}")
        return value[arg]

    return get_fact


def _raw(command: Any) -> str:
    getter = getattr(command, "get_raw_value", None)
    return getter() if getter else str(command)


def plan(deploy_func: Callable[..., Any], facts: Mapping[str, Any],
         data: Mapping[str, Any] | None = None, name: str = "node1") -> Plan:
    """The operations ``deploy_func`` plans on a host with ``facts`` and ``data``."""
    host_name = f"@fake/{name}"
    inventory = Inventory(([host_name], {"fake_delay": 0, "fake_delay_jitter": 0,
                                         **(data or {})}))
    state = State(inventory, Config())
    connect_all(state)
    host = inventory.get_host(host_name)
    host.name = name  # roles see "node1", not the connector prefix
    asked: list[str] = []
    # Handlers (`_if=op.did_change`) follow their trigger: changed when it would run commands.
    with mock.patch.object(Host, "get_fact", _fact_answerer(facts, asked)), \
            mock.patch.object(OperationMeta, "did_change",
                              lambda self: bool(self._maybe_is_change)), \
            ctx_inventory.use(inventory):
        add_deploy(state, deploy_func)
        ops = []
        for op_hash in state.get_op_order():
            op_data = state.get_op_data_for_host(host, op_hash)
            ifs = op_data.global_arguments.get("_if") or []
            ifs = ifs if isinstance(ifs, list) else [ifs]
            with ctx_state.use(state), ctx_host.use(host):
                run = all(cond() for cond in ifs)
                commands = tuple(_raw(c) for c in op_data.command_generator()) if run else ()
            names = state.get_op_meta(op_hash).names
            ops.append(PlannedOp(", ".join(sorted(names)), commands))
    return Plan(tuple(ops))
