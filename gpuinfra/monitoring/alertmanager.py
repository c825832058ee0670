"""alertmanager.yml of a site, built as data from the spec and the receivers of its data.

The role dumps it with pyyaml and ``amtool check-config`` judges it before it goes live.
Alertmanager's daemon arguments are built beside Prometheus' (:mod:`gpuinfra.monitoring.scrape`).
"""

from __future__ import annotations

from typing import Any

from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.spec.model import ClusterSpec

ALERTMANAGER_CONFIG = "/etc/prometheus/alertmanager.yml"
SEVERITIES = ("critical", "warning", "info")
NO_RECEIVER = "gpuinfra-none"  # alerts nobody asked for: kept in Alertmanager, not sent


def alertmanager_config(spec: ClusterSpec, mon: Monitoring) -> dict[str, Any]:
    """alertmanager.yml: every alert kept (receiver gpuinfra-none: shown, not sent); each
    receiver of the data gets the alerts of its severities and names (``continue``: several
    receivers may get one alert)."""
    receivers: list[dict[str, Any]] = [{"name": NO_RECEIVER}]
    routes = []
    for item in mon.receivers:
        receiver: dict[str, Any] = {"name": item["name"]}
        if "webhook_url" in item:
            receiver["webhook_configs"] = [{"url": item["webhook_url"], "send_resolved": True}]
        else:
            receiver["email_configs"] = [{"to": item["email_to"], "from": item["email_from"],
                                          "smarthost": item["smarthost"],
                                          "send_resolved": True}]
        receivers.append(receiver)
        matchers = [f'severity=~"{"|".join(item.get("severities", SEVERITIES))}"']
        if "alerts" in item:
            matchers.append(f'alertname=~"{"|".join(item["alerts"])}"')
        routes.append({"receiver": item["name"], "matchers": matchers, "continue": True})
    route: dict[str, Any] = {"receiver": NO_RECEIVER, "group_by": ["alertname", "instance"],
                             "group_wait": "30s", "group_interval": "5m",
                             "repeat_interval": "4h"}
    if routes:
        route["routes"] = routes
    return {"route": route, "receivers": receivers}


# Each alert's severity (gpuinfra.monitoring.alerts; tests/unit/test_monitoring_rules.py holds
# this table to the rules built): what a receiver's severities and names are matched against.
ALERT_SEVERITIES: dict[str, str] = {
    "NodeDown": "critical", "DiskAlmostFull": "warning", "SlurmctldDown": "critical",
    "SlurmctldBackupDown": "warning",
    "SlurmdDown": "critical", "SlurmNodesDrained": "warning", "GpuMissing": "critical",
    "GpuXidErrors": "warning", "GpuFatalXid": "critical", "GpuDriverFailure": "critical",
    "GpuUncorrectableEcc": "critical", "GpuMemoryNeedsReset": "warning",
    "GpuRetiredPagesOrRemapFailure": "critical", "GpuTemperatureHigh": "warning",
    "NvlinkDown": "critical", "NvlinkDegraded": "warning", "GpuMetricsStale": "warning",
    "NodeDrainedByHealthCheck": "warning", "NodeHealthCheckFailed": "warning",
    "NodeTaintedByHealthCheck": "warning",
    "HealthBreakerTripped": "critical",
    "RollStalled": "warning", "KubernetesGpusMissing": "critical",
    "FabricManagerDown": "critical", "DcgmExporterDown": "warning", "KubeletDown": "critical",
    "InfinibandPortDown": "critical", "InfinibandRateDegraded": "warning",
    "InfinibandLinkErrors": "warning",
    "NodeHealthCheckStale": "warning", "NodeLogsStale": "warning",
}


def unrouted_alerts(receivers: Any) -> list[str]:
    """The alerts no receiver of ``receivers`` (monitoring_alert_receivers) gets: they end at
    the default route's receiver, gpuinfra-none, which keeps them in Alertmanager and sends
    nothing (issue 45: every alert reaches a person, or the site is told)."""
    items = [r for r in (receivers or []) if isinstance(r, dict)]
    return [name for name, severity in ALERT_SEVERITIES.items()
            if not any(severity in item.get("severities", SEVERITIES)
                       and ("alerts" not in item or name in item["alerts"]) for item in items)]

