"""The deploy layer's front door: the spec gate, and the one :class:`Site` of a pyinfra run.

pyinfra runs ``config.py`` before it loads the inventory and connects, so the project's
``config.py`` calls :func:`validate_before_connect`, which reads the inventory named on the
pyinfra command line (with ``--data`` overrides) and stops the run with every problem of the
spec and of the roles' data listed. ``deploy.py`` then takes the run's :class:`Site` (the
typed spec, built once per run) and its own node, and hands both to every role
(:func:`this_node`). API users and runs with another ``--config`` are gated there too.

The CLI imports this module; nothing here imports the CLI.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from gpuinfra.spec import (
    ClusterSpec,
    HostInput,
    NodeSpec,
    SpecInvalid,
    format_errors,
    format_warnings,
)
from roles.inventory import host_inputs, load_hosts
from roles.knobs import build_spec

T = TypeVar("T")


class Site:
    """One pyinfra run's view of the cluster: the typed spec, and the run's inventory to reach
    other hosts (the head's MUNGE key, each worker's CPUs for slurm.conf).

    ``once(key, compute)`` keeps a value computed for the whole run (a fact read from another
    host, a file every node shares): computed by the first host that asks, reused by the rest.
    """

    def __init__(self, spec: ClusterSpec, inventory: Any) -> None:
        self.spec = spec
        self._inventory = inventory
        self._once: dict[Any, Any] = {}

    def node(self, name: str) -> NodeSpec:
        return self.spec.node(name)

    def host(self, name: str) -> Any:
        """The pyinfra host called ``name`` in this run (to read its facts)."""
        return self._inventory.get_host(name)

    def once(self, key: Any, compute: Callable[[], T]) -> T:
        if key not in self._once:
            self._once[key] = compute()
        return self._once[key]

    def head_up(self) -> bool:
        """At execution time: the head has not failed in this run. The scheduler roles need
        it (the MUNGE key, slurmctld): pass ``_if=site.head_up`` so a failed head stops them
        on every host, while the rest of the deploy goes on."""
        heads = [self.host(n.name) for n in self.spec.head]
        return bool(heads) and not any(h in h.state.failed_hosts for h in heads)


# One Site per pyinfra State: weakly held, so it goes with the run (no id() reuse).
_SITES: WeakKeyDictionary[Any, Site] = WeakKeyDictionary()


def current_site() -> Site:
    """The :class:`Site` of the running deploy (built at the first call of the run).

    Raises pyinfra's error listing every problem when the spec is invalid (the gate in
    config.py has normally stopped the run before it connected).
    """
    from pyinfra.context import ctx_inventory, ctx_state

    state, inventory = ctx_state.get(), ctx_inventory.get()
    site = _SITES.get(state)
    if site is None:
        try:
            spec = build_spec(host_inputs(inventory))
        except SpecInvalid as exc:
            from pyinfra.api.exceptions import PyinfraError

            raise PyinfraError(format_errors(exc.errors)) from None
        site = _SITES[state] = Site(spec, inventory)
    return site


def this_node() -> tuple[Site, NodeSpec]:
    """(the run's Site, the spec of the host being planned): what every role takes."""
    from pyinfra import host

    site = current_site()
    return site, site.node(host.name)


# ----------------------------------------------------------------------------- the CLI's side

def validated_site(path: str) -> tuple[list[HostInput], ClusterSpec] | None:
    """The hosts and cluster spec of inventory ``path``, or None after printing every
    problem of its spec to stderr (the CLI commands that read a site: validate, nccl)."""
    hosts, duplicates = load_hosts(path)
    try:
        spec = build_spec(hosts, duplicates)
    except SpecInvalid as exc:
        print(format_errors(exc.errors, path), file=sys.stderr)
        return None
    if spec.warnings:
        print(format_warnings(spec.warnings), file=sys.stderr)
    return hosts, spec


# ----------------------------------------------------------------------------- config.py's side

def _cli_params() -> dict[str, Any] | None:
    try:
        import click
    except ImportError:  # pragma: no cover - pyinfra always brings click
        return None
    ctx = click.get_current_context(silent=True)
    return dict(ctx.params) if ctx is not None else None


def _override_data(pairs: Iterable[str]) -> dict[str, Any]:
    from pyinfra_cli.util import parse_cli_arg

    out = {}
    for pair in pairs or ():
        if "=" in pair:
            key, value = pair.split("=", 1)
            out[key] = parse_cli_arg(value)
    return out


def validate_before_connect() -> ClusterSpec | None:
    """Exit with status 1 and every problem listed when the site's spec is invalid; the spec
    when it is valid (None for a run without an inventory file, which deploy.py gates)."""
    params = _cli_params()
    if not params:
        return None
    inventory = params.get("inventory")
    if not isinstance(inventory, str) or not inventory.endswith(".py"):
        return None  # an ad-hoc host list: deploy.py gates it after connecting
    if not Path(inventory).is_file():
        return None  # pyinfra reports the missing file itself
    try:
        hosts, duplicates = load_hosts(inventory)
    except Exception as exc:  # a broken inventory file: say so, no traceback
        print(f"gpuinfra: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    overrides = _override_data(params.get("data") or ())
    if overrides:
        hosts = [HostInput(h.name, h.groups, {**h.data, **overrides}) for h in hosts]
    try:
        spec = build_spec(hosts, duplicates)
    except SpecInvalid as exc:
        print(format_errors(exc.errors), file=sys.stderr)
        raise SystemExit(1) from None
    if spec.warnings:
        print(format_warnings(spec.warnings), file=sys.stderr)
    return spec
