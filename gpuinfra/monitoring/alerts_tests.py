"""``promtool test rules`` input for the alert rules of :mod:`gpuinfra.monitoring.alerts`: a
healthy site where no alert may fire (each value just on the safe side of its threshold), and
for each alert the site states of its cases, where it must fire with exactly the expected
labels and annotations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpuinfra.knowledge.topology import expected_active_links
from gpuinfra.logs.journal import STALE_S, uploaders
from gpuinfra.monitoring.alerts import alerts, breaker_sources, ecc_max
from gpuinfra.monitoring.series import (
    Alert,
    breaker_series,
    collector_series,
    filesystem_series,
    gpu_labels_of,
    gpu_series,
    health_nodes,
    health_series,
    health_stale_seconds,
    logs_series,
    roll_series,
    selector,
    slurm_nodes_series,
    slurm_state_series,
    unit_active_series,
)
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.monitoring.stack_alerts import healthy_stack_series
from gpuinfra.spec.model import ClusterSpec


def healthy_series(spec: ClusterSpec, mon: Monitoring) -> dict[str, str]:
    """Series of a healthy site, each just on the safe side of its alert (promtool values)."""
    series: dict[str, str] = {}
    for node in spec.nodes:
        name = node.short_name
        series[f'up{selector(job="node", instance=name)}'] = "1x15"
        series[filesystem_series("avail", name)] = f"{mon.disk_free_min_percent + 1}x15"
        series[filesystem_series("size", name)] = "100x15"
        if "slurm" in spec.schedulers:
            unit = "slurmctld" if node.is_controller else "slurmd" if node.is_worker else None
            if unit:
                series[unit_active_series(name, unit)] = "1x15"
        for index, labels in enumerate(gpu_labels_of(node)):
            series[f"gpuinfra_gpu_info{selector(job='node', **labels)}"] = "1x15"
            series[gpu_series("temperature_celsius", node, index)] = \
                f"{mon.gpu_temperature_max}x15"
            series[gpu_series("xid_errors", node, index)] = "0x15"
            series[gpu_series("ecc_uncorrected_volatile_errors", node, index)] = \
                f"{ecc_max(node)}x15"
            for metric in ("retired_pages_pending",
                           "remapped_rows_pending", "remapped_rows_failure",
                           "retired_pages_double_bit"):
                series[gpu_series(metric, node, index)] = "0x15"
        if node.gpus is not None:
            series[collector_series(node)] = "0+60x15"  # runs every minute: time() - ts stays 0
            expected = expected_active_links(node.gpus.topology, node.gpus.model,
                                             node.gpus.count)
            for index, links in enumerate(expected):
                if links:
                    series[gpu_series("nvlink_links_active", node, index)] = f"{links}x15"
                    series[gpu_series("nvlink_link_min_gbytes_per_second", node, index)] = \
                        f"{node.gpus.model.link_gbytes_per_s:g}x15"
    for node in health_nodes(spec):
        series[health_series("ok", node)] = "1x15"
        # At every evaluation the last run was exactly the stale limit ago: time() - ts
        # equals the limit, just not above it.
        series[health_series("last_run_timestamp_seconds", node)] = \
            f"-{health_stale_seconds(node)}+60x15"
    if len(spec.head) == 1:
        for node in uploaders(spec.nodes):
            # The newest entry exactly STALE_S old at every evaluation: just not above it.
            series[logs_series(spec, node)] = f"-{STALE_S}+60x15"
    if "slurm" in spec.schedulers:
        head = spec.head[0].short_name
        series[slurm_nodes_series(head, "idle")] = f"{len(spec.workers)}x15"
        for node in spec.workers:  # the head's own Slurm node states (slurmnodes)
            series[slurm_state_series(head, node.short_name, "idle")] = "1x15"
    if any(a.name == "HealthBreakerTripped" for a in alerts(spec, mon)):
        for k8s in breaker_sources(spec):  # the breaker, not tripped
            series[breaker_series(spec.head[0].short_name, kubernetes=k8s)] = "0x15"
    if spec.workers:  # a roll driven now: its last step just now, at every evaluation
        series[roll_series("live", spec.head[0].short_name)] = "1x15"
        series[roll_series("last_step_timestamp_seconds", spec.head[0].short_name)] = "0+60x15"
    series.update(healthy_stack_series(spec, mon))
    return series


_LABEL_REF = re.compile(r"\{\{ \$labels\.(\w+) \}\}")


def _render(template: str, labels: Mapping[str, str]) -> str:
    """``template`` with each ``{{ $labels.x }}`` replaced by label x, as Prometheus does."""
    return _LABEL_REF.sub(lambda m: labels.get(m[1], ""), template)


def _expected(alert: Alert, labels: Mapping[str, str]) -> dict[str, Any]:
    """One ``exp_alerts`` item: ``alert`` firing with ``labels``."""
    return {"exp_labels": {**labels, "severity": alert.severity},
            "exp_annotations": {"summary": _render(alert.summary, labels),
                                "description": alert.description}}


def _series_list(series: Mapping[str, str]) -> list[dict[str, str]]:
    """``input_series`` of a test: series -> promtool values, as promtool reads them."""
    return [{"series": name, "values": values} for name, values in series.items()]


def rule_tests(spec: ClusterSpec, mon: Monitoring, rules_file: str) -> dict[str, Any]:
    """``promtool test rules`` input: on the healthy site no alert fires; in each alert's
    cases that alert fires with exactly the expected labels and annotations."""
    found = alerts(spec, mon)
    healthy = healthy_series(spec, mon)
    eval_time = "14m"  # past every rule's `for` (10m at most)
    tests = [{"name": "healthy site: no alert fires", "interval": "1m",
              "input_series": _series_list(healthy),
              "alert_rule_test": [{"eval_time": eval_time, "alertname": a.name,
                                   "exp_alerts": []} for a in found]}]
    for alert in found:
        for number, case in enumerate(alert.firing, 1):
            series = {k: v for k, v in healthy.items() if k not in case.drop}
            series.update(case.set)
            tests.append({
                "name": f"{alert.name} fires (case {number})", "interval": "1m",
                "input_series": _series_list(series),
                "alert_rule_test": [{"eval_time": eval_time, "alertname": alert.name,
                                     "exp_alerts": [_expected(alert, labels)
                                                    for labels in case.fires]}]})
    return {"rule_files": [rules_file], "evaluation_interval": "1m", "tests": tests}

