"""The node health check (the `health` role) on the workers: installed, judging this node with
the spec's expectation, agreeing with the verify suite's own judgement of the same reading, and
wired into Slurm (no node drained by gpuinfra; the health keys in the running configuration).

The reading is taken once per host with the node's own program (`gpuinfra-health reading`,
one SSH round trip, shared with test_gpu: gpuinfra_verify/reading.py) and judged here by the
same library (gpuinfra.health.judge): a node whose installed expectation differs from the
spec's, or whose own verdict differs from the library's, fails here, naming the difference.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from testinfra.host import Host

from gpuinfra.health.expectation import PATH, from_json
from gpuinfra.health.judge import judge
from gpuinfra.health.slurm import drained_by_gpuinfra
from gpuinfra.parsers.slurm import SINFO, parse_sinfo_nodes
from gpuinfra.spec import NodeSpec
from gpuinfra_verify.expect import problem
from gpuinfra_verify.failure import fail
from gpuinfra_verify.reading import NodeReading, node_reading, spec_expectation

VERIFY_NODES = "workers"
Note = Callable[[str, object], None]
DEPLOY = "deploy the health role (`pyinfra inventory/<site>.py deploy.py`)"


def _applies(node: NodeSpec) -> None:
    if not node.settings.get("health_enabled", True):
        pytest.skip("health_enabled is False in this site's data")
    if "slurm" not in node.schedulers and node.gpus is None:
        pytest.skip("neither a Slurm worker nor a GPU node: no health check here")


@pytest.fixture(scope="module")
def installed(host: Host, node: NodeSpec) -> NodeReading:
    """The node's health check's reading (gpuinfra_verify/reading.py: once per host, shared with
    test_gpu): its expectation, outputs and own verdict, one round trip."""
    _applies(node)
    return node_reading(host, node)


def _read(installed: NodeReading, node: NodeSpec, note: Note) -> dict[str, Any]:
    if installed.error or installed.installed is None or installed.own is None:
        fail(note, problem(node.name, f"gpuinfra-health is not installed or fails: "
                           f"{installed.error or 'no reading'}",
                           "the health role has not run on this node", DEPLOY))
    return installed.installed


def test_expectation_is_the_specs(installed: NodeReading, node: NodeSpec, note: Note) -> None:
    have = from_json(json.dumps(_read(installed, node, note)), f"{node.name}:{PATH}")
    if have != spec_expectation(node):
        fail(note, problem(node.name, f"{PATH} differs from the spec's expectation",
                           "the spec changed since the last deploy, or the file was edited",
                           DEPLOY))


def test_node_healthy(installed: NodeReading, node: NodeSpec, note: Note) -> None:
    """The library's verdict on the node's reading; the node's own program agrees."""
    expect = from_json(json.dumps(_read(installed, node, note)), f"{node.name}:{PATH}")
    verdict = judge(expect, installed.reading)
    note("health_checks", len(verdict.findings))
    own = installed.own or {}
    if bool(own.get("healthy")) != verdict.healthy:
        fail(note, problem(node.name, f"the node's check says {own.get('reason') or 'healthy'}, "
                           f"the library says {verdict.reason() or 'healthy'}",
                           "the node runs another gpuinfra library than this deploy", DEPLOY))
    if not verdict.healthy:
        first = verdict.failed[0]
        fail(note, problem(node.name, verdict.reason(), first.cause, first.fix))


def test_not_drained_by_health(controller: Host, node: NodeSpec, note: Note) -> None:
    _applies(node)
    if "slurm" not in node.schedulers:
        pytest.skip("not a Slurm node")
    out = controller.run(f"{SINFO} -n {node.short_name}")
    state = parse_sinfo_nodes(out.stdout).get(node.short_name) if out.rc == 0 else None
    if state is None:
        fail(note, problem(node.name, "Slurm does not list the node", "slurmd never "
                           "registered", "`systemctl status slurmd` on the node; deploy"))
    note("slurm_state", f"{state.state} {state.reason}".strip())
    if drained_by_gpuinfra(state):
        fail(note, problem(node.name, f"drained by the health check: {state.reason}",
                           "the node failed its health check (the reason names what)",
                           "`gpuinfra-health check --json` on the node: cause and fix of "
                           "each failure; the node resumes by itself once it passes"))


def test_slurm_runs_the_check(controller: Host, node: NodeSpec, note: Note) -> None:
    _applies(node)
    if "slurm" not in node.schedulers:
        pytest.skip("not a Slurm node")
    out = controller.run("scontrol show config")
    seen = {line.split("=", 1)[0].strip(): line.split("=", 1)[1].strip()
            for line in out.stdout.splitlines() if "=" in line}
    program = seen.get("HealthCheckProgram", "(null)")
    note("health_check_program", program)
    if not program.endswith("gpuinfra-health-slurm"):
        fail(note, problem(node.name, f"slurmctld runs HealthCheckProgram={program}",
                           "slurm.conf lacks the health keys, or slurmctld was not restarted",
                           "deploy the slurm role (it writes them from health_* keys)"))
