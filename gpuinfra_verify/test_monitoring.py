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
from gpuinfra.monitoring.web import (
    EXPORTER_CA_CERT,
    WEB_CERT,
    WEB_CONFIG,
    WEB_KEY,
    WEB_PASSWORD,
    WEB_PASSWORD_HASH,
    WEB_USER,
    scheme,
)
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
# Reads one URL on the head with Python's standard library (no curl in a minimal Debian). With
# monitoring_web_security, run with sudo: it reads the head's password file and trusts the
# head's certificate (gpuinfra.monitoring.web); the password is never on a command line.
FETCH = ("import base64, ssl, sys, urllib.request\n"
         "url, user, password_file, ca = sys.argv[1:5]\n"
         "headers, context = {}, None\n"
         "if password_file != '-':\n"
         "    secret = open(password_file).read().strip()\n"
         "    token = base64.b64encode(f'{user}:{secret}'.encode()).decode()\n"
         "    headers['Authorization'] = 'Basic ' + token\n"
         "    context = ssl.create_default_context(cafile=ca)\n"
         "request = urllib.request.Request(url, headers=headers)\n"
         "sys.stdout.write(urllib.request.urlopen(request, timeout=10, context=context)"
         ".read().decode())")


@pytest.fixture(scope="session")
def mon(site) -> Monitoring:
    head = site.spec.head
    if len(head) != 1 or not head[0].settings["monitoring_enabled"]:
        pytest.skip("monitoring_enabled is False (or no single head)")
    return Monitoring.from_settings(head[0].settings)


def fetch(controller: Host, url: str, secured: bool) -> str | None:
    """GET ``url`` on the head; with ``secured`` over HTTPS with the head's credentials."""
    extra = [WEB_USER, WEB_PASSWORD, WEB_CERT] if secured else ["-", "-", "-"]
    command = " ".join(shlex.quote(p) for p in ["python3", "-c", FETCH, url, *extra])
    if not secured:
        result = controller.run(command)
    else:
        with controller.sudo():
            result = controller.run(command)
    return result.stdout if result.rc == 0 else None


@pytest.fixture(scope="session")
def api(controller: Host, site, mon: Monitoring) -> Callable[[str], Any]:
    """GET Prometheus' API on the head's cluster address; fails the test naming the cause."""
    base = f"{scheme(mon.web_security)}://{target(site.spec.head[0], mon.prometheus_port)}/api/v1/"

    def get(path: str) -> Any:
        text = fetch(controller, base + path, mon.web_security)
        if text is None:
            pytest.fail(problem(site.spec.head[0].name, f"Prometheus does not answer at {base}",
                                "prometheus is down, or listens on another address than the "
                                "head's node_address (refused config, changed address), or "
                                f"refuses the credentials in {WEB_PASSWORD}",
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
    ready = f"{scheme(mon.web_security)}://{address}/-/ready"
    if fetch(controller, ready, mon.web_security) is None:
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


# Status code of a GET without credentials (trusting the head's certificate), or the error.
UNAUTHENTICATED = ("import ssl, sys, urllib.error, urllib.request\n"
                   "context = ssl.create_default_context(cafile=sys.argv[2])\n"
                   "try:\n"
                   "    print(urllib.request.urlopen(sys.argv[1], timeout=10, "
                   "context=context).status)\n"
                   "except urllib.error.HTTPError as error:\n"
                   "    print(error.code)\n")


def test_web_credentials_private_and_required(controller: Host, site, mon, note: Note) -> None:
    """monitoring_web_security: the password, its hash and the key are root:prometheus 0640,
    and Prometheus and Alertmanager answer 401 to a request without credentials."""
    if not mon.web_security:
        pytest.skip("monitoring_web_security is False")
    head = site.spec.head[0]
    problems = []
    with controller.sudo():
        for path in (WEB_PASSWORD, WEB_PASSWORD_HASH, WEB_KEY, WEB_CONFIG):
            info = controller.file(path)
            if not info.exists or (info.mode, info.user, info.group) != (0o640, "root",
                                                                         "prometheus"):
                seen = (f"{oct(info.mode)} {info.user}:{info.group}" if info.exists
                        else "missing")
                problems.append(problem(head.name, f"{path} is {seen}, not 0640 "
                                        "root:prometheus", "changed by hand, or an older deploy",
                                        "deploy again (monitoring role)"))
    for port, what in ((mon.prometheus_port, "Prometheus"),
                       (mon.alertmanager_port, "Alertmanager")):
        url = f"https://{target(head, port)}/api/v1/status/buildinfo" if port == \
            mon.prometheus_port else f"https://{target(head, port)}/api/v2/status"
        answer = controller.run(" ".join(shlex.quote(p) for p in [
            "python3", "-c", UNAUTHENTICATED, url, WEB_CERT])).stdout.strip()
        note(f"{what.lower()}_unauthenticated", answer)
        if answer != "401":
            problems.append(problem(head.name, f"{what} answered {answer or 'nothing'} to a "
                                    f"request without credentials at {url}, not 401",
                                    "it does not serve web.yml (--web.config.file missing from "
                                    "its ARGS) or web.yml has no basic_auth_users",
                                    f"deploy again; `promtool check web-config {WEB_CONFIG}`"))
    if problems:
        fail(note, "\n".join(problems))


def test_node_exporters_require_credentials(controller: Host, site, mon, note: Note) -> None:
    """monitoring_node_exporter_web_security: every node's node_exporter answers 401, from the
    head, to a request without credentials (its certificate checked against the exporters' CA
    on the head)."""
    if not mon.node_exporter_web_security:
        pytest.skip("monitoring_node_exporter_web_security is False")
    problems, answers = [], {}
    for node in site.spec.nodes:
        url = f"https://{target(node, mon.node_exporter_port)}/metrics"
        answer = controller.run(" ".join(shlex.quote(p) for p in [
            "python3", "-c", UNAUTHENTICATED, url, EXPORTER_CA_CERT])).stdout.strip()
        answers[node.name] = answer
        if answer != "401":
            problems.append(problem(node.name, f"node_exporter answered {answer or 'nothing'} "
                                    f"to a request without credentials at {url}, not 401",
                                    "it does not serve its web.yml (--web.config.file, or "
                                    "--web.config before 1.5, missing from its ARGS), or its "
                                    "certificate is not the exporters' CA's",
                                    "deploy again (monitoring role) on that node"))
    note("node_exporter_unauthenticated", json.dumps(answers, sort_keys=True))
    if problems:
        fail(note, "\n".join(problems))
