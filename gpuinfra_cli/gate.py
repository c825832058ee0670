"""The spec gate: validate the whole site before pyinfra connects to any host.

pyinfra runs ``config.py`` before it loads the inventory and connects, so the project's
``config.py`` calls :func:`validate_before_connect`, which reads the inventory named on the
pyinfra command line (with ``--data`` overrides) and stops the run with every problem listed.
``deploy.py`` calls :func:`require_valid` again on the loaded inventory, so API users and runs
with another ``--config`` are gated too (after connecting, but before any operation).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpuinfra.spec import ClusterSpec, HostInput, SpecInvalid, build_cluster, validate
from gpuinfra_cli.inventory import host_inputs, load_hosts

_CACHE: dict[int, ClusterSpec] = {}


def format_errors(errors: Iterable[Any], source: str = "the cluster spec") -> str:
    """Every spec problem, one block each: host, field, value, problem, allowed, fix."""
    errors = list(errors)
    lines = [f"gpuinfra: {source} has {len(errors)} problem(s); no host was touched."]
    for err in errors:
        lines.append(f"  [{err.host}] {err.field} = {err.value!r}: {err.problem}")
        lines.append(f"      allowed: {err.allowed}")
        lines.append(f"      fix:     {err.fix}")
    return "\n".join(lines)


def validated_site(path: str) -> tuple[list[HostInput], ClusterSpec] | None:
    """The hosts and cluster spec of inventory ``path``, or None after printing every
    problem of its spec to stderr (the CLI commands that read a site: validate, nccl)."""
    hosts, duplicates = load_hosts(path)
    try:
        return hosts, build_cluster(hosts, duplicates)
    except SpecInvalid as exc:
        print(format_errors(exc.errors, path), file=sys.stderr)
        return None


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


def validate_before_connect() -> None:
    """Exit with status 1 and every problem listed when the site's spec is invalid."""
    params = _cli_params()
    if not params:
        return
    inventory = params.get("inventory")
    if not isinstance(inventory, str) or not inventory.endswith(".py"):
        return  # an ad-hoc host list: deploy.py gates it after connecting
    if not Path(inventory).is_file():
        return  # pyinfra reports the missing file itself
    try:
        hosts, duplicates = load_hosts(inventory)
    except Exception as exc:  # a broken inventory file: say so, no traceback
        print(f"gpuinfra: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    overrides = _override_data(params.get("data") or ())
    if overrides:
        hosts = [HostInput(h.name, h.groups, {**h.data, **overrides}) for h in hosts]
    errors = validate(hosts, duplicates)
    if errors:
        print(format_errors(errors), file=sys.stderr)
        raise SystemExit(1)


def require_valid(inventory: Any) -> ClusterSpec:
    """The cluster spec of a loaded pyinfra inventory; raises a pyinfra error when invalid."""
    # pyinfra's `inventory` is a context proxy (one id for every inventory): key on the object.
    real = inventory._get_module() if hasattr(inventory, "_get_module") else inventory
    key = id(real)
    if key not in _CACHE:
        try:
            _CACHE[key] = build_cluster(host_inputs(inventory))
        except SpecInvalid as exc:
            from pyinfra.api.exceptions import PyinfraError

            raise PyinfraError(format_errors(exc.errors)) from None
    return _CACHE[key]
