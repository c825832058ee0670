"""The model of an alert rule (:class:`Alert`, with the site states that must fire it) and the
names of the series the rule tests set, with the labels the exporters give them: the pieces
:mod:`gpuinfra.monitoring.alerts` builds the site's rules from and
:mod:`gpuinfra.monitoring.alerts_tests` turns into ``promtool test rules`` input."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.health.expectation import runs_on
from gpuinfra.logs.journal import AGE_METRIC
from gpuinfra.spec.model import ClusterSpec, NodeSpec


@dataclass(frozen=True)
class AlertCase:
    """A site state for a rule test: series changed from the healthy site (``set``: series ->
    promtool values; ``drop``: series removed) and the alert labels expected to fire."""

    set: Mapping[str, str] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    fires: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True)
class Alert:
    """One alerting rule, with the site states that must (and must not) fire it."""

    name: str
    expr: str
    duration: str
    severity: str
    summary: str  # may use {{ $labels.x }} only (rendered for the tests as well)
    description: str  # cause and fix
    firing: tuple[AlertCase, ...]

    def rule(self) -> dict[str, Any]:
        return {"alert": self.name, "expr": self.expr, "for": self.duration,
                "labels": {"severity": self.severity},
                "annotations": {"summary": self.summary, "description": self.description}}


# ------------------------------------------------------------------------------ series names
# The series of the rule tests, with the labels the exporters give them.

def selector(**labels: str) -> str:
    """A PromQL label selector matching exactly ``labels``: ``{job="node",instance="n1"}``."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def gpu_labels(node: NodeSpec, index: int) -> dict[str, str]:
    """The labels the GPU collector gives GPU ``index`` of ``node``."""
    return {"instance": node.short_name, "gpu": str(index),
            "uuid": f"GPU-{node.short_name}-{index}"}


def gpu_labels_of(node: NodeSpec) -> list[dict[str, str]]:
    """The labels of each GPU of ``node`` (none for a node without GPUs)."""
    return [gpu_labels(node, i) for i in range(node.gpus.count)] if node.gpus else []


def pci_bus_id(index: int) -> str:
    """The PCI bus id the rule tests give GPU ``index`` (``0000:10:00`` for GPU 0)."""
    return f"0000:{0x10 + index:02x}:00"


XID_METRICS = ("xid_errors", "last_xid", "xid_errors_by_code", "recovery_action")


def gpu_series(metric: str, node: NodeSpec, index: int, xid: int | None = None) -> str:
    """Series ``gpuinfra_gpu_<metric>`` of GPU ``index`` of ``node``, as node_exporter serves
    the GPU collector's file (the XID series also carry ``pci_bus_id``; the per-code one
    ``xid``)."""
    labels = {"job": "node", **gpu_labels(node, index)}
    if metric in XID_METRICS:
        labels["pci_bus_id"] = pci_bus_id(index)
    if xid is not None:
        labels["xid"] = str(xid)
    return f"gpuinfra_gpu_{metric}{selector(**labels)}"


def collector_series(node: NodeSpec) -> str:
    """The series of when the GPU collector of ``node`` last ran."""
    return (f"gpuinfra_gpu_collector_last_run_timestamp_seconds"
            f"{selector(job='node', instance=node.short_name)}")


def filesystem_series(kind: str, instance: str) -> str:
    """node_exporter's ``node_filesystem_<kind>_bytes`` (avail, size) of the root file system
    of ``instance``."""
    labels = selector(job="node", instance=instance, mountpoint="/", fstype="ext4",
                      device="/dev/sda1")
    return f"node_filesystem_{kind}_bytes{labels}"


def unit_active_series(instance: str, unit: str) -> str:
    """node_exporter's series of whether systemd unit ``unit``.service of ``instance`` is
    active."""
    return (f"node_systemd_unit_state"
            f'{selector(job="node", instance=instance, name=unit + ".service", state="active")}')


def slurm_nodes_series(instance: str, state: str) -> str:
    """The Slurm exporter's count of nodes in ``state`` (exporter on ``instance``)."""
    return f"slurm_node_count_per_state{selector(job='slurm', instance=instance, state=state)}"


def slurm_state_series(instance: str, node: str, state: str, reason: str = "") -> str:
    """The head's Slurm node state series of ``node`` (gpuinfra.monitoring.slurmnodes, served by
    node_exporter on ``instance``, the head)."""
    return ("gpuinfra_slurm_node_state"
            f"{selector(job='node', instance=instance, node=node, state=state, reason=reason)}")


def breaker_series(instance: str, held: str = "", kubernetes: bool = False) -> str:
    """The head's circuit-breaker series: Slurm's (gpuinfra.monitoring.slurmnodes.breaker_text)
    or, ``kubernetes``, the taint controller's (gpuinfra.monitoring.k8snodes: its own name, so
    the two files never write the same series)."""
    name = "gpuinfra_kubernetes_breaker_tripped" if kubernetes else \
        "gpuinfra_health_breaker_tripped"
    return f"{name}{selector(job='node', instance=instance, held=held)}"


def roll_series(metric: str, instance: str) -> str:
    """A roll's series on the head (gpuinfra.roll.metrics_text, written by `gpuinfra roll`)."""
    return f"gpuinfra_roll_{metric}{selector(job='node', instance=instance)}"


def health_series(metric: str, node: NodeSpec, **labels: str) -> str:
    """Series ``gpuinfra_health_<metric>`` of ``node``, as node_exporter serves the health
    check's file (gpuinfra.health.metrics)."""
    return f"gpuinfra_health_{metric}{selector(job='node', instance=node.short_name, **labels)}"


def logs_series(spec: ClusterSpec, node: NodeSpec) -> str:
    """The head's series of ``node``'s newest journal entry there (gpuinfra.logs.journal.age_script,
    served by the head's node_exporter)."""
    head = spec.head[0].short_name
    return f"{AGE_METRIC}{selector(job='node', instance=head, node=node.short_name)}"


def health_nodes(spec: ClusterSpec) -> list[NodeSpec]:
    """The nodes whose health check writes metrics (gpuinfra.health.expectation.runs_on,
    where ``health_enabled``)."""
    return [n for n in spec.nodes if runs_on(n) and n.settings["health_enabled"]]


def health_stale_seconds(node: NodeSpec) -> int:
    """Seconds without a run of the health check after which it counts as stopped: two
    ``health_check_interval`` (one run may be late: HealthCheckNodeState=CYCLE spreads the
    nodes over the interval, node-problem-detector invokes it once per interval)."""
    return 2 * int(node.settings["health_check_interval"])


# A drain reason the health check writes (gpuinfra.health.slurm: "gpuinfra: <cause>").
DRAIN_REASON = "gpuinfra: GPU1 NVLink 0 inactive: reseat the NVLink bridge"
