"""Lab proof: Prometheus and Alertmanager refuse a worker that has no credentials, answer one
that has them, and Prometheus still scrapes every target; with
monitoring_node_exporter_web_security on (the lab's group_data), every other node's node_exporter
refuses that worker the same way.

    .venv/bin/python -m gpuinfra_lab.monitoring_auth [inventory/lab.py]

On a converged lab (monitoring_web_security on, the default): reads the head's certificate
and web password (this process's memory only: never printed, never on a command line; they go
to the worker on a command's standard input), then from a worker asks Prometheus' query API and
Alertmanager's silences API on the head's cluster address, each four ways: over plain HTTP, over
HTTPS without credentials, with a wrong password, with the right one. Requires: the first three
refused (HTTP 400 or 401, or no answer), the last one answered (200). With the node_exporter knob
on, the same four ways against node_exporter's /metrics on every other node (the exporters' CA and
password, read from the head the same way). Then every active target of
Prometheus ``up``, asked with the credentials (waiting up to WAIT_S for a fresh lab). Exit 0
when all hold, 1 naming each request that was answered when it should not be, and each target
down.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

from gpuinfra.monitoring.scrape import target
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.monitoring.web import (
    EXPORTER_CA_CERT,
    EXPORTER_PASSWORD,
    EXPORTER_USER,
    WEB_CERT,
    WEB_PASSWORD,
    WEB_USER,
)
from gpuinfra_deploy.run.inventory import load_hosts
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_lab.refusal import REPO, head, lab_ssh

WAIT_S = 120
TAG = "monitoring-auth"
# Run on the worker by python3 -I, its input a JSON object on stdin: {"requests": [[name,
# url, user or null, password or null, CA name]], "cas": {CA name: PEM}}. Prints {name:
# status} (0: no answer).
ASK = r"""
import base64, json, ssl, sys, urllib.error, urllib.request
job = json.load(sys.stdin)
contexts = {name: ssl.create_default_context(cadata=pem) for name, pem in job["cas"].items()}
out = {}
for name, url, user, password, ca in job["requests"]:
    context = contexts[ca]
    headers = {}
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = "Basic " + token
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            body = answer.read().decode()
            out[name] = [answer.status, body if name == "targets" else ""]
    except urllib.error.HTTPError as error:
        out[name] = [error.code, ""]
    except (OSError, ValueError) as error:
        out[name] = [0, str(error)[:200]]
print(json.dumps(out))
"""


def _lab_hosts() -> list[dict]:
    return json.loads((REPO / ".lab" / "hosts.json").read_text())["hosts"]


def _worker() -> str:
    return next(h["name"] for h in _lab_hosts() if "head" not in h["groups"])


def _secured_node_exporters(inventory: str) -> dict[str, str]:
    """Node name -> ``address:port`` of every node's node_exporter serving its web config
    (none when the site's monitoring_node_exporter_web_security is off)."""
    hosts, duplicates = load_hosts(str(REPO / inventory))
    spec = build_spec(hosts, duplicates)
    mon = Monitoring.from_settings(spec.head[0].settings)
    if not mon.node_exporter_web_security:
        return {}
    return {node.name: target(node, mon.node_exporter_port) for node in spec.nodes}


def _ask(worker: str, requests: list[list], cas: dict[str, str]) -> dict[str, list]:
    run = subprocess.run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), worker,
                          f"python3 -I -c {shlex.quote(ASK)}"],
                         input=json.dumps({"requests": requests, "cas": cas}),
                         capture_output=True, text=True, check=False, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"{worker}: the requests did not run: {run.stderr.strip()[-300:]}")
    return json.loads(run.stdout)


def main(argv: list[str]) -> int:
    lab_head = head()
    worker = _worker()
    address = lab_head["address"]
    ca = lab_ssh(lab_head["name"], f"cat {WEB_CERT}").stdout
    password = lab_ssh(lab_head["name"], f"cat {WEB_PASSWORD}").stdout.strip()
    if "BEGIN CERTIFICATE" not in ca or not password:
        print(f"{TAG}: FAIL: {lab_head['name']} has no {WEB_CERT} or {WEB_PASSWORD}: is "
              "monitoring_web_security on and the lab converged?")
        return 1
    apis = {"Prometheus": f"{address}:9090/api/v1/query?query=up",
            "Alertmanager": f"{address}:9093/api/v2/silences"}
    cas = {"web": ca}
    # Each daemon: (path, user, password, CA name).
    daemons = {name: (path, WEB_USER, password, "web") for name, path in apis.items()}
    exporters = _secured_node_exporters(argv[0] if argv else "inventory/lab.py")
    if exporters:
        cas["exporters"] = lab_ssh(lab_head["name"], f"cat {EXPORTER_CA_CERT}").stdout
        scrape = lab_ssh(lab_head["name"], f"cat {EXPORTER_PASSWORD}").stdout.strip()
        if "BEGIN CERTIFICATE" not in cas["exporters"] or not scrape:
            print(f"{TAG}: FAIL: {lab_head['name']} has no {EXPORTER_CA_CERT} or "
                  f"{EXPORTER_PASSWORD}: monitoring_node_exporter_web_security is on; is the "
                  "lab converged?")
            return 1
        for other, other_address in exporters.items():
            if other != worker:
                daemons[f"node_exporter of {other}"] = (
                    f"{other_address}/metrics", EXPORTER_USER, scrape, "exporters")
    requests, refused, answered = [], [], []
    for daemon, (path, login, secret_of, ca_name) in daemons.items():
        ways = {f"{daemon} over plain HTTP": (f"http://{path}", None, None),
                f"{daemon} without credentials": (f"https://{path}", None, None),
                f"{daemon} with a wrong password": (f"https://{path}", login, "wrong"),
                f"{daemon} with the credentials": (f"https://{path}", login, secret_of)}
        for name, (url, user, secret) in ways.items():
            requests.append([name, url, user, secret, ca_name])
            (answered if secret == secret_of else refused).append(name)
    seen = _ask(worker, requests, cas)
    problems = [f"{name}: answered {seen[name][0]} from {worker}, not refused"
                for name in refused if seen[name][0] == 200]
    problems += [f"{name}: {seen[name][0] or seen[name][1]} from {worker}, not 200"
                 for name in answered if seen[name][0] != 200]
    targets_url = f"https://{address}:9090/api/v1/targets"
    deadline = time.monotonic() + WAIT_S
    while True:
        status, body = _ask(worker, [["targets", targets_url, WEB_USER, password, "web"]],
                            cas)["targets"]
        active = json.loads(body)["data"]["activeTargets"] if status == 200 else []
        down = [f"{t['labels'].get('job')}/{t['labels'].get('instance')}: {t['health']} "
                f"{t.get('lastError', '')}".strip() for t in active if t["health"] != "up"]
        if (active and not down) or time.monotonic() > deadline:
            break
        time.sleep(5)
    if not active:
        problems.append(f"Prometheus' targets could not be read with the credentials "
                        f"({status})")
    problems += [f"target not up: {line}" for line in down]
    for line in problems:
        print(f"{TAG}: FAIL: {line}")
    if problems:
        return 1
    codes = ", ".join(f"{name} {seen[name][0] or 'no answer'}" for name in refused)
    print(f"{TAG}: from {worker}: refused ({codes}); answered with the credentials "
          f"({', '.join(daemons)}: 200); all {len(active)} targets up")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
