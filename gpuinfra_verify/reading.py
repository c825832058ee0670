"""One reading of a node for the whole verify suite: the node's own health check takes it.

``gpuinfra-health reading`` (the health role's program) runs every command of the node's
reading at once on the node (gpuinfra.health.probes, gpuinfra_node.reader) and answers with
the expectation it holds, the raw outputs and its own verdict: one SSH round trip per node
for test_gpu and test_health, judged here by the same library (gpuinfra.health.judge). A node
without the health check (``health_enabled = False``, or a host it does not apply to) is read
command by command with the same table: the same verdicts, one round trip per command.
The reading is taken once per host and process (under xdist every test of a host runs on the
same worker: conftest.py).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from testinfra.host import Host

from gpuinfra.health.collect import Output
from gpuinfra.health.expectation import Expectation, from_node, runs_on
from gpuinfra.health.probes import probes
from gpuinfra.monitoring.units import TEXTFILE_DIRECTORY
from gpuinfra.spec import NodeSpec

COMMAND = "/usr/local/sbin/gpuinfra-health"


@dataclass(frozen=True)
class NodeReading:
    """What one node answered. ``installed``: the expectation its health check holds (None:
    read without the program); ``own``: the program's own verdict (JSON); ``error``: why no
    reading could be had."""

    reading: dict[str, Output] = field(default_factory=dict)
    installed: dict[str, Any] | None = None
    own: dict[str, Any] | None = None
    via: str = ""
    error: str = ""


_TAKEN: dict[str, NodeReading] = {}


def has_health_check(node: NodeSpec) -> bool:
    return bool(node.settings.get("health_enabled", True)) and runs_on(node)


def spec_expectation(node: NodeSpec) -> Expectation:
    """What the spec says the node must be (the health role renders the same)."""
    return from_node(node, node.settings, TEXTFILE_DIRECTORY)


def node_reading(host: Host, node: NodeSpec) -> NodeReading:
    """The node's reading, taken once per host (see the module's text)."""
    if node.name not in _TAKEN:
        _TAKEN[node.name] = (from_program(host) if has_health_check(node)
                             else one_by_one(host, spec_expectation(node)))
    return _TAKEN[node.name]


def from_program(host: Host) -> NodeReading:
    out = host.run(f"{COMMAND} reading")
    if out.rc != 0:
        why = (out.stderr or out.stdout).strip().splitlines() or [f"exit {out.rc}"]
        return NodeReading(via=COMMAND, error=f"`{COMMAND} reading` failed: {why[-1][:200]}")
    try:
        answer = json.loads(out.stdout)
        reading = {k: Output.from_json(v) for k, v in answer["reading"].items()}
        return NodeReading(reading, answer["expect"], answer["verdict"], f"{COMMAND} reading")
    except (ValueError, KeyError, TypeError, AttributeError):
        return NodeReading(via=COMMAND, error=f"`{COMMAND} reading` answered something else "
                           "than this gpuinfra's reading (an older health check?)")


def one_by_one(host: Host, expect: Expectation) -> NodeReading:
    reading = {}
    for name, command in probes(expect).items():
        line = command if isinstance(command, str) else shlex.join(command)
        out = host.run(line)
        error = "" if out.rc == 0 else (out.stderr.strip() or out.stdout.strip())[:400]
        reading[name] = Output(out.rc == 0, out.rc, out.stdout, error)
    return NodeReading(reading, via="one command at a time (no health check on this node)")
