"""Cold deploy against raw apt: the first deploy on a fresh lab, and `apt-get install` of the
same packages at the same versions on the same fresh hosts, measured in one run.

    .venv/bin/python -m bench.cold [--pairs 1]

Per pair: a fresh lab, the whole deploy timed (`pyinfra -y inventory/lab.py deploy.py`); the
packages it installed on each host are read back (`apt-mark showmanual` less the image's own,
with their versions) with the apt sources and preferences it wrote; then another fresh lab
gets those sources and preferences (not timed) and every host runs, in parallel, `apt-get
update` and one `apt-get install` of its packages at those versions (timed: the slowest
host). Prints both times and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpuinfra_lab.podman import Podman
from gpuinfra_lab.state import Paths, find_repo

REPO = find_repo()
BIN = REPO / ".venv" / "bin"
APT_FILES = "/etc/apt/sources.list /etc/apt/sources.list.d /etc/apt/preferences.d"


def sh(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), cwd=REPO, capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})


def fresh_lab() -> list[str]:
    for verb in ("down", "up"):
        if sh(str(BIN / "gpuinfra"), "lab", verb).returncode != 0:
            raise SystemExit(f"gpuinfra lab {verb} failed")
    from gpuinfra_lab.profiles import plan_hosts

    return [h.name for h in plan_hosts()]


def manual(podman: Podman, host: str) -> set[str]:
    return set(podman.exec(host, "apt-mark showmanual").split())


def deploy_once() -> float:
    """The whole deploy, timed; where its time went printed (the slowest operations)."""
    with tempfile.TemporaryDirectory() as folder:
        times = Path(folder) / "ops.json"
        start = time.monotonic()
        done = sh(str(BIN / "pyinfra"), "-y", "inventory/lab.py", "deploy.py",
                  env={"GPUINFRA_OP_TIMES": str(times)})
        took = time.monotonic() - start
        if done.returncode != 0:
            raise SystemExit(f"the deploy failed:\n{done.stderr[-2000:]}")
        if times.is_file():
            print(where_the_time_went(json.loads(times.read_text()), took), flush=True)
    return took


def where_the_time_went(data: dict, took: float, top: int = 12) -> str:
    """Planning (until the first operation), each host's busy time (the sum of its
    operations), then the operations that took one host longest. Each host runs at its own
    pace (gpuinfra_deploy/pyinfra_patches/schedule.py): an operation's span from its first
    host's start to its last host's end says little, one host's time says what it cost."""
    ops = data.get("operations", [])
    planning = min((o["start_s"] for o in ops), default=data.get("total_s", took))
    busy: dict[str, float] = {}
    for op in ops:
        for name, seconds in op["hosts"].items():
            busy[name] = busy.get(name, 0.0) + seconds
    lines = [f"  {took:.1f} s: planning and connecting {planning:.1f} s, {len(ops)} operations;"
             " busy " + ", ".join(f"{h} {s:.1f} s" for h, s in sorted(busy.items()))]
    longest = sorted(ops, key=lambda o: -max(o["hosts"].values(), default=0))[:top]
    for op in longest:
        name, seconds = max(op["hosts"].items(), key=lambda kv: kv[1], default=("-", 0))
        lines.append(f"  {seconds:6.1f} s  {op['op'][:70]} ({name})")
    return "\n".join(lines)


def raw_apt(podman: Podman, hosts: list[str], packages: dict[str, list[str]],
            apt_tar: dict[str, bytes]) -> float:
    for host in hosts:  # the same sources and pins as the deploy wrote (not timed)
        podman.exec(host, "tar -x -C / -f -", stdin=apt_tar[host])

    def install(host: str) -> float:
        start = time.monotonic()
        script = ("export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install "
                  "-y -q --no-install-recommends --allow-downgrades " +
                  " ".join(shlex.quote(p) for p in packages[host]))
        podman.exec(host, script)
        return time.monotonic() - start

    with ThreadPoolExecutor(len(hosts)) as pool:
        return max(pool.map(install, hosts))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.cold")
    parser.add_argument("--pairs", type=int, default=1)
    args = parser.parse_args(argv)
    podman = Podman(Paths(REPO))
    ours, raw = [], []
    for _ in range(args.pairs):
        hosts = fresh_lab()
        image_manual = {h: manual(podman, h) for h in hosts}
        ours.append(deploy_once())
        packages = {}
        apt_tar = {}
        for h in hosts:
            added = sorted(manual(podman, h) - image_manual[h])
            versions = podman.exec(h, "dpkg-query -W -f '${Package}=${Version}\\n' " +
                                   " ".join(added)).split()
            packages[h] = versions
            apt_tar[h] = subprocess.run(
                ["podman", "exec", podman.container(h), "sh", "-c",
                 f"tar -c -C / -f - {APT_FILES.replace('/etc', 'etc')}"],
                capture_output=True, env=podman.env, check=True).stdout
        hosts = fresh_lab()
        raw.append(raw_apt(podman, hosts, packages, apt_tar))
        print(f"pair: deploy {ours[-1]:.1f} s, raw apt {raw[-1]:.1f} s "
              f"({sum(len(p) for p in packages.values())} packages over {len(hosts)} hosts)",
              flush=True)
    sh(str(BIN / "gpuinfra"), "lab", "down")
    a, b = statistics.median(ours), statistics.median(raw)
    print(f"cold deploy median {a:.1f} s, raw apt median {b:.1f} s: {a / b:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
