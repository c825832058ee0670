"""Lab proof: with sudo as a non-root SSH user, the MUNGE key is never readable by another user.

    .venv/bin/python -m gpuinfra_lab.munge_sudo [inventory/lab.py]

On a converged lab: creates the SSH user ``gpuinfra-deploy`` (the lab's key, passwordless
sudo) on every host, starts a watcher as ``nobody`` on every host (it reads every file it can
in /tmp, /var/tmp, /dev/shm and the deploy user's home, in a tight loop, recording each
file's SHA-256), then runs the munge role as that user with ``--sudo`` and a new
``munge_key_rotation`` (so the head makes a new key and every node copies it). It then
requires: the run succeeded, every node holds the head's new key, and no watcher ever read a
file whose content was the key. Exit 0 when all hold, 1 naming the host and path of each
exposure (what pyinfra's sudo file transfer did: /tmp/pyinfra-*).

Then, as the same user (``GPUINFRA_LAB_SSH_USER``, read by inventory/lab.py): `gpuinfra roll
--limit <last worker> --sudo` drains it, deploys with pyinfra's --sudo, judges and resumes it
(exit 0), `gpuinfra health breaker --sudo` reads Slurm on the head (exit 0) and `gpuinfra
report --sudo` passes; the same roll without --sudo is refused before any node is touched
(exit 2: it cannot write its state on the head, and says to add --sudo), the node left in
service, and the report without it fails on the one cause that names --sudo. The user and the
watchers are removed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
USER = "gpuinfra-deploy"
WATCH_LOG = "/run/gpuinfra-key-watch/seen"
PYINFRA_TIMEOUT_S = 300
WATCHER = r"""
import hashlib, os, sys, time
roots = ["/tmp", "/var/tmp", "/dev/shm", "/home/USER"]
seen = set()
out = open(sys.argv[1], "a", buffering=1)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    with open(path, "rb") as handle:
                        digest = hashlib.sha256(handle.read(1 << 16)).hexdigest()
                except OSError:
                    continue
                if (path, digest) not in seen:
                    seen.add((path, digest))
                    out.write(f"{digest} {path}\n")
""".replace("USER", USER)

SETUP = f"""set -e
id -u {USER} >/dev/null 2>&1 || useradd --create-home --shell /bin/sh {USER}
install -d -m 0700 -o {USER} -g {USER} /home/{USER}/.ssh
install -m 0600 -o {USER} -g {USER} /root/.ssh/authorized_keys /home/{USER}/.ssh/
printf '%s ALL=(ALL) NOPASSWD:ALL\\n' {USER} > /etc/sudoers.d/{USER}
chmod 0440 /etc/sudoers.d/{USER}
install -d -m 0755 -o nobody /run/gpuinfra-key-watch
: > {WATCH_LOG} && chown nobody {WATCH_LOG}
"""
CLEANUP = f"""systemctl stop gpuinfra-key-watch 2>/dev/null; systemctl reset-failed \
gpuinfra-key-watch 2>/dev/null; rm -f /etc/sudoers.d/{USER}; userdel -r {USER} 2>/dev/null; \
rm -rf /run/gpuinfra-key-watch; true"""


def _hosts() -> list[str]:
    return [h["name"] for h in json.loads((REPO / ".lab" / "hosts.json").read_text())["hosts"]]


def _ssh(host: str, command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), host, command],
                          input=stdin, capture_output=True, text=True, check=False, timeout=120)


def _key_digest(host: str) -> str:
    return _ssh(host, "sha256sum /etc/munge/munge.key | cut -d' ' -f1").stdout.strip()


def _gpuinfra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "gpuinfra"), *args], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=900,
                          env={**os.environ, "GPUINFRA_LAB_SSH_USER": USER})


def _commands_as_the_user(worker: str) -> list[str]:
    """`gpuinfra roll`, `health` and `report` as the non-root user: with --sudo they work;
    the roll without it is refused at its first Slurm command, the report fails on one cause
    naming --sudo (not on causes of the node's)."""
    problems = []
    why = ("--why", "lab proof: as a non-root user")
    rolled = _gpuinfra("roll", "--inventory", "inventory/lab.py", "--limit", worker, "--sudo",
                       *why)
    if rolled.returncode != 0 or f"{worker}: changed, verified, back in service" not in \
            rolled.stdout:
        problems.append(f"`gpuinfra roll --sudo` as {USER} failed (exit {rolled.returncode}): "
                        f"{(rolled.stdout + rolled.stderr).strip()[-400:]}")
    seen = _gpuinfra("health", "breaker", "--inventory", "inventory/lab.py", "--sudo")
    if seen.returncode != 0:
        problems.append(f"`gpuinfra health breaker --sudo` as {USER}: exit {seen.returncode}: "
                        f"{(seen.stdout + seen.stderr).strip()[-300:]}")
    bare = _gpuinfra("roll", "--inventory", "inventory/lab.py", "--limit", worker, *why)
    state = _ssh(worker, f"sinfo -h -N -n {worker} -o %T").stdout.strip()
    if bare.returncode != 2 or "add --sudo" not in bare.stderr or \
            state not in ("idle", "mixed", "allocated"):
        problems.append(f"the roll without --sudo as {USER}: exit {bare.returncode}, {worker} "
                        f"{state}: {(bare.stdout + bare.stderr).strip()[-300:]}")
    report = _gpuinfra("report", "--inventory", "inventory/lab.py", "--sudo")
    if report.returncode != 0 or "verdict: all checks passed" not in report.stdout:
        problems.append(f"`gpuinfra report --sudo` as {USER}: exit {report.returncode}: "
                        f"{report.stdout.strip()[-400:]}")
    plain = _gpuinfra("report", "--inventory", "inventory/lab.py")
    if plain.returncode != 1 or "failures by cause (1 causes" not in plain.stdout or \
            "is not root and the suite runs without --sudo" not in plain.stdout + plain.stderr:
        problems.append(f"`gpuinfra report` without --sudo as {USER}: exit {plain.returncode}, "
                        f"not the one cause naming --sudo: {plain.stdout.strip()[-600:]}")
    if not problems:
        print(f"munge-sudo: as {USER}: `gpuinfra roll --sudo` rolled {worker}, `gpuinfra "
              "health breaker --sudo` read Slurm and `gpuinfra report --sudo` passed; "
              f"without --sudo the roll was refused (exit {bare.returncode}), {worker} left "
              f"{state}, and the report failed on the one cause that names --sudo")
    return problems


def main(argv: list[str]) -> int:
    inventory = argv[0] if argv else "inventory/lab.py"
    hosts = _hosts()
    problems: list[str] = []
    try:
        for host in hosts:
            setup = _ssh(host, SETUP)
            if setup.returncode != 0:
                print(f"munge-sudo: {host}: setup failed: {setup.stderr.strip()}")
                return 1
            _ssh(host, "cat > /run/gpuinfra-key-watch/watch.py", stdin=WATCHER)
            _ssh(host, "systemd-run --quiet --unit gpuinfra-key-watch --uid=nobody "
                       f"python3 /run/gpuinfra-key-watch/watch.py {WATCH_LOG} 600")
        time.sleep(1)  # the watchers are looping
        rotation = f"munge-sudo-{int(time.time())}"
        try:
            run = subprocess.run(
                [str(REPO / ".venv" / "bin" / "pyinfra"), "-y", "--sudo", inventory,
                 "roles/munge/deploy.py", "--data", f"ssh_user={USER}",
                 "--data", f"munge_key_rotation={rotation}"],
                cwd=REPO, capture_output=True, text=True, check=False, timeout=PYINFRA_TIMEOUT_S)
            if run.returncode != 0:
                problems.append(f"the munge role as {USER} with --sudo failed (exit "
                                f"{run.returncode}):\n"
                                + "\n".join(run.stderr.splitlines()[-15:]))
        except subprocess.TimeoutExpired:
            problems.append(f"the munge role as {USER} with --sudo did not finish in "
                            f"{PYINFRA_TIMEOUT_S} s")
        time.sleep(1)  # the watchers see the last moments
        key = _key_digest(hosts[0])
        for host in hosts:
            if _key_digest(host) != key:
                problems.append(f"{host}: its MUNGE key is not the head's after the run")
            seen = _ssh(host, f"systemctl stop gpuinfra-key-watch; cat {WATCH_LOG}").stdout
            files = [line.split(" ", 1) for line in seen.splitlines() if " " in line]
            problems += [f"{host}: the key was readable by user nobody at {path}"
                         for digest, path in files if digest == key]
            print(f"munge-sudo: {host}: the watcher read {len(files)} file version(s) as "
                  "nobody")
        if not problems:
            problems += _commands_as_the_user(hosts[-1])
    finally:
        for host in hosts:
            _ssh(host, CLEANUP)
    for line in problems:
        print(f"munge-sudo: FAIL: {line}")
    if problems:
        return 1
    print(f"munge-sudo: the key was rotated and copied to {len(hosts) - 1} node(s) by "
          f"{USER} with --sudo; no other user could read it at any moment")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
