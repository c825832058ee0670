"""Monitoring on a site with ``monitoring_enabled``, judged from the head through Prometheus'
HTTP API (the head asks its own cluster address, as Grafana and operators do).

Every target of prometheus.yml up (node_exporter on every node, DCGM on GPU nodes where on,
Prometheus, Alertmanager, the Slurm exporter); one GPU series per GPU of each GPU node, as
many as the spec says (the GPU collector's ``gpuinfra_gpu_info``, and DCGM's
``DCGM_FI_DEV_GPU_TEMP`` where DCGM runs); every alert rule of the spec loaded; Alertmanager
ready and known to Prometheus. Fresh after a deploy or a reboot, targets and series appear
within a scrape interval or two: each check waits for them (at most WAIT_S).
In the lab the GPU series come from the replayed nvidia-smi: they prove the collector and the
scrape path, the hardware only on a real cluster.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from typing import Any

import pytest
from testinfra.host import Host

from gpuinfra.monitoring.alerts import alerts
from gpuinfra.monitoring.scrape import target
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra_verify.expect import problem
from gpuinfra_verify.failure import fail
from gpuinfra_verify.monitoring_expect import (
    counts_by_instance,
    expected_targets,
    gpu_series_problems,
    rule_problems,
    target_problems,
)

Note = Callable[[str, object], None]
WAIT_S = 120
POLL_S = 5
# Reads one URL on the head with Python's standard library (no curl in a minimal Debian).
FETCH = ("import sys, urllib.request; "
         "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())")


@pytest.fixture(scope="session")
def mon(site) -> Monitoring:
    head = site.spec.head
    if len(head) != 1 or not head[0].settings["monitoring_enabled"]:
        pytest.skip("monitoring_enabled is False (or no single head)")
    return Monitoring.from_settings(head[0].settings)


def fetch(controller: Host, url: str) -> str | None:
    result = controller.run(f"python3 -c {shlex.quote(FETCH)} {shlex.quote(url)}")
    return result.stdout if result.rc == 0 else None


@pytest.fixture(scope="session")
def api(controller: Host, site, mon: Monitoring) -> Callable[[str], Any]:
    """GET Prometheus' API on the head's cluster address; fails the test naming the cause."""
    base = f"http://{target(site.spec.head[0], mon.prometheus_port)}/api/v1/"

    def get(path: str) -> Any:
        text = fetch(controller, base + path)
        if text is None:
            pytest.fail(problem(site.spec.head[0].name, f"Prometheus does not answer at {base}",
                                "prometheus is down, or listens on another address than the "
                                "head's node_address (refused config, changed address)",
                                "`systemctl status prometheus` and `journalctl -u prometheus` "
                                "on the head; deploy again"), pytrace=False)
        return json.loads(text)["data"]

    return get


def query(api: Callable[[str], Any], expr: str) -> list[dict[str, Any]]:
    from urllib.parse import quote

    return api(f"query?query={quote(expr)}")["result"]


def wait_for(check: Callable[[], list[str]]) -> list[str]:
    """The check's problems once they are gone, or as they stand after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while True:
        problems = check()
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(POLL_S)


def test_every_target_up(api, site, mon, note: Note) -> None:
    expected = expected_targets(site.spec, mon)
    problems = wait_for(lambda: target_problems(expected, api("targets")["activeTargets"]))
    note("targets", len(expected))
    if problems:
        fail(note, "\n".join(problems))


def test_one_gpu_series_per_gpu(api, site, mon, note: Note) -> None:
    if not site.spec.gpu_nodes:
        pytest.skip("no GPU node in the spec")
    sources = [("gpuinfra_gpu_info", "collector")]
    if mon.dcgm:
        sources.append(("DCGM_FI_DEV_GPU_TEMP", "dcgm"))
    problems: list[str] = []
    for metric, source in sources:
        problems += wait_for(lambda m=metric, s=source: gpu_series_problems(
            site.spec, counts_by_instance(query(api, f"count by (instance) ({m})")), m, s))
    note("gpu_series", sum(n.gpus.count for n in site.spec.gpu_nodes if n.gpus))
    if problems:
        fail(note, "\n".join(problems))


def test_gpu_telemetry_flows(api, site, note: Note) -> None:
    """At least one GPU's temperature reaches Prometheus (the collector's telemetry query)."""
    if not site.spec.gpu_nodes:
        pytest.skip("no GPU node in the spec")
    problems = wait_for(lambda: [] if query(api, "gpuinfra_gpu_temperature_celsius") else [
        problem("cluster", "no gpuinfra_gpu_temperature_celsius series",
                "nvidia-smi refuses the collector's telemetry query on every node "
                "(gpuinfra_gpu_collector_query_ok{query=\"telemetry\"} is 0)",
                "run `nvidia-smi --query-gpu=index,temperature.gpu,power.draw,utilization.gpu,"
                "memory.used,memory.total --format=csv` on a GPU node")])
    if problems:
        fail(note, "\n".join(problems))


def test_alert_rules_loaded(api, site, mon, note: Note) -> None:
    expected = [a.name for a in alerts(site.spec, mon)]
    loaded = [rule["name"] for group in api("rules")["groups"] for rule in group["rules"]
              if rule.get("type") == "alerting"]
    note("alert_rules", len(set(loaded)))
    problems = rule_problems(expected, loaded)
    if problems:
        fail(note, "\n".join(problems))


def test_alertmanager_reachable(controller: Host, api, site, mon, note: Note) -> None:
    head = site.spec.head[0]
    address = target(head, mon.alertmanager_port)
    if fetch(controller, f"http://{address}/-/ready") is None:
        fail(note, problem(head.name, f"Alertmanager does not answer at {address}",
                           "prometheus-alertmanager is down (a refused alertmanager.yml keeps "
                           "the old one; a bad one at start stops it) or listens elsewhere",
                           "`systemctl status prometheus-alertmanager` and `amtool "
                           "check-config /etc/prometheus/alertmanager.yml` on the head"))
    known = [a["url"] for a in api("alertmanagers")["activeAlertmanagers"]]
    if not any(address in url for url in known):
        fail(note, problem(head.name, f"Prometheus sends alerts to {known or 'nobody'}, not "
                           f"{address}", "the live prometheus.yml is older than the spec",
                           "deploy again (monitoring role)"))
