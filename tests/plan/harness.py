"""Plan a role against a fake host whose facts come from a recorded JSON file.

A real pyinfra ``State`` runs the role's ``@deploy`` function over an ``@fake`` host; every
fact the role asks for is answered from the fixture (``tests/plan/facts/<name>.json``, or the
product's own copy in ``gpuinfra_deploy/assumed_facts/``: :func:`fact_file`), and a
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
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.host import Host

# The engine is the product's (gpuinfra render plans the same way): re-exported for the tests.
from gpuinfra_deploy.plan import FAKE as _FAKE
from gpuinfra_deploy.plan import (
    FakeHost,
    MissingFact,
    Plan,
    PlannedOp,
    answering,
    collect,
    deploy_as_cli,
    deploy_file,
    fake_state,
    merge_facts,
    op_label,
    per_host_answerer,
)
from gpuinfra_deploy.plan import answer as _answer
from gpuinfra_deploy.plan import decode as _decode
from gpuinfra_deploy.pyinfra_patches.schedule import meetings_of

__all__ = ["ASSUMED", "DEPLOY", "FACTS", "REPO", "ClusterPlan", "FakeHost", "MissingFact", "Plan",
           "PlannedOp", "fact_file", "load_facts", "plan", "plan_cluster", "plan_hosts",
           "upload_text", "_decode"]

FACTS = Path(__file__).parent / "facts"
REPO = Path(__file__).resolve().parents[2]
# The fact sets `gpuinfra render --os` assumes (shipped in the wheel): the fresh layers the plan
# tests share with the product live there alone (the product never reads tests/), one copy each.
ASSUMED = REPO / "gpuinfra_deploy" / "assumed_facts"
# Test names of product fact sets named otherwise there: lab-worker1 is `render --os`'s hardware.
ASSUMED_AS = {"slurm-lab-worker1": "hardware"}


def fact_file(name: str) -> Path:
    """The file of fact set ``name``: tests/plan/facts/<name>.json, or else the product's
    gpuinfra_deploy/assumed_facts/<name>.json (under its product name, :data:`ASSUMED_AS`).
    A set in both places is refused: each set has one copy."""
    own, shared = FACTS / f"{name}.json", ASSUMED / f"{ASSUMED_AS.get(name, name)}.json"
    if own.is_file() and shared.is_file():
        raise ValueError(f"fact set {name!r} is in both {own} and {shared}: keep one copy")
    if shared.is_file() and not own.is_file():
        return shared
    return own


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
    """Facts of the sets ``names`` (:func:`fact_file`); later sets override earlier ones per
    fact."""
    return merge_facts(*(json.loads(fact_file(name).read_text(), object_hook=_decode)
                         for name in names))


def _fact_answerer(facts: Mapping[str, Any], asked: list[str]) -> Callable[..., Any]:
    def get_fact(self: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        return _answer(facts, asked, cls, args, kwargs)

    return get_fact


# A single host planned alone is a worker of a site without a scheduler (so its spec needs no
# head); a test's data overrides both.
_ALONE = {"schedulers": []}


# Plan the whole deploy (``plan_hosts(DEPLOY, ...)``) rather than one role.
DEPLOY = REPO / "deploy.py"


def entry(deploy_func: Callable[..., Any] | Path) -> Callable[[], None]:
    """The role's own entry file (``roles/<role>/deploy.py``), run as pyinfra runs it: it
    takes the run's Site and this host's node (and the GPU roles the node's driver release), exactly
    as deploy.py hands them over. ``deploy_func`` is the role's @deploy function, or the path of
    a deploy file (:data:`DEPLOY`)."""
    if isinstance(deploy_func, Path):
        path, module = deploy_func, "deploy"
    else:
        module = deploy_func.__module__  # gpuinfra_roles.<role>
        path = Path(sys.modules[module].__file__).parent / "deploy.py"
    return deploy_file(path, f"{module}.deploy")


def _collect(state: State, host: Host, order: Sequence[str] | None = None) -> Plan:
    return collect(state, host, order)


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
    with answering(_fact_answerer(facts, asked), inventory):
        add_deploy(state, entry(deploy_func))
        return _collect(state, host)


# ----------------------------------------------------------------------------- several hosts

@dataclass(frozen=True)
class ClusterPlan:
    """Per planned host, its :class:`Plan`; ``order``: (host, operation name) as pyinfra would
    run them (operation by operation, each on every host that has it)."""

    plans: Mapping[str, Plan]
    order: tuple[tuple[str, str], ...]
    # the operations (names) that are meetings of every host (pyinfra_patches/schedule.py)
    meetings: frozenset[str] = frozenset()

    def position(self, host: str, words: str) -> int:
        """Where the one operation of ``host`` named like ``words`` runs in ``order``."""
        found = [i for i, (name, op) in enumerate(self.order) if name == host and words in op]
        assert len(found) == 1, f"{len(found)} ops of {host} named like {words!r}: {self.order}"
        return found[0]


def _addressed(h: FakeHost, index: int) -> FakeHost:
    """A host the test gives no address at all (no node_address, no ssh_hostname) gets one on
    a documentation network (RFC 5737), as every host of a real site has one: the gate refuses
    a site whose monitoring (on by default) has a host without."""
    if "node_address" in h.data or "ssh_hostname" in h.data:
        return h
    return FakeHost(h.name, h.groups, h.facts, {**h.data, "node_address": f"192.0.2.{index + 1}"})


def plan_hosts(deploy_func: Callable[..., Any], hosts: Sequence[FakeHost],
               targets: Sequence[str], data: Mapping[str, Any] | None = None,
               failed: Sequence[str] = (), kept: Sequence[str] | None = None) -> ClusterPlan:
    """The operations ``deploy_func`` plans on each host of ``targets``, in an inventory of
    ``hosts`` (``data``: data of every host, e.g. the cluster-wide spec keys). Operations are
    identified and ordered as in a CLI run (:func:`_deploy_as_cli`). ``failed``: hosts that
    have failed by the time the operations run (their ``_if`` conditions see it). ``kept``:
    the targets whose plans are returned (default: all); every target's commands are made
    all the same (as a run makes them), the others' then dropped (bench/plan_scale.py keeps
    one worker's of 10,000)."""
    hosts = [_addressed(h, i) for i, h in enumerate(hosts)]
    # connect_all looked up here at each call (a test takes connections back through it).
    state, inventory = fake_state(hosts, data, connect=lambda s: connect_all(s))
    unknown = [t for t in [*targets, *(kept or ())] if inventory.get_host(t) is None]
    assert not unknown, f"targets not among the hosts: {unknown}"
    keep = set(targets if kept is None else kept)
    with answering(per_host_answerer({h.name: h.facts for h in hosts}, None), inventory):
        chosen = [inventory.get_host(t) for t in targets]
        deploy_as_cli(state, entry(deploy_func), chosen)
        state.failed_hosts.update(inventory.get_host(name) for name in failed)
        op_order = state.get_op_order()
        labels: dict[str, str] = {}
        plans = {}
        for host in chosen:
            made = collect(state, host, op_order, labels)
            if host.name in keep:
                plans[host.name] = made
        shown = [host for host in chosen if host.name in keep]
        order = tuple((host.name, labels.get(op_hash) or op_label(state, op_hash))
                      for op_hash in op_order for host in shown if op_hash in state.ops[host])
        meetings = frozenset(op_label(state, op_hash) for op_hash in meetings_of(state))
    return ClusterPlan(plans, order, meetings)


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
