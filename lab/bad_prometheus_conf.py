"""Lab proof: a deploy with a broken Prometheus configuration is refused, and Prometheus keeps
serving.

    .venv/bin/python -m lab.bad_prometheus_conf [inventory/lab.py]

On a converged lab: records Prometheus' PID and the live prometheus.yml's SHA-256 on the head,
deploys the monitoring role with an extra scrape job whose timeout exceeds its interval (valid
data for the spec gate, refused by ``promtool check config``), and then requires: the deploy
failed, its output carries promtool's own error and gpuinfra's refusal, Prometheus is active
with the same PID (never restarted or reloaded into the bad file), the live prometheus.yml is
unchanged, and Prometheus still answers queries on the head's cluster address. Exit 0 when all
hold, 1 listing what did not.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BAD_JOB = [{"job_name": "ipmi", "scrape_interval": "1m", "scrape_timeout": "2m",
            "static_configs": [{"targets": ["bmc01.lab.invalid:9290"]}]}]
BAD_DATA = f"monitoring_scrape_extra={json.dumps(BAD_JOB)}"
MUST_SAY = ("scrape timeout greater than scrape interval",
            "gpuinfra: promtool refused the new configuration")
QUERY = ("import sys, urllib.request; r = urllib.request.urlopen(sys.argv[1], timeout=10); "
         "print('answers' if b'\"success\"' in r.read() else 'no')")


def _head() -> dict:
    lab = json.loads((REPO / ".lab" / "hosts.json").read_text())
    return next(h for h in lab["hosts"] if "head" in h["groups"])


def _on_head(head: str, command: str) -> str:
    run = subprocess.run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), head, command],
                         capture_output=True, text=True, check=False, timeout=60)
    return run.stdout.strip()


def _prometheus(head: dict) -> dict[str, str]:
    url = f"http://{head['address']}:9090/api/v1/query?query=up"
    return {
        "active": _on_head(head["name"], "systemctl is-active prometheus"),
        "pid": _on_head(head["name"], "systemctl show -p MainPID --value prometheus"),
        "conf": _on_head(head["name"], "sha256sum /etc/prometheus/prometheus.yml | cut -c1-16"),
        "query": _on_head(head["name"], f"python3 -c {shlex.quote(QUERY)} {shlex.quote(url)}"),
    }


def main(argv: list[str]) -> int:
    inventory = argv[0] if argv else "inventory/lab.py"
    head = _head()
    before = _prometheus(head)
    deploy = subprocess.run([str(REPO / ".venv" / "bin" / "pyinfra"), "-y", inventory,
                             "roles/monitoring/deploy.py", "--limit", head["name"], "--data",
                             BAD_DATA], cwd=REPO, capture_output=True, text=True, check=False,
                            timeout=600)
    output = deploy.stdout + deploy.stderr
    after = _prometheus(head)
    problems = []
    if deploy.returncode == 0:
        problems.append("the deploy with a broken prometheus.yml succeeded")
    problems += [f"the deploy output does not say {words!r}" for words in MUST_SAY
                 if words not in output]
    if before["active"] != "active" or before["query"] != "answers":
        problems.append(f"Prometheus was {before['active']!r} before the test: converge first")
    for key, what in (("active", "Prometheus state"), ("pid", "Prometheus PID"),
                      ("conf", "live prometheus.yml")):
        if after[key] != before[key]:
            problems.append(f"{what} changed: {before[key]!r} -> {after[key]!r}")
    if after["query"] != "answers":
        problems.append("Prometheus does not answer queries after the refused deploy")
    for line in problems:
        print(f"bad-prometheus-conf: {line}")
    if problems:
        print("\n".join(output.splitlines()[-30:]))
        return 1
    refused = next(line.strip() for line in output.splitlines() if MUST_SAY[0] in line)
    print(f"bad-prometheus-conf: refused ({refused[:120]}); Prometheus {after['active']}, PID "
          f"{after['pid']} unchanged, prometheus.yml {after['conf']} unchanged, queries answered")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
