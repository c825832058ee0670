"""Slurm's node states as node_exporter textfile metrics, written on the head.

    gpuinfra_slurm_node_state{node,state,reason} 1   one series per node: its state without
                                                     Slurm's flag suffix (idle, mixed, drained,
                                                     draining, down...) and its reason
    gpuinfra_slurm_nodes_query_ok 1|0                 sinfo answered and was understood
    gpuinfra_slurm_nodes_last_run_timestamp_seconds   when the head last asked

The head's timer (gpuinfra-slurm-nodes.timer, the monitoring role) runs :data:`SINFO_COMMAND`
(the health check's own sinfo: gpuinfra.parsers.slurm.SINFO) every minute and writes
:func:`node_states_text` of its output, so the SlurmNodesDrained alert can fire in the default
configuration, where the Slurm exporter (monitoring_slurm_exporter) is off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gpuinfra.errors import ParseError
from gpuinfra.health.collect import Output
from gpuinfra.parsers.slurm import SINFO, parse_sinfo_nodes

SINFO_COMMAND = SINFO  # sinfo -N -h -o '%N|%T|%G|%E'
PROM_NAME = "gpuinfra-slurm-nodes.prom"
# The states SlurmNodesDrained counts (sinfo's %T long names: drained, draining, down, fail,
# failing; with or without a flag suffix).
UNAVAILABLE = "drain.*|down.*|fail.*"
T = TypeVar("T")


def label(value: str) -> str:
    """``value`` as a label value of the text format (one line)."""
    return value.replace("\\", "\\\\").replace("\n", " ").replace('"', '\\"')



def parsed(output: Output | None, parse: Callable[[str], T]) -> T | None:
    """What ``parse`` reads in a command's output; None when it failed or cannot be read."""
    if output is None or not output.ok:
        return None
    try:
        return parse(output.text)
    except ParseError:
        return None


def query_lines(prefix: str, asked: str, ok: bool, now: float) -> list[str]:
    """``<prefix>_query_ok`` and ``<prefix>_last_run_timestamp_seconds``: whether ``asked``
    answered and was understood, and when the head asked."""
    return [f"# HELP {prefix}_query_ok 1 when {asked} answered and was understood",
            f"# TYPE {prefix}_query_ok gauge", f"{prefix}_query_ok {1 if ok else 0}",
            f"# HELP {prefix}_last_run_timestamp_seconds when the head last asked {asked}",
            f"# TYPE {prefix}_last_run_timestamp_seconds gauge",
            f"{prefix}_last_run_timestamp_seconds {round(now)}"]


def node_states_text(output: Output | None, now: float) -> str:
    """The metric text of one ``sinfo`` run (``output``; None: not run)."""
    nodes = parsed(output, parse_sinfo_nodes)
    lines = ["# HELP gpuinfra_slurm_node_state one series per Slurm node: its state (sinfo %T "
             "without the flag suffix) and reason (value 1)",
             "# TYPE gpuinfra_slurm_node_state gauge"]
    for name, node in sorted((nodes or {}).items()):
        reason = "" if node.reason in ("", "none") else node.reason[:200]
        lines.append(f'gpuinfra_slurm_node_state{{node="{label(name)}",'
                     f'state="{label(node.base_state)}",reason="{label(reason)}"}} 1')
    lines += query_lines("gpuinfra_slurm_nodes", "sinfo", nodes is not None, now)
    return "\n".join(lines) + "\n"


def breaker_text(output: Output | None) -> str:
    """The health check's circuit breaker (gpuinfra.health.breaker) from one run of its sinfo
    (``output``; None: not run): ``gpuinfra_health_breaker_tripped{held}`` 1 naming the node
    that holds the trip, else 0 with ``held=""``. Nothing when sinfo failed (the query_ok
    series says so)."""
    from gpuinfra.health import breaker

    if output is None or not output.ok:
        return ""
    nodes = breaker.parse(output.text)
    held = breaker.tripped(nodes)
    lines = ["# HELP gpuinfra_health_breaker_tripped 1 when the health check's circuit breaker "
             "tripped (no automatic drain until reset), naming the node it held",
             "# TYPE gpuinfra_health_breaker_tripped gauge",
             f'gpuinfra_health_breaker_tripped{{held="{label(held.name) if held else ""}"}} '
             f"{1 if held else 0}"]
    return "\n".join(lines) + "\n"
