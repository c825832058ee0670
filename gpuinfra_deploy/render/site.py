"""A site rendered: its hosts judged as the deploy's gate judges them, the deploy planned on
``@fake`` hosts answered by :class:`~gpuinfra_deploy.render.answers.Answers`, then each
operation's commands generated again with the files absent and read for the files they write.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyinfra.api import State
from pyinfra.api.host import Host

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec import HostInput
from gpuinfra_deploy import templates
from gpuinfra_deploy.plan import (
    DEPLOY,
    FakeHost,
    answering,
    deploy_as_cli,
    deploy_file,
    fake_state,
    merge_facts,
    raw_command,
)
from gpuinfra_deploy.pyinfra_patches import internals
from gpuinfra_deploy.render.answers import (
    FILE_STATE,
    Answers,
    assumed_facts,
    recorded_facts,
    spec_hardware,
)
from gpuinfra_deploy.render.model import Render, RenderedFile
from gpuinfra_deploy.render.reading import _last_writes, _share_dependencies, files_of_op


def site_hosts(inventory: str, group_data: str | None = None) -> list[HostInput]:
    """The site's hosts, judged as the deploy's gate judges them: a SpecInvalid (every
    problem) before anything is planned."""
    from gpuinfra_deploy.run.inventory import load_hosts
    from gpuinfra_deploy.run.knobs import build_spec

    hosts, duplicates = load_hosts(inventory, group_data=group_data)
    build_spec(hosts, duplicates)
    templates.use_site_of(inventory)  # the site's own templates, judged (TemplateProblem)
    return hosts

def render_site(inventory: str, facts: Path | None = None, os_name: str | None = None,
                group_data: str | None = None, deploy: Path = DEPLOY,
                recorded: Mapping[str, Mapping[str, Any]] | None = None) -> Render:
    """Every file each host of ``inventory`` gets from ``deploy``, nothing connected."""
    hosts = site_hosts(inventory, group_data)
    names = [h.name for h in hosts]
    if recorded is None:
        recorded = recorded_facts(facts, names) if facts is not None else {}
    assumed = assumed_facts(os_name) if os_name else None
    if assumed is None:
        missing = [n for n in names if n not in recorded]
        if missing:
            raise GpuinfraError(f"no facts for {', '.join(missing)}: give --facts DIR holding "
                                "<host>.json for each host (gpuinfra render --record-facts "
                                "DIR writes them), or --os "
                                "debian-12|debian-13|ubuntu-22.04|ubuntu-24.04 to assume "
                                "fresh hosts")
    answers = Answers(recorded, None if assumed is None else
                      {h.name: merge_facts(assumed, spec_hardware(h.data)) for h in hosts})
    fakes = [FakeHost(h.name, h.groups, {}, h.data) for h in hosts]
    state, inventory_ = fake_state(fakes)
    return _render(state, inventory_, answers, deploy,
                   {n: "recorded" if n in recorded else f"assumed ({os_name})" for n in names})


def _render(state: State, inventory: Any, answers: Answers, deploy: Path,
            facts_from: dict[str, str]) -> Render:
    by_op: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
    role: dict[str, Any] = {"host": None, "name": None, "start": 0}

    def note(host: Host, op_hash: str) -> None:
        # An operation's file may be built from any fact its role asked before it (slurm.conf
        # is built from every worker's CPUs long before its operation): the facts asked
        # since the role began on this host, an upper bound.
        name = internals.deploy_name(host)
        if (role["host"], role["name"]) != (host.name, name):
            role.update(host=host.name, name=name, start=role.get("end", 0))
        by_op[(host.name, op_hash)] = answers.events[role["start"]:]
        role["end"] = len(answers.events)

    chosen = list(inventory)
    with answering(answers.answerer(), inventory), internals.noting_operations(note):
        deploy_as_cli(state, deploy_file(deploy), chosen)
    result = Render(facts_from=facts_from)
    answers.files_absent = True
    order = state.get_op_order()
    with answering(answers.answerer(), inventory):
        for host in chosen:
            files: list[RenderedFile] = []
            for op_hash in internals.host_op_order(state, host, order):
                commands = internals.op_commands(state, host, op_hash)
                texts = [raw_command(c) for c in commands]
                result.commands.setdefault(host.name, []).extend(texts)
                name = ", ".join(sorted(internals.op_names(state, op_hash)))
                result.ops.setdefault(host.name, []).append((name, texts))
                func, kwargs = internals.op_call(state, host, op_hash)
                events = by_op.get((host.name, op_hash), [])
                asked = sorted({f"{h}: {label}" for h, label, _ in events
                                if label.split("[")[0] not in FILE_STATE})
                assumed = sorted({f"{h}: {label}" for h, label, a in events if a
                                  and label.split("[")[0] not in FILE_STATE})
                for f in files_of_op(host.name, name, commands, func, kwargs):
                    f.facts, f.assumed = tuple(asked), tuple(assumed)
                    files.append(f)
                    if f.kind == "file" and f.content is not None:
                        answers.written[(host.name, f.path)] = f.content
            result.files[host.name] = _last_writes(files)
    _share_dependencies(result)
    return result
