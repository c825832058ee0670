"""Pure judgements of the monitoring checks (gpuinfra_verify/test_monitoring.py).

What Prometheus must show is computed from the same spec and builders as the files the role
wrote (gpuinfra.monitoring.scrape, gpuinfra.monitoring.alerts): every scrape target, every alert
rule, one GPU series per GPU. Nothing here connects to a host: tests/unit/test_verify_monitoring.py
shows each judgement failing on broken input. Messages follow the suite's form: what was seen,
then the likely cause and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.monitoring.scrape import RULES_PATH, prometheus_config
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.spec import ClusterSpec
from gpuinfra_verify.expect import problem

# Why a target of each job does not answer, and what to do.
TARGET_ADVICE: dict[str, tuple[str, str]] = {
    "node": ("node_exporter is down on the node, listens on another address (node_address "
             "changed since the deploy), or a firewall blocks the port from the head",
             "`systemctl status prometheus-node-exporter` on the node; `ss -ltn` shows the "
             "address it listens on; open the port to the head; deploy again"),
    "dcgm": ("DCGM is not running: nvidia-dcgm-exporter (or the nvidia-dcgm host engine) "
             "failed, often a DCGM/driver mismatch or no GPU visible",
             "`systemctl status nvidia-dcgm nvidia-dcgm-exporter` and /var/dcgm-exporter.log "
             "on the node; keep DCGM and the exporter paired (monitoring_dcgm_version)"),
    "slurm": ("the Slurm exporter is down or cannot run sinfo/squeue (munge, slurm.conf)",
              "`systemctl status prometheus-slurm-exporter` on the head; `sinfo` there"),
    "prometheus": ("Prometheus cannot scrape itself on the head's cluster address",
                   "`systemctl status prometheus` on the head; deploy again"),
    "alertmanager": ("Alertmanager is down or listens elsewhere",
                     "`systemctl status prometheus-alertmanager` on the head; "
                     "`amtool check-config /etc/prometheus/alertmanager.yml`"),
}


def expected_targets(spec: ClusterSpec, mon: Monitoring) -> dict[tuple[str, str], str]:
    """(job, instance) -> scrape address, for every target prometheus.yml names."""
    out = {}
    for job in prometheus_config(spec, mon)["scrape_configs"]:
        for group in job.get("static_configs", []):
            instance = group.get("labels", {}).get("instance")
            for address in group["targets"]:
                out[(job["job_name"], instance or address)] = address
    return out


def target_problems(expected: Mapping[tuple[str, str], str],
                    active: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each expected target missing from Prometheus' active targets or not up."""
    seen = {(t.get("labels", {}).get("job"), t.get("labels", {}).get("instance")): t
            for t in active}
    out = []
    for (job, instance), address in sorted(expected.items()):
        cause, fix = TARGET_ADVICE.get(job, ("the exporter does not answer",
                                             "check the exporter on that host"))
        target = seen.get((job, instance))
        if target is None:
            out.append(problem(instance, f"Prometheus does not scrape {job} at {address}",
                               "the live prometheus.yml is older than the spec (a refused "
                               "or missing deploy)", "deploy again (monitoring role)"))
        elif target.get("health") != "up":
            error = target.get("lastError") or target.get("health") or "unknown"
            out.append(problem(instance, f"{job} target {address} is "
                               f"{target.get('health')}: {error}", cause, fix))
    return out


def gpu_series_problems(spec: ClusterSpec, counts: Mapping[str, int], metric: str,
                        source: str) -> list[str]:
    """Each GPU node whose series count of ``metric`` differs from its spec's gpu_count."""
    out = []
    for node in spec.gpu_nodes:
        assert node.gpus is not None
        seen = counts.get(node.short_name, 0)
        if seen == node.gpus.count:
            continue
        if source == "dcgm":
            cause, fix = TARGET_ADVICE["dcgm"]
        elif seen == 0:
            cause = ("the GPU collector wrote no GPU: nvidia-smi fails (driver not loaded, "
                     "no GPU), or gpuinfra-gpu-metrics.timer is not running")
            fix = ("`systemctl status gpuinfra-gpu-metrics.service` and `nvidia-smi -L` on the "
                   "node; the metrics are in /var/lib/prometheus/node-exporter/gpuinfra-gpu.prom")
        else:
            cause = ("nvidia-smi lists fewer GPUs than the spec: a GPU fell off the bus (XID "
                     "79), is not seated, or gpu_count is wrong")
            fix = "`nvidia-smi -L` on the node; fix the hardware or gpu_count in the spec"
        out.append(problem(node.name, f"{seen} {metric} series, the spec has "
                                      f"{node.gpus.count} GPUs", cause, fix))
    return out


def rule_problems(expected: Sequence[str], loaded: Sequence[str]) -> list[str]:
    """Alert rules of the spec that Prometheus has not loaded."""
    missing = sorted(set(expected) - set(loaded))
    if not missing:
        return []
    return [problem("head", f"alert rules not loaded: {', '.join(missing)}",
                    "the live rule file is older than the spec, or Prometheus was not "
                    "reloaded after the deploy",
                    f"deploy again; `promtool check rules {RULES_PATH}` on the head")]


def counts_by_instance(result: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``count by (instance) (...)`` of a Prometheus query result: instance -> count."""
    return {r["metric"].get("instance", ""): int(float(r["value"][1])) for r in result}
