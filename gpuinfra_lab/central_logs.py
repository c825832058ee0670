"""Lab proof: every worker's journal reaches the head, once, and only from the cluster's nodes.

    .venv/bin/python -m gpuinfra_lab.central_logs [inventory/lab.py]

On a deployed lab (the logs role: roles/logs), each step prints one line; exit 0 when
every step held, 1 listing what did not, each naming its node:

1. the TLS files: on the head the CA's key, the receiver's key and each node's client key
   root:root 0600; on each worker its key root:gpuinfra-logs-upload 0640, its certificate and
   the CA's root 0644;
2. on each worker a unique line (``logger -t gpuinfra-proof <uuid>``) is on the head within
   30 s, exactly once, found with the documented query (``journalctl --directory
   /var/log/journal/remote _HOSTNAME=<worker>``);
3. the head's receiver stopped (stunnel and journal-remote), a line logged on lab-worker2 is
   not on the head; the receiver started again, the line arrives, exactly once (the uploader
   resumes from its saved cursor);
4. the head's metric of each worker's newest entry there (what the NodeLogsStale alert
   reads: gpuinfra.logs.journal.age_script) is under 3 minutes old;
5. from lab-worker2, a throwaway self-signed certificate (made in a private ``mktemp -d``
   folder, removed afterwards) is refused by the head's TLS, while the worker's own
   certificate is answered ``202 Accepted``.
"""

from __future__ import annotations

import shlex
import sys
import time
import uuid
from collections.abc import Mapping

from gpuinfra.logs.journal import (
    AGE_FILE,
    AGE_METRIC,
    CA_CERT,
    CA_KEY,
    CLIENT_CERT,
    CLIENT_KEY,
    DEFAULT_PORT,
    REMOTE_DIR,
    REMOTE_SERVICE,
    REMOTE_SOCKET,
    SERVER_KEY,
    TLS_DIR,
    TUNNEL_SERVICE,
    UPLOAD_GROUP,
    node_dir,
)
from gpuinfra.monitoring.units import TEXTFILE_DIRECTORY
from gpuinfra_lab.health_drain import lab_hosts
from gpuinfra_lab.oci_jobs import lab_setting
from gpuinfra_lab.refusal import lab_ssh
from gpuinfra_lab.steps import Steps

TAG = "central-logs"
IDENTIFIER = "gpuinfra-proof"
ARRIVAL_S = 30.0
RESUME_S = 45.0  # the uploader retries every 10 s (gpuinfra.logs.journal.UPLOAD_RESTART_SEC)
WORKER = "lab-worker2"
RECEIVER_UNITS = f"{TUNNEL_SERVICE} {REMOTE_SERVICE} {REMOTE_SOCKET}"


def mode_problems(seen: Mapping[str, str], want: Mapping[str, str]) -> list[str]:
    """Each file of ``want`` (path -> ``owner:group mode``) whose ``seen`` line differs."""
    return [f"{path} is {seen.get(path, 'missing')}, not {expected}"
            for path, expected in want.items() if seen.get(path) != expected]


def stat_modes(host: str, paths: list[str]) -> dict[str, str]:
    out = lab_ssh(host, "stat -c '%n %U:%G %a' " + " ".join(shlex.quote(p) for p in paths))
    return {parts[0]: f"{parts[1]} {parts[2]}" for parts in
            (line.split() for line in out.stdout.splitlines()) if len(parts) == 3}


def arrival_problem(node: str, line: str, count: int, waited: float | None) -> str | None:
    """What is wrong with ``line``'s arrival from ``node``: ``count`` copies on the head after
    ``waited`` seconds (None: it never came)."""
    if waited is None or count == 0:
        return f"{node}: its line {line} did not reach the head in {ARRIVAL_S:.0f} s"
    if count != 1:
        return f"{node}: its line {line} is on the head {count} times, not once"
    return None


def metric_problems(text: str, workers: list[str], limit_s: int = 180) -> list[str]:
    """What is wrong with the head's metric file (``text``, then the head's ``date +%s``):
    a worker missing, or its newest entry older than ``limit_s``."""
    lines = text.strip().splitlines()
    if not lines or not lines[-1].isdigit():
        return [f"no {AGE_FILE} on the head"]
    now = int(lines[-1])
    seen = {}
    for line in lines[:-1]:
        for worker in workers:
            if line.startswith(f'{AGE_METRIC}{{node="{worker}"}} '):
                seen[worker] = int(float(line.split()[-1]))
    return [f"{w}: not in {AGE_FILE}" if w not in seen else
            f"{w}: its newest entry on the head is {now - seen[w]} s old"
            for w in workers if w not in seen or now - seen[w] > limit_s]


def count_on_head(head: str, node: str, line: str) -> int:
    query = (f"journalctl --directory {REMOTE_DIR} _HOSTNAME={shlex.quote(node)} "
             f"SYSLOG_IDENTIFIER={IDENTIFIER} -o cat --no-pager")
    out = lab_ssh(head, query).stdout
    return sum(1 for text in out.splitlines() if text.strip() == line)


def wait_for(head: str, node: str, line: str, timeout: float) -> float | None:
    """Seconds until ``line`` from ``node`` is on the head (None: not within ``timeout``)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if count_on_head(head, node, line):
            return time.monotonic() - start
        time.sleep(0.5)
    return None


def log_line(node: str) -> str:
    line = f"{IDENTIFIER}-{uuid.uuid4()}"
    lab_ssh(node, f"logger -t {IDENTIFIER} {line}")
    return line


# The worker's side of step 4: one POST to the receiver's /upload through TLS with the given
# certificate and key, the answer's status line printed (nothing when TLS refused).
POST = ("printf 'POST /upload HTTP/1.1\\r\\nHost: logs\\r\\nContent-Type: "
        "application/vnd.fdo.journal\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n'")


def tls_post(address: str, port: int, cert: str, key: str) -> str:
    return (f"({POST}; sleep 2) | timeout 15 openssl s_client -quiet -connect {address}:{port} "
            f"-cert {cert} -key {key} -CAfile {CA_CERT} 2>/dev/null | head -n 1")


class CentralLogsProof(Steps):
    def run(self) -> int:
        hosts = lab_hosts()
        workers = [h["name"] for h in hosts if "workers" in h["groups"]]
        # The address the receiver's certificate names (the role keeps it beside it).
        head_address = lab_ssh(self.head, f"cat {TLS_DIR}/server.address").stdout.strip()
        self.files(workers)
        for worker in workers:
            line = log_line(worker)
            waited = wait_for(self.head, worker, line, ARRIVAL_S)
            problem = arrival_problem(worker, line, count_on_head(self.head, worker, line),
                                      waited)
            self.say(problem is None, f"{worker}: its line on the head in {waited or 0:.1f} s, "
                                      "once", problem or "")
        if lab_setting("monitoring_enabled") is not False:  # the metric is monitoring's
            self.freshness(workers)
        self.restart(WORKER)
        self.foreign(WORKER, head_address)
        return self.end()

    def files(self, workers: list[str]) -> None:
        head_want = {CA_KEY: "root:root 600", SERVER_KEY: "root:root 600",
                     **{f"{node_dir(w)}/client.key": "root:root 600" for w in workers}}
        bad = mode_problems(stat_modes(self.head, list(head_want)), head_want)
        self.say(not bad, f"{self.head}: the CA's, the receiver's and every node's key root "
                          "0600", f"{self.head}: {'; '.join(bad)}")
        want = {CLIENT_KEY: f"root:{UPLOAD_GROUP} 640", CLIENT_CERT: "root:root 644",
                CA_CERT: "root:root 644"}
        for worker in workers:
            bad = mode_problems(stat_modes(worker, list(want)), want)
            self.say(not bad, f"{worker}: its key root:{UPLOAD_GROUP} 0640, certificates 0644",
                     f"{worker}: {'; '.join(bad)}")

    def freshness(self, workers: list[str]) -> None:
        out = lab_ssh(self.head, f"cat {TEXTFILE_DIRECTORY}/{AGE_FILE}; date +%s").stdout
        bad = metric_problems(out, workers)
        self.say(not bad, f"{self.head}: {AGE_METRIC} names every worker, each newest entry "
                          "under 3 minutes old", f"{self.head}: {'; '.join(bad)}")

    def restart(self, worker: str) -> None:
        lab_ssh(self.head, f"systemctl stop {RECEIVER_UNITS}")
        line = log_line(worker)
        time.sleep(3)
        early = count_on_head(self.head, worker, line)
        lab_ssh(self.head, f"systemctl start {REMOTE_SOCKET} {TUNNEL_SERVICE}")
        waited = wait_for(self.head, worker, line, RESUME_S)
        time.sleep(3)  # a duplicate would come with the same upload
        count = count_on_head(self.head, worker, line)
        problem = (f"{worker}: its line {line} reached the head while the receiver was stopped"
                   if early else arrival_problem(worker, line, count, waited))
        self.say(problem is None, f"{worker}: a line logged while the head's receiver was "
                                  f"stopped arrived {waited or 0:.1f} s after its restart, once",
                 problem or "")

    def foreign(self, worker: str, address: str) -> None:
        port = int(str(lab_setting("logs_port") or DEFAULT_PORT))
        command = (
            "set -u; d=$(mktemp -d) && cd \"$d\" && "
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
            "-keyout k -out c -days 1 -subj /CN=" + shlex.quote(worker) + " 2>/dev/null && "
            "echo \"foreign: $(" + tls_post(address, port, "c", "k") + ")\"; "
            "echo \"own: $(" + tls_post(address, port, CLIENT_CERT, CLIENT_KEY) + ")\"; "
            "cd / && rm -rf \"$d\"")
        out = lab_ssh(worker, command, timeout=60).stdout
        answers = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        foreign, own = answers.get("foreign", "?").strip(), answers.get("own", "?").strip()
        ok = not foreign.startswith("HTTP/") and " 202 " in f"{own} "
        self.say(ok, f"{worker}: a self-signed certificate refused by the head's TLS, its own "
                     f"answered ({own})",
                 f"{worker}: with a foreign certificate the head answered {foreign!r}, with "
                 f"its own {own!r}")


def main(argv: list[str]) -> int:
    return CentralLogsProof(TAG, argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
