"""The deploy layer's front door: the one :class:`Site` of a pyinfra run.

``deploy.py`` takes the run's :class:`Site` (the typed spec, built once per run) and its own
node, and hands both to every role (:func:`this_node`). The spec gate that stops a CLI run
before it connects is config.py's call of
:func:`gpuinfra_deploy.pyinfra_patches.gate.validate_before_connect` (it wraps pyinfra's own
inventory load); API users and runs with another ``--config`` are gated here
(:func:`current_site`).

The CLI imports this module; nothing here imports the CLI.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
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
from gpuinfra_deploy.run.inventory import host_inputs, load_hosts
from gpuinfra_deploy.run.knobs import build_spec

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

    def reached(self, name: str) -> bool:
        """Whether this run reads host ``name`` (a host left out by ``--limit``, or down when
        the run connected, is not)."""
        other = self.host(name)
        return other is not None and other not in other.state.failed_hosts \
            and bool(other.connected)

    def left_out(self) -> list[str]:
        """The site's hosts this run does not reach, in spec order."""
        return [n.name for n in self.spec.nodes if not self.reached(n.name)]

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


# The Sites of each pyinfra State, one per scope (all roles, or the roles a foreign deploy
# runs): weakly held, so they go with the run (no id() reuse).
_SITES: WeakKeyDictionary[Any, dict[Any, Site]] = WeakKeyDictionary()


def current_site(roles: Sequence[str] | None = None,
                 groups: Mapping[str, str] | None = None) -> Site:
    """The :class:`Site` of the running deploy (built at the first call of the run).

    ``roles`` None: the whole site, every role's knobs judged (this project's deploy.py and
    its config.py gate). A list of roles: a deploy that runs only those (see
    :func:`this_node`). Raises pyinfra's error listing every problem when the spec is invalid
    (the gate in config.py has normally stopped the run before it connected).
    """
    from pyinfra.context import ctx_inventory, ctx_state

    state, inventory = ctx_state.get(), ctx_inventory.get()
    scope = (None if roles is None else tuple(roles),
             None if groups is None else tuple(sorted(groups.items())))
    sites = _SITES.setdefault(state, {})
    site = sites.get(scope)
    if site is None:
        try:
            spec = build_spec(host_inputs(inventory), roles=roles, groups=groups)
        except SpecInvalid as exc:
            from pyinfra.api.exceptions import PyinfraError

            raise PyinfraError(format_errors(exc.errors)) from None
        site = sites[scope] = Site(spec, inventory)
    return site


def this_node(roles: Sequence[str] | None = None,
              groups: Mapping[str, str] | None = None) -> tuple[Site, NodeSpec]:
    """(the run's Site, the spec of the host being planned): what every role takes.

    In another project's deploy, name the roles it runs and, where its groups have other
    names, which of its groups are gpuinfra's (``groups={"head": "slurmctld", "workers":
    "compute"}``): only those roles' keys are judged, the rest of the host data is left alone.
    """
    from pyinfra import host

    site = current_site(roles, groups)
    return site, site.node(host.name)


# ----------------------------------------------------------------------------- the CLI's side

def validated_site(path: str, group_data: str | None = None
                   ) -> tuple[list[HostInput], ClusterSpec] | None:
    """The hosts and cluster spec of inventory ``path``, or None after printing every
    problem of its spec to stderr (the CLI commands that read a site: validate, nccl)."""
    hosts, duplicates = load_hosts(path, group_data=group_data)
    try:
        spec = build_spec(hosts, duplicates)
    except SpecInvalid as exc:
        print(format_errors(exc.errors, path), file=sys.stderr)
        return None
    if spec.warnings:
        print(format_warnings(spec.warnings), file=sys.stderr)
    return hosts, spec


def site_warnings(path: str, group_data: str | None = None) -> str:
    """What `gpuinfra validate` warns of for inventory ``path`` (a driver branch past its end
    of life...), formatted; "" when none, or when the spec is invalid (its errors are said
    where it is refused)."""
    hosts, duplicates = load_hosts(path, group_data=group_data)
    try:
        spec = build_spec(hosts, duplicates)
    except SpecInvalid:
        return ""
    return format_warnings(spec.warnings) if spec.warnings else ""

