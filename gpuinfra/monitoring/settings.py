"""The site's monitoring settings, as the builders of :mod:`gpuinfra.monitoring` read them.

:class:`Monitoring` has no defaults of its own: it is always built from a node's checked knob
values (``monitoring_*``, declared with their defaults in roles/monitoring/defaults.py
and checked by the spec gate), so each default lives in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Monitoring:
    """The site's monitoring settings (the role's knobs, checked by the gate)."""

    scrape_interval: str
    scrape_extra: tuple[Mapping[str, Any], ...]
    retention: str
    prometheus_port: int
    alertmanager_port: int
    node_exporter_port: int
    grafana_port: int
    grafana: bool
    web_security: bool  # TLS and basic auth on Prometheus and Alertmanager
    node_exporter_web_security: bool  # the same on every node's node_exporter
    dcgm: bool
    job_mapping: bool  # which Slurm job holds each GPU (gpuinfra.monitoring.jobmap)
    slurm_exporter: bool
    gpu_temperature_max: int
    disk_free_min_percent: int
    receivers: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Monitoring:
        """From a node's checked knob values (``monitoring_*``)."""
        return cls(
            scrape_interval=settings["monitoring_scrape_interval"],
            scrape_extra=tuple(settings["monitoring_scrape_extra"]),
            retention=settings["monitoring_retention"],
            prometheus_port=settings["monitoring_prometheus_port"],
            alertmanager_port=settings["monitoring_alertmanager_port"],
            node_exporter_port=settings["monitoring_node_exporter_port"],
            grafana_port=settings["monitoring_grafana_port"],
            grafana=settings["monitoring_grafana"],
            web_security=settings["monitoring_web_security"],
            node_exporter_web_security=settings["monitoring_node_exporter_web_security"],
            dcgm=settings["monitoring_dcgm"],
            job_mapping=settings["monitoring_job_mapping"],
            slurm_exporter=settings["monitoring_slurm_exporter"] is not None,
            gpu_temperature_max=settings["monitoring_gpu_temperature_max"],
            disk_free_min_percent=settings["monitoring_disk_free_min_percent"],
            receivers=tuple(settings["monitoring_alert_receivers"]),
        )
