"""Lab proof: a deploy with a broken Prometheus configuration is refused, and Prometheus keeps
serving.

    .venv/bin/python -m gpuinfra_lab.bad_prometheus_conf [inventory/lab.py]

On a converged lab: records Prometheus' PID and the live prometheus.yml's SHA-256 on the head,
deploys the monitoring role with an extra scrape job whose timeout exceeds its interval (valid
data for the spec gate, refused by ``promtool check config``), and then requires: the deploy
failed, its output carries promtool's own error and gpuinfra's refusal, Prometheus is active
with the same PID (never restarted or reloaded into the bad file), the live prometheus.yml is
unchanged, and Prometheus still answers queries on the head's cluster address. Exit 0 when all
hold, 1 listing what did not (gpuinfra_lab/refusal.py).
"""

from __future__ import annotations

import json
import shlex
import sys

from gpuinfra.monitoring.web import WEB_CERT, WEB_PASSWORD, WEB_USER
from gpuinfra_lab.refusal import Refusal, head, on_head, prove

BAD_JOB = [{"job_name": "ipmi", "scrape_interval": "1m", "scrape_timeout": "2m",
            "static_configs": [{"targets": ["bmc01.lab.invalid:9290"]}]}]
BAD_DATA = f"monitoring_scrape_extra={json.dumps(BAD_JOB)}"
# Asks Prometheus' query API over HTTPS with the head's web credentials (monitoring_web_security,
# the lab's default), read on the head by the command itself: nothing secret on a command line.
QUERY = ("import base64, ssl, sys, urllib.request\n"
         "url, user, password_file, ca = sys.argv[1:5]\n"
         "token = base64.b64encode(f'{user}:{open(password_file).read().strip()}'.encode())\n"
         "request = urllib.request.Request(url, headers={'Authorization': 'Basic ' + "
         "token.decode()})\n"
         "r = urllib.request.urlopen(request, timeout=10, "
         "context=ssl.create_default_context(cafile=ca))\n"
         "print('answers' if b'\"success\"' in r.read() else 'no')")


def _prometheus(head: dict) -> dict[str, str]:
    name, url = head["name"], f"https://{head['address']}:9090/api/v1/query?query=up"
    ask = " ".join(shlex.quote(p) for p in ("python3", "-c", QUERY, url, WEB_USER, WEB_PASSWORD,
                                             WEB_CERT))
    return {
        "active": on_head(name, "systemctl is-active prometheus"),
        "pid": on_head(name, "systemctl show -p MainPID --value prometheus"),
        "conf": on_head(name, "sha256sum /etc/prometheus/prometheus.yml | cut -c1-16"),
        "answers": on_head(name, ask),
    }


def _proof(head_name: str) -> Refusal:
    return Refusal(
        tag="bad-prometheus-conf", daemon="Prometheus", conf="prometheus.yml",
        deploy=("roles/monitoring/deploy.py", "--limit", head_name, "--data", BAD_DATA),
        must_say=("scrape timeout greater than scrape interval",
                  "gpuinfra: promtool refused the new configuration"),
        probe=_prometheus, answered="queries answered",
        not_answered="Prometheus does not answer queries after the refused deploy")


if __name__ == "__main__":
    sys.exit(prove(_proof(head()["name"]), sys.argv[1:]))
