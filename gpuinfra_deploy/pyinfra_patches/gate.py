"""The spec gate on pyinfra's own inventory load: :func:`validate_before_connect`.

pyinfra runs ``config.py`` before it loads the inventory and connects, so config.py calls
:func:`validate_before_connect`, which wraps the loader the CLI calls next
(``pyinfra_cli.cli.make_inventory``, pinned pyinfra 3.10: see README.md here). The wrapped
loader reads the inventory named on the command line (with ``--data`` overrides) under
:func:`~gpuinfra_deploy.pyinfra_patches.loader.checked_loading`, judges the spec and the roles'
data on that very inventory, and stops the run, every problem listed, before any connection:
no file is executed twice. On a valid site it also sets pyinfra's FAIL_PERCENT from the site
(:func:`_fail_percent`) and installs the run summary (gpuinfra_deploy/run/summary.py).

API users and runs with another ``--config`` are gated by deploy.py
(gpuinfra_deploy.run.site.current_site) after connecting.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gpuinfra.spec import ClusterSpec, SpecInvalid, format_errors, format_warnings
from gpuinfra_deploy import templates
from gpuinfra_deploy.pyinfra_patches import fact_batch
from gpuinfra_deploy.pyinfra_patches.loader import InventoryError, checked_loading
from gpuinfra_deploy.run.inventory import (
    duplicates,
    group_data_folders,
    host_inputs,
    refuse_unknown_groups,
)
from gpuinfra_deploy.run.knobs import build_spec


def _cli_params() -> dict[str, Any] | None:
    try:
        import click
    except ImportError:  # pragma: no cover - pyinfra always brings click
        return None
    ctx = click.get_current_context(silent=True)
    return dict(ctx.params) if ctx is not None else None


def validate_before_connect() -> None:
    """Gate pyinfra's own inventory load: right after pyinfra read the inventory (once, with
    ``--data`` overrides) and before it connects, exit 1 with every problem listed when a file
    is broken or the site's spec is invalid.

    pyinfra runs config.py before it loads the inventory, so the gate wraps the loader the CLI
    calls next (pyinfra_cli.cli.make_inventory, pinned pyinfra 3.10): the spec is judged on the
    very inventory the run then uses, and no file is executed twice.
    """
    params = _cli_params()
    if not params:
        return None
    inventory = params.get("inventory")
    if not isinstance(inventory, str) or not inventory.endswith(".py"):
        return None  # an ad-hoc host list: deploy.py gates it after connecting
    if not Path(inventory).is_file():
        return  # pyinfra reports the missing file itself
    import pyinfra_cli.cli as cli

    load = getattr(cli.make_inventory, "__wrapped__", cli.make_inventory)

    unknown = unknown_data_keys(params.get("data") or ())
    if unknown:
        print(f"gpuinfra: {inventory}: no host was touched.\n" + "\n".join(
            f"  --data {u}" for u in unknown), file=sys.stderr)
        raise SystemExit(1)

    def gated(*args: Any, **kwargs: Any) -> Any:
        try:
            with checked_loading() as groups:
                loaded = load(*args, **kwargs)
        except InventoryError as exc:
            print(f"gpuinfra: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
        hosts = host_inputs(loaded, ignore_groups=("all", Path(inventory).stem))
        try:
            refuse_unknown_groups(inventory, hosts, group_data_folders(inventory))
        except InventoryError as exc:
            print(f"gpuinfra: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
        try:
            spec = build_spec(hosts, duplicates(groups))
        except SpecInvalid as exc:
            print(format_errors(exc.errors, inventory), file=sys.stderr)
            raise SystemExit(1) from None
        if spec.warnings:
            print(format_warnings(spec.warnings), file=sys.stderr)
        try:  # the site's own templates: judged now, used by every role of the run
            templates.use_site_of(inventory)
        except templates.TemplateProblem as exc:
            print(f"gpuinfra: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
        unmatched = unmatched_patterns(loaded, params)
        if unmatched:
            print(f"gpuinfra: {inventory}: no host was touched.\n" + "\n".join(unmatched),
                  file=sys.stderr)
            raise SystemExit(1)
        _fail_percent(params, spec)
        _summary_at_exit(spec)
        fact_batch.configure(inventory)  # each host's fact reads learned per inventory file
        return loaded

    gated.__wrapped__ = load  # type: ignore[attr-defined]
    cli.make_inventory = gated


def unmatched_patterns(inventory: Any, params: dict[str, Any]) -> list[str]:
    """Each ``--limit``/``--exclude`` that names no host and no group of ``inventory``.
    pyinfra warns ("No host matches found") and goes on: a mistyped ``--limit`` ran the
    deploy on no host and exited 0, a mistyped ``--exclude`` on every host. pyinfra takes
    one name, group or glob per option (``--limit a --limit b``), never a comma list."""
    from fnmatch import fnmatch

    names = [host.name for host in inventory]
    groups = sorted(name for name, hosts in inventory.groups.items() if hosts)
    problems = []
    for option in ("limit", "exclude"):
        for pattern in params.get(option) or ():
            if pattern in groups or any(fnmatch(name, pattern) for name in names):
                continue
            hint = ("; pyinfra takes one name, group or glob per option: "
                    + " ".join(f"--{option} {p}" for p in pattern.split(",") if p)
                    if "," in pattern else "")
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more"
                                            if len(names) > 5 else "")
            problems.append(f"  --{option} {pattern!r} matches no host and no group of this "
                            f"inventory (hosts: {shown}; groups: {', '.join(groups)}){hint}")
    return problems


def unknown_data_keys(items: Any) -> list[str]:
    """Each ``--data KEY=VALUE`` whose KEY is no key of gpuinfra (spec, roles' knobs) nor of
    pyinfra (its SSH connector's, its ``_``-prefixed operation arguments), said with the
    nearest known key: pyinfra would set it on every host and nothing would read it."""
    from difflib import get_close_matches

    from gpuinfra.spec.model import PYINFRA_SSH_KEYS, SPEC_KEYS
    from gpuinfra_deploy.run.knobs import knobs_of

    known = {*SPEC_KEYS, *PYINFRA_SSH_KEYS, *(k.key for k in knobs_of(None))}
    found = []
    for item in items:
        key = str(item).partition("=")[0]
        if key in known or key.startswith("_"):
            continue
        near = get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        found.append(f"{key}: no such key (" + (f"the nearest: {near[0]!r}; " if near else "")
                     + "the spec keys are in docs/spec.md, each role's in "
                     "roles/<role>/defaults.py); fix: correct the key or drop the --data")
    return found


def _summary_at_exit(spec: ClusterSpec) -> None:
    from pyinfra.context import ctx_state

    from gpuinfra_deploy.run import summary

    if ctx_state.isset():
        summary.install(ctx_state.get(), frozenset(n.name for n in spec.head))


def _fail_percent(params: dict[str, Any], spec: ClusterSpec) -> None:
    """pyinfra's FAIL_PERCENT from the site's ``max_fail_percent``: a dead or failed worker
    does not stop the healthy ones, more than that share failing stops the run. Not when the
    command line gave --fail-percent, nor in pyinfra's interactive mode (without -y or --json
    it asks the operator at the first failure)."""
    from pyinfra.context import ctx_config

    config = ctx_config.get()
    interactive = not params.get("yes") and not params.get("json_output")
    if config is not None and params.get("fail_percent") is None and not interactive:
        config.FAIL_PERCENT = spec.max_fail_percent
