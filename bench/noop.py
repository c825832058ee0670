"""No-op rerun: gpuinfra's deploy on a converged lab against an Ansible playbook checking the
same state on the same hosts, in one run.

    .venv/bin/python -m bench.noop [--runs 5] [--no-setup]

Sets the lab up (`lab down`, `lab up`, deploy, `lab reboot`, deploy) unless --no-setup, then
times ``--runs`` no-op deploys (`pyinfra -y --json inventory/lab.py deploy.py`, which must
change nothing) and as many runs of an Ansible playbook generated from the lab's converged
state: for every host the same packages present (held ones at their versions), the same
managed files with their current content, owner and mode, the same services running and
enabled (or stopped), sysctls, groups, hostname and /etc/hosts block. Ansible runs with
pipelining and SSH ControlPersist (its fastest stock settings) and `-f` as many forks as hosts.
Prints the medians and their ratio, and how many SSH commands a pyinfra no-op sends.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from gpuinfra_deploy.ops.apt import LOCK_CONF
from gpuinfra_lab.state import Paths, find_repo
from gpuinfra_roles.common.defaults import DEFAULTS as COMMON
from gpuinfra_roles.munge import KEY, KEY_DIR
from gpuinfra_roles.nvidia_driver import PIN_FILE
from gpuinfra_roles.slurm import CGROUP_CONF, GRES_CONF, SLURM_CONF, SLURMDBD_CONF

SYSCTL_FILE = "/etc/sysctl.d/90-gpuinfra.conf"  # roles/common persists its sysctls here
REPO = find_repo()
BIN = REPO / ".venv" / "bin"
DRIVER_FILES = ("/etc/modprobe.d/blacklist-nouveau.conf",
                "/etc/modprobe.d/gpuinfra-nvidia-devices.conf",
                "/etc/udev/rules.d/70-gpuinfra-nvidia-devices.rules",
                "/etc/systemd/system/nvidia-persistenced.service.d/gpuinfra.conf", PIN_FILE)
SLURM_FILES = (SLURM_CONF, GRES_CONF, CGROUP_CONF)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, **kwargs)


def hosts_doc() -> dict:
    return json.loads((Paths(REPO).hosts_json).read_text())


def ssh(host: str, command: str) -> str:
    out = run(["ssh", "-F", str(Paths(REPO).ssh_config), host, command])
    return out.stdout


def setup() -> None:
    for step in (["gpuinfra", "lab", "down"], ["gpuinfra", "lab", "up"],
                 ["pyinfra", "-y", "inventory/lab.py", "deploy.py"],
                 ["gpuinfra", "lab", "reboot"], ["pyinfra", "-y", "inventory/lab.py", "deploy.py"]):
        done = run([str(BIN / step[0]), *step[1:]])
        if done.returncode != 0:
            raise SystemExit(f"setup step {' '.join(step)} failed:\n{done.stderr[-2000:]}")


def time_pyinfra(runs: int) -> tuple[list[float], int]:
    times, ops = [], 0
    for _ in range(runs):
        start = time.monotonic()
        done = run([str(BIN / "pyinfra"), "-y", "--json", "inventory/lab.py", "deploy.py"])
        times.append(time.monotonic() - start)
        results = json.loads(done.stdout)["results"]
        if results["totals"].get("success"):
            raise SystemExit(f"the no-op deploy changed {results['totals']['success']} ops")
        ops = results["totals"].get("no_change", 0)
    return times, ops


# ------------------------------------------------------------------------------ the playbook

def _file_task(host: str, path: str) -> dict | None:
    stat = ssh(host, f"stat -c '%U %G %a' {shlex.quote(path)} 2>/dev/null").split()
    if len(stat) != 3:
        return None
    content = ssh(host, f"cat {shlex.quote(path)}")
    return {"name": f"{path}", "ansible.builtin.copy": {
        "dest": path, "content": content, "owner": stat[0], "group": stat[1],
        "mode": stat[2].rjust(4, "0")}}


def host_tasks(host: str, groups: list[str]) -> list[dict]:
    """Tasks asserting the state gpuinfra's deploy leaves on ``host`` (the lab site)."""
    worker = "workers" in groups
    tasks: list[dict] = [
        {"name": "hostname", "ansible.builtin.hostname": {"name": host, "use": "systemd"}},
        {"name": "base packages", "ansible.builtin.apt": {
            "name": COMMON["common_packages"], "state": "present", "install_recommends": False}},
        {"name": "no apt proxy", "ansible.builtin.file": {
            "path": "/etc/apt/apt.conf.d/95gpuinfra-proxy", "state": "absent"}},
        {"name": "chrony", "ansible.builtin.systemd": {
            "name": "chrony", "state": "started", "enabled": True}},
        {"name": "admin group", "ansible.builtin.group": {
            "name": COMMON["common_admin_group"], "system": True}},
        {"name": "munge", "ansible.builtin.apt": {"name": "munge", "state": "present"}},
        {"name": "munge dir", "ansible.builtin.file": {
            "path": KEY_DIR, "state": "directory", "owner": "munge", "group": "munge",
            "mode": "0700"}},
        {"name": "munge key", "ansible.builtin.file": {
            "path": KEY, "owner": "munge", "group": "munge", "mode": "0400"}},
        {"name": "munged", "ansible.builtin.systemd": {
            "name": "munge", "state": "started", "enabled": True}},
        {"name": "slurm packages", "ansible.builtin.apt": {
            "name": (["slurmctld", "slurm-client", "slurmd"] if not worker
                     else ["slurmd", "slurm-client"]), "state": "present"}},
    ]
    for key, value in COMMON["common_sysctls"].items():
        # ansible.posix.sysctl is not in ansible-core (no Galaxy here): the live value is read
        # and compared; the file itself is one of the managed files below.
        tasks.append({"name": key, "ansible.builtin.command": {"argv": ["sysctl", "-n", key]},
                      "register": "live", "changed_when": False,
                      "failed_when": f"live.stdout != {str(value)!r}"})
    block = ssh(host, "sed -n '/# BEGIN gpuinfra cluster nodes/,/# END gpuinfra cluster "
                      "nodes/p' /etc/hosts | sed '1d;$d'")
    tasks.append({"name": "/etc/hosts", "ansible.builtin.blockinfile": {
        "path": "/etc/hosts", "block": block.rstrip("\n"),
        "marker": "# {mark} gpuinfra cluster nodes"}})
    paths = [LOCK_CONF, SYSCTL_FILE, *SLURM_FILES]
    if worker:
        paths += DRIVER_FILES
        held = ssh(host, "apt-mark showhold").split()
        versions = dict(line.split("\t") for line in ssh(
            host, "dpkg-query -W -f '${Package}\\t${Version}\\n' " + " ".join(held)).splitlines())
        tasks.append({"name": "driver packages", "ansible.builtin.apt": {
            "name": [f"{p}={v}" for p, v in versions.items()], "state": "present"}})
        tasks += [{"name": f"hold {p}", "ansible.builtin.dpkg_selections": {
            "name": p, "selection": "hold"}} for p in held]
        tasks.append({"name": "slurmd", "ansible.builtin.systemd": {
            "name": "slurmd", "state": "started", "enabled": True}})
    else:
        paths.append(SLURMDBD_CONF)
        tasks += [{"name": "mariadb, slurmdbd", "ansible.builtin.apt": {
                      "name": ["slurmdbd", "mariadb-server"], "state": "present"}},
                  {"name": "slurmctld", "ansible.builtin.systemd": {
                      "name": "slurmctld", "state": "started", "enabled": True}},
                  {"name": "mariadb", "ansible.builtin.systemd": {
                      "name": "mariadb", "state": "started", "enabled": True}},
                  {"name": "slurmdbd", "ansible.builtin.systemd": {
                      "name": "slurmdbd", "state": "started", "enabled": True}},
                  {"name": "slurmd off", "ansible.builtin.systemd": {
                      "name": "slurmd", "state": "stopped", "enabled": False}}]
    tasks += [t for t in (_file_task(host, p) for p in paths) if t]
    return tasks


def write_ansible(folder: Path) -> tuple[Path, Path, int]:
    doc = hosts_doc()
    lines = ["[lab]"]
    plays = []
    tasks_total = 0
    for h in doc["hosts"]:
        lines.append(f"{h['name']} ansible_host={h['address']} ansible_user=root "
                     f"ansible_ssh_private_key_file={doc['ssh_key']}")
        tasks = host_tasks(h["name"], h["groups"])
        tasks_total += len(tasks)
        plays.append({"name": h["name"], "hosts": h["name"], "gather_facts": False,
                      "tasks": tasks})
    inventory = folder / "inventory.ini"
    inventory.write_text("\n".join(lines) + "\n")
    playbook = folder / "noop.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False, width=1000))
    return inventory, playbook, tasks_total


def time_ansible(folder: Path, runs: int) -> list[float]:
    return [wall for wall, _ in ansible_runs(folder, runs)]


def ansible_runs(folder: Path, runs: int) -> list[tuple[float, float]]:
    """The playbook over every lab host, with its users' settings for this size: wall and
    controller CPU seconds of ``runs`` runs after a warm-up run (run_ansible)."""
    return run_ansible(*ansible_setup(folder), runs)


def ansible_setup(folder: Path) -> tuple[Path, Path, dict[str, str]]:
    """The inventory, the playbook and the environment (forks = hosts, pipelining,
    ControlPersist: its fastest stock settings) of the Ansible no-op, written in ``folder``."""
    inventory, playbook, _ = write_ansible(folder)
    env = {**os.environ, "ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_PIPELINING": "True",
           "ANSIBLE_HOME": str(folder / "home"), "ANSIBLE_LOCAL_TEMP": str(folder / "tmp"),
           "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=60s "
                               "-o UserKnownHostsFile=/dev/null",
           "ANSIBLE_FORKS": str(len(hosts_doc()["hosts"])), "PATH": f"{BIN}:{os.environ['PATH']}"}
    return inventory, playbook, env


def run_ansible(inventory: Path, playbook: Path, env: dict[str, str], runs: int,
                warm_up: bool = True) -> list[tuple[float, float]]:
    """Wall seconds and the controller's CPU seconds (ansible-playbook and every process it
    waited for: its forks, their ssh clients; not the ControlPersist masters, which outlive
    it) of each of ``runs`` runs, after a warm-up run (the control sockets) unless told."""
    figures = []
    for _ in range(runs + (1 if warm_up else 0)):
        cpu = _children_cpu()
        start = time.monotonic()
        done = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory),
                               str(playbook)], cwd=inventory.parent, capture_output=True,
                              text=True, env=env)
        elapsed = time.monotonic() - start
        if done.returncode != 0 or "changed=0" not in done.stdout:
            raise SystemExit(f"the Ansible playbook did not find the same state:\n"
                             f"{done.stdout[-3000:]}{done.stderr[-2000:]}")
        figures.append((elapsed, _children_cpu() - cpu))
    return figures[1:] if warm_up else figures


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.noop")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-setup", action="store_true")
    args = parser.parse_args(argv)
    if not args.no_setup:
        setup()
    ours, ops = time_pyinfra(args.runs)
    with tempfile.TemporaryDirectory(prefix="gpuinfra-bench-") as tmp:
        theirs = time_ansible(Path(tmp), args.runs)
        tasks = write_ansible(Path(tmp))[2]
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"gpuinfra no-op: median {a:.2f} s of {args.runs} ({ops} host-operations, 0 changed; "
          f"runs {', '.join(f'{t:.2f}' for t in ours)})")
    print(f"Ansible, same state: median {b:.2f} s of {args.runs} ({tasks} tasks; runs "
          f"{', '.join(f'{t:.2f}' for t in theirs)})")
    print(f"ratio: Ansible / gpuinfra = {b / a:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
