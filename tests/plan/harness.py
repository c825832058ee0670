"""Plan a role against a fake host whose facts come from a recorded JSON file.

A real pyinfra ``State`` runs the role's ``@deploy`` function over an ``@fake`` host; every
fact the role asks for is answered from the fixture (``tests/plan/facts/<name>.json``), and a
fact the fixture lacks raises. One exception, on purpose: a parametrised fact may hold a ``"*"``
entry that answers every argument the fixture does not list (base-fresh.json answers any
``files.File`` path with null, "no such file"), so a path a role starts asking about passes as
absent there instead of raising; tests/plan/facts/INDEX.md lists each wildcard. The result is the
list of operations with the shell commands each would run: a converged host must yield none.

Fixture format: ``{"server.LinuxDistribution": {...}, "files.File": {"path=/etc/x": {...}}}``
(parametrised facts keyed by their arguments, as in pyinfra's own test fixtures).

Roles that read facts of *other* hosts (munge copies the head's key, slurm reads every worker's
CPUs and memory) are planned with :func:`plan_cluster` / :func:`plan_hosts`: an inventory of
several fake hosts in groups (``head``, ``workers``), each with its own data and facts, and the
deploy planned for the chosen host(s). A fact is answered from the facts of the host it is
asked of; a host without that fact raises :class:`MissingFact` as above.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pyinfra
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.host import Host
from pyinfra.api.operation import OperationMeta
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_inventory, ctx_state

FACTS = Path(__file__).parent / "facts"
REPO = Path(__file__).resolve().parents[2]


class MissingFact(AssertionError):
    """The role asked for a fact the fixture does not record."""


@dataclass(frozen=True)
class PlannedOp:
    name: str
    commands: tuple[str, ...]
    # The command objects themselves (StringCommand, FileUploadCommand, FunctionCommand...),
    # for tests that look inside one (an upload's content, a callback's arguments).
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


def _decode(obj: dict[str, Any]) -> Any:
    """JSON hook: {"__datetime__": "2026-11-22T04:00:00"} becomes a datetime (File mtimes, Date)."""
    if set(obj) == {"__datetime__"}:
        return datetime.fromisoformat(obj["__datetime__"])
    return obj


def upload_text(src: Any) -> str:
    """The text an upload command sends (a StringIO, or the BytesIO of
    gpuinfra_deploy/ops/checked.py); a binary file (the health role's library zip) as
    ``<binary: N bytes, sha256 ...>``, so two plans still compare."""
    value = src.getvalue()
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode()
    except UnicodeDecodeError:
        return f"<binary: {len(value)} bytes, sha256 {hashlib.sha256(value).hexdigest()}>"


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


def _answer(facts: Mapping[str, Any], asked: list[str], cls: type, args: tuple[Any, ...],
            kwargs: Mapping[str, Any]) -> Any:
    """The recorded value of fact ``cls(*args, **kwargs)`` in ``facts``; MissingFact if none."""
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


def _fact_answerer(facts: Mapping[str, Any], asked: list[str]) -> Callable[..., Any]:
    def get_fact(self: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        return _answer(facts, asked, cls, args, kwargs)

    return get_fact


def _per_host_answerer(facts_of: Mapping[str, Mapping[str, Any]],
                       asked: list[str]) -> Callable[..., Any]:
    """Facts answered from the recorded facts of the host they are asked of."""
    def get_fact(self: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        if self.name not in facts_of:
            raise MissingFact(f"no facts recorded for host {self.name}")
        try:
            return _answer(facts_of[self.name], asked, cls, args, kwargs)
        except MissingFact as exc:
            raise MissingFact(f"{self.name}: {exc}") from None

    return get_fact


def _raw(command: Any) -> str:
    getter = getattr(command, "get_raw_value", None)
    return getter() if getter else str(command)


_FAKE = {"fake_delay": 0, "fake_delay_jitter": 0}


def _ifs(state: State, host: Host, op_hash: str) -> list[Callable[[], bool]]:
    found = state.get_op_data_for_host(host, op_hash).global_arguments.get("_if") or []
    return found if isinstance(found, list) else [found]


def _did_change(self: OperationMeta) -> bool:
    """A handler's trigger changed when it would run commands and its own conditions hold
    (an operation skipped by its ``_if`` changes nothing, as in a real run)."""
    if not self._maybe_is_change:
        return False
    state, host = ctx_state.get(), ctx_host.get()
    if state is None or host is None or self._hash not in state.ops.get(host, {}):
        return True
    return all(cond() for cond in _ifs(state, host, self._hash))
# A single host planned alone is a worker of a site without a scheduler (so its spec needs no
# head); a test's data overrides both.
_ALONE = {"schedulers": []}


# Plan the whole deploy (``plan_hosts(DEPLOY, ...)``) rather than one role.
DEPLOY = REPO / "deploy.py"


def entry(deploy_func: Callable[..., Any] | Path) -> Callable[[], None]:
    """The role's own entry file (``gpuinfra_roles/<role>/deploy.py``), run as pyinfra runs it: it
    takes the run's Site and this host's node (and the GPU roles the node's driver release), exactly
    as deploy.py hands them over. ``deploy_func`` is the role's @deploy function, or the path of
    a deploy file (:data:`DEPLOY`)."""
    if isinstance(deploy_func, Path):
        path, module = deploy_func, "deploy"
    else:
        module = deploy_func.__module__  # gpuinfra_roles.<role>
        path = REPO / Path(*module.split(".")) / "deploy.py"
    code = compile(path.read_text(), str(path), "exec")

    def run() -> None:
        exec(code, {"__name__": f"{module}.deploy", "__file__": str(path)})

    return run


def _collect(state: State, host: Host, order: Sequence[str] | None = None) -> Plan:
    """The operations planned for ``host``, with the commands each would run (``order``: the
    state's operation order, when the caller already has it)."""
    ops = []
    for op_hash in order if order is not None else state.get_op_order():
        if op_hash not in state.ops[host]:
            continue
        op_data = state.get_op_data_for_host(host, op_hash)
        with ctx_state.use(state), ctx_host.use(host):
            run = all(cond() for cond in _ifs(state, host, op_hash))
            raw = tuple(op_data.command_generator()) if run else ()
        names = state.get_op_meta(op_hash).names
        ops.append(PlannedOp(", ".join(sorted(names)), tuple(_raw(c) for c in raw), raw))
    return Plan(tuple(ops))


def plan(deploy_func: Callable[..., Any], facts: Mapping[str, Any],
         data: Mapping[str, Any] | None = None, name: str = "node1") -> Plan:
    """The operations ``deploy_func`` plans on a host with ``facts`` and ``data``."""
    host_name = f"@fake/{name}"
    inventory = Inventory(([host_name], {**_FAKE, **_ALONE, **(data or {})}),
                          workers=([host_name], {}))
    state = State(inventory, Config())
    connect_all(state)
    host = inventory.get_host(host_name)
    host.name = name  # roles see "node1", not the connector prefix
    inventory.hosts = {host.name: host}
    asked: list[str] = []
    # Handlers (`_if=op.did_change`) follow their trigger: changed when it would run commands.
    with mock.patch.object(Host, "get_fact", _fact_answerer(facts, asked)), \
            mock.patch.object(OperationMeta, "did_change", _did_change), \
            ctx_inventory.use(inventory):
        add_deploy(state, entry(deploy_func))
        return _collect(state, host)


# ----------------------------------------------------------------------------- several hosts

@dataclass(frozen=True)
class FakeHost:
    """A host of a multi-host plan: name, inventory groups, recorded facts and host data."""

    name: str
    groups: tuple[str, ...]
    facts: Mapping[str, Any]
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterPlan:
    """Per planned host, its :class:`Plan`; ``order``: (host, operation name) as pyinfra would
    run them (operation by operation, each on every host that has it)."""

    plans: Mapping[str, Plan]
    order: tuple[tuple[str, str], ...]

    def position(self, host: str, words: str) -> int:
        """Where the one operation of ``host`` named like ``words`` runs in ``order``."""
        found = [i for i, (name, op) in enumerate(self.order) if name == host and words in op]
        assert len(found) == 1, f"{len(found)} ops of {host} named like {words!r}: {self.order}"
        return found[0]


def _deploy_as_cli(state: State, deploy_func: Callable[..., Any], hosts: Sequence[Host]) -> None:
    """Run the deploy for ``hosts`` as `pyinfra INVENTORY deploy.py` does (CLI mode).

    The API (add_deploy) numbers each host's operations 0, 1, 2..., so different operations at
    the same position on two hosts (the head's key op, a worker's copy op) become one operation
    run on both at once. The CLI orders and identifies operations by the lines of the deploy
    code that call them, which is what a real run does; add_deploy refuses CLI mode, so the
    deploy is called here the way add_deploy calls it.
    """
    state.set_stage(StateStage.Prepare)
    with mock.patch.object(pyinfra, "is_cli", True), ctx_state.use(state):
        for host in hosts:
            with ctx_host.use(host):
                deploy_func()


def _addressed(h: FakeHost, index: int) -> FakeHost:
    """A host the test gives no address at all (no node_address, no ssh_hostname) gets one on
    a documentation network (RFC 5737), as every host of a real site has one: the gate refuses
    a site whose monitoring (on by default) has a host without."""
    if "node_address" in h.data or "ssh_hostname" in h.data:
        return h
    return FakeHost(h.name, h.groups, h.facts, {**h.data, "node_address": f"192.0.2.{index + 1}"})


def plan_hosts(deploy_func: Callable[..., Any], hosts: Sequence[FakeHost],
               targets: Sequence[str], data: Mapping[str, Any] | None = None,
               failed: Sequence[str] = ()) -> ClusterPlan:
    """The operations ``deploy_func`` plans on each host of ``targets``, in an inventory of
    ``hosts`` (``data``: data of every host, e.g. the cluster-wide spec keys). Operations are
    identified and ordered as in a CLI run (:func:`_deploy_as_cli`). ``failed``: hosts that
    have failed by the time the operations run (their ``_if`` conditions see it)."""
    names = {h.name: f"@fake/{h.name}" for h in hosts}
    hosts = [_addressed(h, i) for i, h in enumerate(hosts)]
    groups: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for h in hosts:
        for group in h.groups:
            groups.setdefault(group, ([], {}))[0].append(names[h.name])
    inventory = Inventory(([(names[h.name], dict(h.data)) for h in hosts],
                           {**_FAKE, **(data or {})}), **groups)
    state = State(inventory, Config())
    connect_all(state)
    # Roles see "lab-head", not the connector prefix, and find other hosts by that name.
    for h in hosts:
        inventory.get_host(names[h.name]).name = h.name
    inventory.hosts = {host.name: host for host in inventory.hosts.values()}
    unknown = [t for t in targets if t not in names]
    assert not unknown, f"targets not among the hosts: {unknown}"
    asked: list[str] = []
    with mock.patch.object(Host, "get_fact",
                              _per_host_answerer({h.name: h.facts for h in hosts}, asked)), \
            mock.patch.object(OperationMeta, "did_change", _did_change), \
            ctx_inventory.use(inventory):
        chosen = [inventory.get_host(t) for t in targets]
        _deploy_as_cli(state, entry(deploy_func), chosen)
        state.failed_hosts.update(inventory.get_host(name) for name in failed)
        op_order = state.get_op_order()
        plans = {host.name: _collect(state, host, op_order) for host in chosen}
        order = tuple((host.name, ", ".join(sorted(state.get_op_meta(op_hash).names)))
                      for op_hash in op_order
                      for host in chosen if op_hash in state.ops[host])
    return ClusterPlan(plans, order)


def plan_cluster(deploy_func: Callable[..., Any], hosts: Sequence[FakeHost], target: str,
                 data: Mapping[str, Any] | None = None) -> Plan:
    """The operations ``deploy_func`` plans on ``target`` among ``hosts``."""
    return plan_hosts(deploy_func, hosts, [target], data).plans[target]


def pinned_keyrings(keyrings: Mapping[str, str], now: int = 1_780_000_000,
                    expires: int | None = None) -> dict[str, Any]:
    """The ``KeyringKeys`` facts of apt keyrings that exist: path -> the one key gpg reads in
    it (a converged host: the pinned fingerprint, with ``expires``, None for none)."""
    return {f"path={path}": {"gpg": True, "now": now,
                             "keys": [{"fingerprint": fingerprint, "expires": expires}]}
            for path, fingerprint in keyrings.items()}


KEYRING_KEYS = "gpuinfra_deploy.facts.apt.KeyringKeys"
