"""prometheus.yml of a site, built as data from the spec, and the arguments of the daemons it
scrapes (Prometheus, Alertmanager, node_exporter), each listening on its node's cluster address.

The role dumps prometheus.yml with pyyaml and ``promtool check config`` judges it (and, through
``rule_files``, the alert rules of :mod:`gpuinfra.monitoring.alerts`) before it goes live.

Names of things on the wire: every scrape target carries ``instance`` = the node's short name
(not ``address:port``), so node_exporter, DCGM and the GPU collector's series of one node join
on it, and the alerts name nodes the way the inventory does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.monitoring.web import (
    NODE_WEB_DIR,
    client_config,
    exporter_client_config,
    web_args,
)
from gpuinfra.spec.model import ClusterSpec, NodeSpec

# Where the role puts the rules (prometheus.yml's rule_files names this path).
RULES_PATH = "/etc/prometheus/gpuinfra-rules.yml"
PROMETHEUS_CONFIG = "/etc/prometheus/prometheus.yml"
# Systemd units whose state node_exporter reports (its systemd collector, unit-include).
WATCHED_UNITS = ("slurmctld", "slurmd", "slurmdbd", "munge", "nvidia-persistenced",
                 "nvidia-fabricmanager", "nvidia-dcgm", "nvidia-dcgm-exporter", "prometheus",
                 "prometheus-alertmanager", "gpuinfra-gpu-metrics", "kubelet")
SLURM_EXPORTER_PORT = 9092  # rivosinc/prometheus-slurm-exporter's listen port
DCGM_EXPORTER_PORT = 9400  # dcgm-exporter's default listen port


def _address(node: NodeSpec) -> str:
    """Where the node answers on the cluster network: its address, else its name."""
    if node.address is None:
        return node.name
    return f"[{node.address}]" if ":" in node.address else node.address


def target(node: NodeSpec, port: int) -> str:
    """``address:port`` of ``port`` on the node's cluster network."""
    return f"{_address(node)}:{port}"


def _head(spec: ClusterSpec) -> NodeSpec:
    """The node that runs Prometheus and Alertmanager."""
    return spec.head[0]


def _static(nodes: Sequence[NodeSpec], port: int, role: bool = False) -> list[dict[str, Any]]:
    """static_configs of ``port`` on ``nodes``, each labelled with its short name (and its
    role where ``role``)."""
    out = []
    for node in nodes:
        labels = {"instance": node.short_name}
        if role:
            labels["role"] = ("head" if node.is_head else "controller"
                              if node.is_backup_controller or node.is_extra_control_plane
                              else "login" if node.is_login else "worker")
        out.append({"targets": [target(node, port)], "labels": labels})
    return out


def prometheus_config(spec: ClusterSpec, mon: Monitoring,
                      rules_path: str = RULES_PATH) -> dict[str, Any]:
    """prometheus.yml: every node's node_exporter, Prometheus and Alertmanager on the head,
    DCGM on GPU nodes and the Slurm exporter on the head where enabled; alerts to the head's
    Alertmanager; the site's rule file."""
    head = _head(spec)
    # The head's daemons serve web.yml (monitoring_web_security): HTTPS and basic auth. A
    # fresh dict for each use: pyyaml would write one shared object as a YAML alias.
    def secured() -> dict[str, Any]:
        return client_config() if mon.web_security else {}

    # Every node_exporter serves its own web.yml (monitoring_node_exporter_web_security): HTTPS,
    # its certificate signed by the head's exporter CA, the exporters' password.
    def node_secured() -> dict[str, Any]:
        return exporter_client_config() if mon.node_exporter_web_security else {}

    jobs: list[dict[str, Any]] = [
        {"job_name": "prometheus", **secured(),
         "static_configs": _static([head], mon.prometheus_port)},
        {"job_name": "alertmanager", **secured(),
         "static_configs": _static([head], mon.alertmanager_port)},
        {"job_name": "node", **node_secured(),
         "static_configs": _static(spec.nodes, mon.node_exporter_port, role=True)},
    ]
    if mon.dcgm and spec.gpu_nodes:
        jobs.append({"job_name": "dcgm",
                     "static_configs": _static(spec.gpu_nodes, DCGM_EXPORTER_PORT)})
    if mon.slurm_exporter and "slurm" in spec.schedulers:
        jobs.append({"job_name": "slurm", "scrape_timeout": mon.scrape_interval,
                     "static_configs": _static([head], SLURM_EXPORTER_PORT)})
    jobs += [dict(job) for job in mon.scrape_extra]
    return {
        "global": {"scrape_interval": mon.scrape_interval,
                   "evaluation_interval": mon.scrape_interval,
                   "external_labels": {"cluster": spec.name}},
        "alerting": {"alertmanagers": [
            {**secured(), "static_configs": [{"targets": [target(head, mon.alertmanager_port)]}]}]},
        "rule_files": [rules_path],
        "scrape_configs": jobs,
    }


def prometheus_args(spec: ClusterSpec, mon: Monitoring) -> str:
    """``ARGS`` of /etc/default/prometheus: listen on the head's cluster address only, keep
    ``retention`` of samples, serve web.yml (TLS, basic auth) where monitoring_web_security."""
    head = _head(spec)
    return (f"--web.listen-address={target(head, mon.prometheus_port)} "
            f"--storage.tsdb.retention.time={mon.retention}{web_args(mon.web_security)}")


def alertmanager_args(spec: ClusterSpec, mon: Monitoring) -> str:
    """``ARGS`` of /etc/default/prometheus-alertmanager: the head's cluster address; no
    gossip port (one Alertmanager: ``--cluster.listen-address=`` empty turns it off); web.yml
    (TLS, basic auth) where monitoring_web_security."""
    head = _head(spec)
    return (f"--web.listen-address={target(head, mon.alertmanager_port)} "
            f"--cluster.listen-address={web_args(mon.web_security)}")


def node_exporter_args(node: NodeSpec, mon: Monitoring, textfile_dir: str,
                       web_flag: str = "--web.config.file") -> str:
    """``ARGS`` of /etc/default/prometheus-node-exporter: the node's cluster address, the
    textfile directory of the GPU collector, and the state of the units the alerts watch;
    its web.yml (TLS, basic auth) where monitoring_node_exporter_web_security, given with
    ``web_flag`` (``--web.config`` before node_exporter 1.5.0: Ubuntu 22.04's 1.3.1).
    (No backslash in the regular expression: the file is read by systemd and a shell.)"""
    units = "|".join(WATCHED_UNITS)
    web = (f" {web_flag}={NODE_WEB_DIR}/web.yml" if mon.node_exporter_web_security else "")
    return (f"--web.listen-address={target(node, mon.node_exporter_port)} "
            f"--collector.textfile.directory={textfile_dir} --collector.systemd "
            f"--collector.systemd.unit-include=({units})[.]service{web}")
