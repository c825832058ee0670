"""Kubernetes' GPUs as node_exporter textfile metrics, written on the head of a Kubernetes site.

    gpuinfra_kubernetes_node_gpus_ok{node,problem} 1|0   one series per GPU worker of the spec:
                                                         1 when its nvidia.com/* allocatable is
                                                         what the spec implies; else 0 and the
                                                         problem (what differs)
    gpuinfra_kubernetes_breaker_tripped{held} 1|0        the taint controller's circuit breaker
                                                         (gpuinfra.health.taint): held names the
                                                         node it kept untainted
    gpuinfra_kubernetes_nodes_query_ok 1|0               kubectl answered and was understood
    gpuinfra_kubernetes_nodes_last_run_timestamp_seconds when the head last asked

The rule is the verify suite's (test_allocatable_matches_spec): the resources a node must
offer are :func:`gpuinfra.kubernetes.deviceplugin.expected_resources` of its spec, judged by
:func:`gpuinfra.captures.kubernetes.allocatable_problem`. What the spec implies is rendered at
deploy time into :data:`EXPECTED_PATH` (:func:`expected_json`), so the head's timer
(gpuinfra-kubernetes-nodes.timer, the monitoring role) needs no spec: every minute it runs
``kubectl get nodes -o json`` and writes :func:`gpus_text`. The alert KubernetesGpusMissing
fires on a 0: the device plugin down or crashing on the node, a GPU lost, the node gone from
the cluster, or a MIG / sharing config the plugin did not apply; the kubelet's own death is
KubeletDown's (node_exporter's systemd series).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.health.collect import Output
from gpuinfra.monitoring.slurmnodes import label, parsed, query_lines

EXPECTED_PATH = "/etc/gpuinfra/kubernetes-gpus.json"
PROM_NAME = "gpuinfra-kubernetes-nodes.prom"
# Where the monitoring role installs the program (roles/monitoring/kubernetes_nodes.py, with the
# library zip) and its units.
LIB = "/usr/local/lib/gpuinfra-kubernetes-nodes"
UNITS = ("gpuinfra-kubernetes-nodes.service", "gpuinfra-kubernetes-nodes.timer")
PROBLEM_LIMIT = 200


def command(kubeconfig: str) -> list[str]:
    return ["kubectl", "--kubeconfig", kubeconfig, "get", "nodes", "-o", "json",
            "--request-timeout=30s"]


def expected(spec: Any) -> dict[str, dict[str, int]]:
    """``{Kubernetes node name: {resource: count}}`` for the spec's Kubernetes GPU workers."""
    from gpuinfra.kubernetes.deviceplugin import expected_resources

    return {node.short_name: expected_resources(node, spec.mig_strategy)
            for node in spec.nodes
            if node.is_worker and node.gpus is not None and "kubernetes" in node.schedulers}


def expected_json(spec: Any) -> str:
    return json.dumps(expected(spec), indent=2, sort_keys=True) + "\n"


def parse_expected(text: str, source: str = EXPECTED_PATH) -> dict[str, dict[str, int]]:
    """The file :func:`expected_json` wrote, every entry checked (a ParseError names it)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ParseError(source, f"not JSON ({exc}); deploy the monitoring role again") from None
    if not isinstance(raw, dict):
        raise ParseError(source, "not a JSON object of node -> {resource: count}")
    for node, resources in raw.items():
        if not isinstance(resources, dict) or not all(
                isinstance(k, str) and k.startswith("nvidia.com/") and isinstance(v, int)
                and not isinstance(v, bool) and v >= 0 for k, v in resources.items()):
            raise ParseError(source, f"node {node!r}: {resources!r} is not a map of nvidia.com/* "
                                     "resources to counts; deploy the monitoring role again")
    return raw


def _tripped(text: str) -> str:
    """The node holding the taint controller's trip (gpuinfra.health.taint.TRIPPED), or ""."""
    from gpuinfra.health.taint import tripped

    try:
        items = json.loads(text).get("items") or []
    except (ValueError, AttributeError):
        return ""
    held = tripped(n for n in items if isinstance(n, dict))
    return str((held.get("metadata") or {}).get("name", "")) if held else ""


def gpus_text(output: Output | None, wanted: Mapping[str, Mapping[str, int]],
              now: float) -> str:
    """The metric text of one ``kubectl get nodes -o json`` (``output``; None: not run)
    against ``wanted`` (:func:`expected`). No node series when kubectl failed."""
    from gpuinfra.captures.kubernetes import allocatable_problem
    from gpuinfra.parsers.kubectl import parse_nodes

    nodes = parsed(output, parse_nodes)
    lines = ["# HELP gpuinfra_kubernetes_node_gpus_ok 1 when the node's nvidia.com/* "
             "allocatable is what the spec implies; problem says what differs",
             "# TYPE gpuinfra_kubernetes_node_gpus_ok gauge"]
    for name, resources in sorted(wanted.items()) if nodes is not None else ():
        seen = nodes.get(name)
        if seen is None:
            problem = "not in the cluster (kubectl get nodes does not list it)"
        else:
            found = allocatable_problem(resources, seen.allocatable)
            problem = found.what if found is not None else ""
        lines.append(f'gpuinfra_kubernetes_node_gpus_ok{{node="{label(name)}",'
                     f'problem="{label(problem[:PROBLEM_LIMIT])}"}} {0 if problem else 1}')
    if nodes is not None:
        held = _tripped(output.text if output is not None else "")
        lines += ["# HELP gpuinfra_kubernetes_breaker_tripped 1 when the taint controller's "
                  "circuit breaker is tripped (held: the node it kept untainted)",
                  "# TYPE gpuinfra_kubernetes_breaker_tripped gauge",
                  f'gpuinfra_kubernetes_breaker_tripped{{held="{label(held)}"}} '
                  f"{1 if held else 0}"]
    lines += query_lines("gpuinfra_kubernetes_nodes", "kubectl get nodes", nodes is not None,
                         now)
    return "\n".join(lines) + "\n"
