"""Grafana's provisioning of a site: the Prometheus datasource and the GPU-cluster dashboard,
built as data from the spec (the role dumps them with pyyaml and json).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuinfra.monitoring.scrape import target
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.monitoring.web import WEB_USER, scheme
from gpuinfra.spec.model import ClusterSpec

DATASOURCE_UID = "gpuinfra-prometheus"
# Grafana's copies of Prometheus' password and certificate (the role copies them on the head:
# Grafana cannot read /etc/prometheus/gpuinfra-web, which is the prometheus group's).
GRAFANA_SECRETS = "/etc/grafana/gpuinfra"  # root:grafana 0750
GRAFANA_PROMETHEUS_PASSWORD = f"{GRAFANA_SECRETS}/prometheus-password"  # root:grafana 0640
GRAFANA_PROMETHEUS_CA = f"{GRAFANA_SECRETS}/prometheus-ca.crt"
# Grafana's admin password, made on the head (root:grafana 0640).
GRAFANA_ADMIN_PASSWORD = f"{GRAFANA_SECRETS}/admin-password"


def file_value(path: str) -> str:
    """A Grafana setting or provisioning value read from ``path`` when Grafana starts
    (``$__file{}``: Grafana's setting.ExpandVar, file expander, trims whitespace; used for
    grafana.ini values and, through pkg/services/provisioning/values, provisioning values)."""
    return f"$__file{{{path}}}"


def grafana_datasource(spec: ClusterSpec, mon: Monitoring) -> dict[str, Any]:
    """/etc/grafana/provisioning/datasources/gpuinfra.yaml: Prometheus on the head; with
    monitoring_web_security over HTTPS trusting the head's certificate, with basic auth, the
    password and the certificate read from Grafana's copies (no secret in this file)."""
    head = spec.head[0]
    source: dict[str, Any] = {
        "name": f"Prometheus ({spec.name})", "uid": DATASOURCE_UID, "type": "prometheus",
        "access": "proxy", "url": f"{scheme(mon.web_security)}://"
                                  f"{target(head, mon.prometheus_port)}",
        "isDefault": True, "editable": False}
    if mon.web_security:
        source |= {"basicAuth": True, "basicAuthUser": WEB_USER,
                   "jsonData": {"tlsAuthWithCACert": True},
                   "secureJsonData": {
                       "basicAuthPassword": file_value(GRAFANA_PROMETHEUS_PASSWORD),
                       "tlsCACert": file_value(GRAFANA_PROMETHEUS_CA)}}
    return {"apiVersion": 1, "datasources": [source]}


def grafana_dashboards_provider(path: str) -> dict[str, Any]:
    """/etc/grafana/provisioning/dashboards/gpuinfra.yaml: dashboards read from ``path``."""
    return {"apiVersion": 1, "providers": [{
        "name": "gpuinfra", "folder": "GPU cluster", "type": "file",
        "disableDeletion": True, "allowUiUpdates": False, "options": {"path": path}}]}


def _panel(number: int, title: str, exprs: Sequence[tuple[str, str]], unit: str,
           kind: str = "timeseries") -> dict[str, Any]:
    """Dashboard panel ``number`` (two per row) drawing ``exprs`` (expression, legend)."""
    width = 12
    return {
        "id": number, "type": kind, "title": title,
        "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
        "gridPos": {"h": 8, "w": width, "x": (number - 1) % 2 * width,
                    "y": (number - 1) // 2 * 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
                    for i, (expr, legend) in enumerate(exprs)],
    }


def grafana_dashboard(spec: ClusterSpec, mon: Monitoring) -> dict[str, Any]:
    """The GPU-cluster dashboard: GPUs seen against the spec per node, temperature, power,
    utilisation, memory, NVLink links up, XIDs and ECC, nodes up; Slurm node states and DCGM's
    tensor activity where those exporters run."""
    expected = " or ".join(f'label_replace(vector({n.gpus.count}), "instance", "{n.short_name}",'
                           f' "", "")' for n in spec.gpu_nodes if n.gpus)
    panels = [
        ("GPUs seen / in the spec", [("count by (instance) (gpuinfra_gpu_info)",
                                      "{{instance}} seen")]
         + ([(expected, "{{instance}} spec")] if expected else []), "none"),
        ("GPU temperature", [("gpuinfra_gpu_temperature_celsius",
                              "{{instance}} GPU{{gpu}}")], "celsius"),
        ("GPU power", [("gpuinfra_gpu_power_draw_watts", "{{instance}} GPU{{gpu}}")], "watt"),
        ("GPU utilisation", [("gpuinfra_gpu_utilization_ratio", "{{instance}} GPU{{gpu}}")],
         "percentunit"),
        ("GPU memory used", [("gpuinfra_gpu_memory_used_bytes", "{{instance}} GPU{{gpu}}")],
         "bytes"),
        ("NVLink links up", [("gpuinfra_gpu_nvlink_links_active", "{{instance}} GPU{{gpu}}")],
         "none"),
        ("XID errors since boot, uncorrectable ECC",
         [("gpuinfra_gpu_xid_errors", "{{instance}} GPU{{gpu}} XIDs"),
          ("gpuinfra_gpu_ecc_uncorrected_volatile_errors", "{{instance}} GPU{{gpu}} ECC")],
         "none"),
        ("Nodes up", [('up{job="node"}', "{{instance}}")], "none"),
    ]
    if mon.slurm_exporter and "slurm" in spec.schedulers:
        panels.append(("Slurm nodes by state", [("slurm_node_count_per_state", "{{state}}")],
                       "none"))
    if mon.dcgm:
        panels.append(("Tensor core activity (DCGM)",
                       [("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "{{instance}} GPU{{gpu}}")],
                       "percentunit"))
    return {
        "uid": f"gpuinfra-{spec.name}"[:40], "title": f"GPU cluster {spec.name}",
        "tags": ["gpuinfra"], "timezone": "browser", "schemaVersion": 39, "version": 1,
        "editable": False, "refresh": "1m", "time": {"from": "now-6h", "to": "now"},
        "panels": [_panel(i, title, exprs, unit) for i, (title, exprs, unit)
                   in enumerate(panels, 1)],
    }
