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

from gpuinfra.errors import ParseError
from gpuinfra.health.collect import Output
from gpuinfra.parsers.slurm import SINFO, parse_sinfo_nodes

SINFO_COMMAND = SINFO  # sinfo -N -h -o '%N|%T|%G|%E'
PROM_NAME = "gpuinfra-slurm-nodes.prom"
# The states SlurmNodesDrained counts (sinfo's %T long names: drained, draining, down, fail,
# failing; with or without a flag suffix).
UNAVAILABLE = "drain.*|down.*|fail.*"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", " ").replace('"', '\\"')


def node_states_text(output: Output | None, now: float) -> str:
    """The metric text of one ``sinfo`` run (``output``; None: not run)."""
    nodes = None
    if output is not None and output.ok:
        try:
            nodes = parse_sinfo_nodes(output.text)
        except ParseError:
            nodes = None
    lines = ["# HELP gpuinfra_slurm_node_state one series per Slurm node: its state (sinfo %T "
             "without the flag suffix) and reason (value 1)",
             "# TYPE gpuinfra_slurm_node_state gauge"]
    for name, node in sorted((nodes or {}).items()):
        reason = "" if node.reason in ("", "none") else node.reason[:200]
        lines.append(f'gpuinfra_slurm_node_state{{node="{_escape(name)}",'
                     f'state="{_escape(node.base_state)}",reason="{_escape(reason)}"}} 1')
    lines += ["# HELP gpuinfra_slurm_nodes_query_ok 1 when sinfo answered and was understood",
              "# TYPE gpuinfra_slurm_nodes_query_ok gauge",
              f"gpuinfra_slurm_nodes_query_ok {0 if nodes is None else 1}",
              "# HELP gpuinfra_slurm_nodes_last_run_timestamp_seconds when the head last "
              "asked sinfo", "# TYPE gpuinfra_slurm_nodes_last_run_timestamp_seconds gauge",
              f"gpuinfra_slurm_nodes_last_run_timestamp_seconds {round(now)}"]
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
             f'gpuinfra_health_breaker_tripped{{held="{_escape(held.name) if held else ""}"}} '
             f"{1 if held else 0}"]
    return "\n".join(lines) + "\n"
