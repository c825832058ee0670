"""Lab proof: the head's Kubernetes GPU collector runs as its unit says, on real systemd.

    .venv/bin/python -m gpuinfra_lab.kubernetes_gpus [inventory/lab.py]

No kubelet or API server runs here (Kubernetes' repositories are out of reach), so the lab's
Debian 12 head gets what the monitoring role installs on a Kubernetes head, from the role's own
functions (roles/monitoring/kubernetes_metrics.py, gpuinfra.monitoring.units), and a kubectl
stand-in (this file only, never a role's) that prints a real-shaped node list
(tests/fixtures/kubectl/nodes-gpu-node-not-ready-CONSTRUCTED.json) and records who ran it, with
which --kubeconfig, whether it could read it, its capabilities and whether it could write
outside the textfile folder. Each step prints one line; exit 0 when
every step held, 1 listing what did not:

1. ``systemd-analyze verify`` accepts the units and the program accepts the expected file
   (``--check``, the role's gate); it refuses a broken one (exit 2);
2. ``systemctl start gpuinfra-kubernetes-nodes.service`` runs kubectl with the admin
   kubeconfig readable (root's 0600), no capability (CapEff 0) and /etc read-only;
3. the textfile holds gpu01 judged ok, gpu02 "no GPU is allocatable", gpu03 "not in the
   cluster", the query ok (KubernetesGpusMissing's series; its rule is promtool-tested).

Everything it installed is removed at the end, whatever happened.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from gpuinfra.kubernetes.kubeadm import ADMIN_CONF
from gpuinfra.monitoring.k8snodes import EXPECTED_PATH, LIB, PROM_NAME, UNITS
from gpuinfra.monitoring.units import (
    TEXTFILE_DIRECTORY,
    kubernetes_nodes_service,
    kubernetes_nodes_timer,
)
from gpuinfra_deploy.nodecode import ZIP_NAME, node_zip
from gpuinfra_deploy.templates import text
from gpuinfra_lab.refusal import REPO, lab_ssh
from gpuinfra_lab.steps import Steps

OUT = f"{TEXTFILE_DIRECTORY}/{PROM_NAME}"
# What the monitoring role installs (roles/monitoring/kubernetes_metrics.py): the program as
# it is in the tree, and the library zip.
FILES = {f"{LIB}/kubernetes_nodes.py": REPO / "roles" / "monitoring" / "kubernetes_nodes.py"}

TAG = "kubernetes-gpus"
NODES = REPO / "tests" / "fixtures" / "kubectl" / "nodes-gpu-node-not-ready-CONSTRUCTED.json"
WANTED = {"gpu01": {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 6,
                    "nvidia.com/mig-2g.20gb": 4},
          "gpu02": {"nvidia.com/gpu": 2}, "gpu03": {"nvidia.com/gpu": 8}}
STAND_IN = "/usr/local/bin/kubectl"
SEEN = "/run/gpuinfra-lab-kubectl"
KUBECTL = f"""#!/bin/sh
# kubectl stand-in of gpuinfra_lab/kubernetes_gpus.py (lab only): who ran it, with what.
config=""
while [ $# -gt 0 ]; do [ "$1" = --kubeconfig ] && config="$2"; shift; done
# The unit's file system is read-only but for the textfile folder: the record goes to the
# journal (tag gpuinfra-lab-kubectl).
readable=no; head -c1 "$config" >/dev/null 2>&1 && readable=yes
etc=read-only; touch /etc/gpuinfra-lab-kubectl 2>/dev/null && etc=writable
caps=$(awk '/^CapEff/ {{print $2}}' /proc/self/status)
logger -t gpuinfra-lab-kubectl "uid=$(id -u) config=$config readable=$readable caps=$caps etc=$etc"
cat {SEEN}/nodes.json
"""


def put(host: str, path: str, data: bytes, mode: str) -> None:
    """``data`` into ``path`` on ``host`` (on ssh's standard input: the zip is megabytes)."""
    quoted = shlex.quote(path)
    done = subprocess.run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), host,
                           f"install -d {shlex.quote(path.rsplit('/', 1)[0])} && (umask 077; "
                           f"cat > {quoted}) && chmod {mode} {quoted}"], input=data,
                          capture_output=True, check=False, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"{TAG}: cannot write {path} on {host}: "
                         f"{done.stderr.decode(errors='replace').strip()}")


class KubernetesGpus(Steps):
    def __init__(self, inventory: str) -> None:
        super().__init__(TAG, inventory)

    def run(self) -> int:
        service, timer = UNITS
        if self.sh("test -e /etc/kubernetes && echo yes") == "yes":
            print(f"{TAG}: /etc/kubernetes exists on the head: not a lab to test on")
            return 1
        try:
            self.install(service, timer)
            self.judge(service)
        finally:
            self.sh(f"systemctl stop {timer} {service} 2>/dev/null; rm -rf {LIB} {SEEN} "
                    f"{STAND_IN} {EXPECTED_PATH} {OUT} /etc/systemd/system/{service} "
                    f"/etc/systemd/system/{timer} /etc/kubernetes; systemctl daemon-reload")
        return self.end()

    def install(self, service: str, timer: str) -> None:
        for path, source in FILES.items():
            put(self.head, path, source.read_bytes(), "644")
        put(self.head, f"{LIB}/{ZIP_NAME}", node_zip(), "644")
        put(self.head, EXPECTED_PATH, json.dumps(WANTED).encode(), "644")
        put(self.head, ADMIN_CONF, b"apiVersion: v1\nkind: Config\n", "600")
        put(self.head, STAND_IN, KUBECTL.encode(), "755")
        self.sh(f"install -d -m 0755 {SEEN}")
        put(self.head, f"{SEEN}/nodes.json", NODES.read_bytes(), "644")
        put(self.head, f"/etc/systemd/system/{service}", text(kubernetes_nodes_service(
            LIB, OUT, TEXTFILE_DIRECTORY, EXPECTED_PATH, ADMIN_CONF)).encode(), "644")
        put(self.head, f"/etc/systemd/system/{timer}",
            text(kubernetes_nodes_timer()).encode(), "644")
        self.sh("systemctl daemon-reload")

    def judge(self, service: str) -> None:
        verify = lab_ssh(self.head, f"systemd-analyze verify /etc/systemd/system/{service}; "
                                    f"echo rc=$?")
        check = self.sh(f"python3 -I {LIB}/kubernetes_nodes.py --check --expected "
                        f"{EXPECTED_PATH}; echo rc=$?")
        broken = self.sh(f"echo '{{\"gpu01\": {{\"cpu\": 4}}}}' > /tmp/bad.json; python3 -I "
                         f"{LIB}/kubernetes_nodes.py --check --expected /tmp/bad.json 2>&1; "
                         f"echo rc=$?; rm -f /tmp/bad.json")
        self.say(verify.stdout.strip().endswith("rc=0") and check.endswith("rc=0")
                 and broken.endswith("rc=2") and "node 'gpu01'" in broken,
                 "systemd-analyze verify accepts the units; --check accepts the expected file "
                 "and refuses a broken one (exit 2)",
                 f"verify: {verify.stdout.strip()} {verify.stderr.strip()[-300:]}; check: "
                 f"{check}; broken: {broken}")
        started = lab_ssh(self.head, f"t=$(date +%s); sleep 1; systemctl start {service}; "
                                     "echo rc=$?; sleep 1; journalctl -t gpuinfra-lab-kubectl "
                                     "--since @$t -o cat --no-pager; "
                                     f"stat -c '%U %a' {ADMIN_CONF}")
        seen = dict(line.split("=", 1) for line in started.stdout.split()
                    if "=" in line and not line.startswith("rc"))
        self.say(started.stdout.startswith("rc=0") and seen.get("config") == ADMIN_CONF
                 and seen.get("readable") == "yes" and seen.get("caps") == "0000000000000000"
                 and seen.get("etc") == "read-only" and "root 600" in started.stdout,
                 f"the unit ran kubectl with {ADMIN_CONF} (root's 0600) readable, no "
                 "capability (CapEff 0), /etc read-only",
                 f"the unit's run: {started.stdout.strip()} "
                 f"{lab_ssh(self.head, f'journalctl -u {service} -n 5 -o cat').stdout.strip()}")
        prom = self.sh(f"cat {OUT}")
        want = ['gpuinfra_kubernetes_node_gpus_ok{node="gpu01",problem=""} 1',
                'gpuinfra_kubernetes_node_gpus_ok{node="gpu02",problem="no GPU is allocatable',
                'gpuinfra_kubernetes_node_gpus_ok{node="gpu03",problem="not in the cluster',
                "gpuinfra_kubernetes_nodes_query_ok 1"]
        self.say(all(w in prom for w in want), "the textfile judges gpu01 ok, gpu02 without "
                 "GPUs, gpu03 missing, the query ok", f"the textfile: {prom[:600]}")


def main(argv: list[str]) -> int:
    return KubernetesGpus(argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
