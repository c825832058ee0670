"""The site's real hosts: their facts recorded for an offline render (``--record-facts``), and
what the deploy would change on them (``--diff``)."""

from __future__ import annotations

import difflib
import hashlib
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyinfra.api import State
from pyinfra.api.host import Host

from gpuinfra_deploy.plan import (
    DEPLOY,
    answering,
    arg_key,
    deploy_as_cli,
    deploy_file,
    encode,
    fact_key,
)
from gpuinfra_deploy.pyinfra_patches import internals
from gpuinfra_deploy.render.answers import FILE_STATE
from gpuinfra_deploy.render.model import Render
from gpuinfra_deploy.render.site import render_site, site_hosts


def _live_state(inventory: str, group_data: str | None, sudo: bool) -> tuple[State, Any]:
    """A pyinfra State over the site's real hosts, connected (as `pyinfra --dry` does)."""
    from pyinfra.api import Config
    from pyinfra.api.connect import connect_all

    from gpuinfra_deploy.run.inventory import load_inventory

    site_hosts(inventory, group_data)  # the gate first: a bad spec connects nowhere
    loaded, _ = load_inventory(inventory, group_data=group_data)
    state = State(loaded, Config(SUDO=sudo))
    connect_all(state)
    return state, loaded


def record_facts(inventory: str, out: Path, group_data: str | None = None,
                 sudo: bool = False, deploy: Path = DEPLOY) -> dict[str, dict[str, Any]]:
    """Connect to every host, plan the deploy as `pyinfra --dry` does (nothing executed), and
    write each fact it asked, per host, to DIR/<host>.json: render reads them offline."""
    state, inventory_ = _live_state(inventory, group_data, sudo)
    facts = _recording(state, inventory_, deploy)
    out.mkdir(parents=True, exist_ok=True)
    for host, values in facts.items():
        (out / f"{host}.json").write_text(json.dumps(values, indent=1, sort_keys=True,
                                                     default=_encoded) + "\n")
    return facts


def _encoded(value: Any) -> Any:
    return encode(value)


def _recording(state: State, inventory: Any, deploy: Path) -> dict[str, dict[str, Any]]:
    facts: dict[str, dict[str, Any]] = {}
    original = internals.fact_reader()

    collecting = [False]

    def recorded(host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        if collecting[0] and fact_key(cls) in FILE_STATE:
            return None  # as the render's collection answers them: never asked
        value = original(host, cls, *args, **kwargs)
        plain = {k: v for k, v in kwargs.items() if not k.startswith("_")}
        arg = arg_key(args, plain)
        own = facts.setdefault(host.name, {})
        if arg:
            own.setdefault(fact_key(cls), {})[arg] = value
        else:
            own[fact_key(cls)] = value
        return value

    reached = [h for h in inventory if h.connected]
    with answering(recorded, inventory):
        deploy_as_cli(state, deploy_file(deploy), reached)
        # The render generates every operation's commands again with the files absent; the
        # facts those ask are recorded too.
        collecting[0] = True
        for host in reached:
            for op_hash in internals.host_op_order(state, host):
                internals.op_commands(state, host, op_hash)
    return facts


def diff_live(inventory: str, group_data: str | None = None, sudo: bool = False,
              deploy: Path = DEPLOY) -> tuple[Render, dict[tuple[str, str], bytes | None]]:
    """The render of the live site (its facts read now) and each rendered file's current
    bytes on its host (None: absent)."""
    from gpuinfra_deploy.facts.system import FileBytes

    state, inventory_ = _live_state(inventory, group_data, sudo)
    recorded = _recording(state, inventory_, deploy)
    render = render_site(inventory, group_data=group_data, deploy=deploy, recorded=recorded)
    current: dict[tuple[str, str], bytes | None] = {}
    for host, files in render.files.items():
        live = inventory_.get_host(host)
        for f in files:
            if f.kind == "file" and f.content is not None:
                current[(host, f.path)] = live.get_fact(FileBytes, path=f.path)
    return render, current


def unified_diffs(render: Render, current: Mapping[tuple[str, str], bytes | None]) -> list[str]:
    """Per host and file, what the deploy would change: a unified diff (a new file in full,
    a binary file by its digests); nothing for a file already as rendered."""
    out: list[str] = []
    for host, files in render.files.items():
        for f in files:
            key = (host, f.path)
            if key not in current or f.content is None:
                continue
            old = current[key]
            if old == f.content:
                continue
            try:
                new_text = f.content.decode()
                old_text = (old or b"").decode()
            except UnicodeDecodeError:
                old_sum = hashlib.sha256(old).hexdigest() if old is not None else "absent"
                out.append(f"{host}:{f.path}: binary, {old_sum} -> {f.sha256}\n")
                continue
            label = "(absent)" if old is None else "(live)"
            out.extend(difflib.unified_diff(
                old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                f"{host}:{f.path} {label}", f"{host}:{f.path} (deploy)"))
    return [line if line.endswith("\n") else line + "\n" for line in out]


def quote_path(path: str) -> str:
    return shlex.quote(path)
