"""Lab proof: the deploy and the verify suite reach the workers through the head as a bastion
(ProxyJump), from one ssh_config, and say which hop failed when the bastion is down.

    .venv/bin/python -m gpuinfra_lab.bastion [inventory/lab.py]

On a deployed lab it writes, under .lab/bastion/:

- ``ssh_config``: the lab's own (``Include .lab/ssh_config``: lab-head's entry, and ``Host
  lab-*``: root, the lab's key, host keys checked against .lab/known_hosts), then each worker
  under an alias, ``Host lab-worker1-via-head`` with its address as ``HostName`` and
  ``ProxyJump lab-head``;
- ``lab.py``: the inventory's hosts, each worker's ``ssh_hostname`` the alias and its
  ``ssh_config_file`` that file (its ``node_address`` kept, so the spec does not change); named
  lab.py so group_data/lab.py still applies.

Then, one line per step (exit 0 when every step held, 1 listing what did not):

1. the control: one direct connection (.lab/ssh_config, no jump) shows in lab-worker1's sshd
   log from the podman network's gateway, the address this machine's connections come from;
2. ``pyinfra .lab/bastion/lab.py exec --limit workers -- hostname``: each worker answers;
3. ``pytest gpuinfra_verify/test_common.py --inventory .lab/bastion/lab.py -k worker``: passes;
4. every connection each worker's sshd accepted during 2-3 came from the head's address, none
   from the gateway (its log read through podman, not over SSH), pyinfra's and the suite's;
5. red: with the head's sshd stopped, the suite through the bastion fails every worker test
   naming the inventory host, ``jump host lab-head (hop 1 of 1)``, the refusal and the fix, no
   traceback; the head's sshd is started again whatever happened.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from gpuinfra_lab.health_drain import lab_hosts
from gpuinfra_lab.podman import Podman
from gpuinfra_lab.refusal import REPO, lab_ssh
from gpuinfra_lab.state import Paths

TAG = "bastion"
ACCEPTED = re.compile(r"Accepted \S+ for \S+ from (\S+) port \d+")
INVENTORY = '''"""{inventory}, each worker reached through lab-head (gpuinfra_lab/bastion.py)."""

import importlib.util as _util

_spec = _util.spec_from_file_location("_gpuinfra_lab_inventory", {source!r})
_lab = _util.module_from_spec(_spec)
_spec.loader.exec_module(_lab)


def _via_head(name, data):
    return name, {{**data, "node_address": data.get("node_address") or data["ssh_hostname"],
                  "ssh_hostname": name + "-via-head", "ssh_config_file": {config!r}}}


head = _lab.head
workers = [_via_head(name, data) for name, data in _lab.workers]
hypervisors = _lab.hypervisors
'''


def alias(name: str) -> str:
    return f"{name}-via-head"


def write_variant(paths: Paths, inventory: str, head: str,
                  workers: dict[str, str]) -> tuple[Path, Path]:
    """.lab/bastion/ssh_config and .lab/bastion/lab.py (``workers``: name -> address)."""
    folder = paths.lab / "bastion"
    folder.mkdir(exist_ok=True)
    config = folder / "ssh_config"
    lines = ["# gpuinfra_lab/bastion.py: each worker through the head (ProxyJump).",
             f"Include {paths.ssh_config}", ""]
    for name, address in workers.items():
        lines += [f"Host {alias(name)}", f"    HostName {address}", f"    ProxyJump {head}", ""]
    config.write_text("\n".join(lines))
    variant = folder / "lab.py"
    variant.write_text(INVENTORY.format(inventory=inventory,
                                        source=str((REPO / inventory).resolve()),
                                        config=str(config)))
    return config, variant


def accepted_since(podman: Podman, host: str, since: str) -> list[str]:
    """The addresses sshd on ``host`` accepted a login from since ``since`` (epoch seconds),
    read through podman (not over SSH, which would add one)."""
    log = podman.exec(host, f"journalctl -u ssh --since @{since} -o cat --no-pager",
                      check=False)
    return ACCEPTED.findall(log)


def gateway(podman: Podman) -> str:
    info = json.loads(podman.run("network", "inspect", podman.network))[0]
    return next(s["gateway"] for s in info["subnets"] if "." in s["subnet"])


def suite(variant: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / ".venv" / "bin" / "pytest"), "gpuinfra_verify/test_common.py",
         "--inventory", str(variant), "-k", "worker", "-p", "no:cacheprovider", "-q", "-rA",
         "--tb=short"], cwd=REPO, capture_output=True, text=True, check=False, timeout=300)


class BastionProof:
    def __init__(self, inventory: str) -> None:
        self.inventory = inventory
        self.problems: list[str] = []

    def say(self, ok: bool, good: str, bad: str) -> None:
        print(f"{TAG}: {'ok' if ok else 'FAIL'}: {good if ok else bad}", flush=True)
        if not ok:
            self.problems.append(bad)

    def run(self) -> int:
        paths = Paths(REPO)
        podman = Podman(paths)
        hosts = lab_hosts()
        head = next(h for h in hosts if "head" in h["groups"])
        workers = {h["name"]: h["address"] for h in hosts
                   if "workers" in h["groups"] and not h.get("port")}  # containers only
        config, variant = write_variant(paths, self.inventory, head["name"], workers)
        gw = gateway(podman)
        print(f"{TAG}: {config}: {', '.join(alias(w) for w in workers)} -> ProxyJump "
              f"{head['name']} ({head['address']}); this machine is {gw} on the lab network",
              flush=True)
        first = next(iter(workers))

        # 1. the control: a direct connection is seen from the gateway
        since = podman.exec(first, "date +%s").strip()
        time.sleep(1)
        lab_ssh(first, "true")
        seen = accepted_since(podman, first, since)
        self.say(seen == [gw], f"control: a direct connection to {first} is logged from {gw}",
                 f"control: a direct connection to {first} was logged from {seen}, "
                 f"expected [{gw}]")

        # 2-4. pyinfra and the suite through the bastion. journalctl's --since counts whole
        # seconds: the control's own login must lie before the window, not in its first second
        # (CI once counted it: "lab-worker1 3 from [gateway, head]").
        time.sleep(2)
        since = {w: podman.exec(w, "date +%s").strip() for w in workers}
        time.sleep(1)
        started = time.monotonic()
        exec_run = subprocess.run(
            [str(REPO / ".venv" / "bin" / "pyinfra"), "-y", str(variant), "exec",
             "--limit", "workers", "--", "hostname"],
            cwd=REPO, capture_output=True, text=True, check=False, timeout=300)
        output = exec_run.stdout + exec_run.stderr
        answered = {w: m.group(1) for w in workers
                    if (m := re.search(rf"^\[{re.escape(w)}\] (\S+)\s*$", output, re.M))}
        # the command's output is the one unindented line per host (pyinfra's own are indented)
        self.say(exec_run.returncode == 0 and answered == {w: w for w in workers},
                 f"pyinfra exec through {head['name']}: "
                 + ", ".join(f"{w} answered `hostname` with {h}" for w, h in answered.items()),
                 f"pyinfra exec through {head['name']} exited {exec_run.returncode}, answered: "
                 f"{answered}: {output[-600:]}")
        run = suite(variant)
        summary = (run.stdout.strip().splitlines() or ["no output"])[-1]
        for line in run.stdout.splitlines():  # the suite's own account of its routes
            if line.startswith("reached through a proxy: "):
                print(f"{TAG}: {line}", flush=True)
        self.say(run.returncode == 0, f"verify suite through {head['name']}: {summary.strip('= ')}",
                 f"verify suite through {head['name']} exited {run.returncode}: "
                 f"{run.stdout[-1500:]}")
        took = time.monotonic() - started
        sources = {w: accepted_since(podman, w, since[w]) for w in workers}
        via_head = all(s and set(s) == {head["address"]} for s in sources.values())
        counts = ", ".join(f"{w} {len(s)} from {sorted(set(s))}" for w, s in sources.items())
        self.say(via_head and all(len(s) >= 2 for s in sources.values()),
                 f"every login the workers' sshd accepted came from the head ({head['address']}"
                 f"), none from {gw}: {counts} ({took:.1f} s)",
                 f"the workers' sshd accepted logins not (only) from the head "
                 f"{head['address']}: {counts}")

        # 5. red: the bastion's sshd down
        podman.exec(head["name"], "systemctl stop ssh")
        try:
            red = suite(variant)
        finally:
            podman.exec(head["name"], "systemctl start ssh")
        output = red.stdout + red.stderr
        failed = [line for line in output.splitlines()
                  if line.startswith(("FAILED", "ERROR")) and "[lab-worker" in line]
        passed = [line for line in output.splitlines() if line.startswith("PASSED")]
        said = re.search(r"(lab-worker\S+): cannot reach jump host lab-head \(hop 1 of 1\) "
                         r"\(ProxyJump of \S+ in \S+\): \S+ refused the connection", output)
        fix = "fix: start sshd on the jump host" in output
        self.say(red.returncode == 1 and failed and not passed and said is not None and fix
                 and "Traceback" not in output,
                 f"head's sshd stopped: {len(failed)} worker test(s) failed, each naming the "
                 f"hop: {said.group(0) if said else ''} ... start sshd on the jump host",
                 f"head's sshd stopped: pytest exited {red.returncode}, {len(failed)} failed, "
                 f"{len(passed)} passed, hop named: {said is not None}, fix: {fix}: "
                 f"{output[-1500:]}")
        back = podman.exec(head["name"], "systemctl is-active ssh", check=False).strip()
        self.say(back == "active", "head's sshd started again",
                 f"head's sshd is {back} after the proof: `systemctl start ssh` on it")
        for line in self.problems:
            print(f"{TAG}: {line}")
        return 1 if self.problems else 0


def main(argv: list[str]) -> int:
    return BastionProof(argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
