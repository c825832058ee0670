"""One apt transaction per host against one per role, on the lab's head and a worker.

    .venv/bin/python -m bench.apt_transactions [--rounds 2]

The package lists are the deploy's own: a render of the lab site with fresh Debian 12 facts
(gpuinfra_lab.fleet.lab_render), each role's own unpinned install on the host (what deploy.py
ran before gpuinfra_deploy/run/ahead.py), the common role's base packages first in both
ways. Per round and host, alone on a fresh lab (the same `apt-get update` first, not timed):
one `apt-get install` per role, then, on another fresh lab, the base packages and one of all
the rest (deploy.py's way now). Prints both times and their ratio; not a test.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time

from bench.cold import BIN, sh
from gpuinfra_deploy.run.ahead import NAME
from gpuinfra_lab.fleet import install_args, lab_render
from gpuinfra_lab.podman import Podman
from gpuinfra_lab.state import Paths, find_repo

REPO = find_repo()
HOSTS = ("lab-head", "lab-worker1")


def installs(ops: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """(operation, its unpinned packages) of each apt install, the ahead one left out."""
    found = []
    for name, commands in ops:
        if name.startswith("packages | ") and NAME in name:
            continue
        words = [w for c in commands for w in install_args(c) if "=" not in w]
        if words:
            found.append((name, words))
    return found


def timed(podman: Podman, host: str, groups: list[list[str]]) -> float:
    podman.exec(host, "apt-get update -q >/dev/null")
    start = time.monotonic()
    for group in groups:
        podman.exec(host, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                          "--no-install-recommends " + " ".join(map(shlex.quote, group)) +
                    " >/dev/null")
    return time.monotonic() - start


def fresh() -> None:
    for verb in ("down", "up"):
        if sh(str(BIN / "gpuinfra"), "lab", verb).returncode != 0:
            raise SystemExit(f"gpuinfra lab {verb} failed")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.apt_transactions")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    render = lab_render(REPO)
    podman = Podman(Paths(REPO))
    ratios = []
    for host in HOSTS:
        own = installs(render.ops[host])
        assert own and own[0][0].startswith("common |"), own[:1]
        base, rest = own[0][1], own[1:]
        merged = list(dict.fromkeys(p for _, names in rest for p in names))
        print(f"{host}: {len(rest)} role installs after the base packages: " +
              "; ".join(f"{n.split(' | ')[0]} {' '.join(p)}" for n, p in rest), flush=True)
        for _ in range(args.rounds):
            fresh()
            apart = timed(podman, host, [base, *(names for _, names in rest)])
            fresh()
            together = timed(podman, host, [base, merged])
            ratios.append(apart / together)
            print(f"  {host}: {1 + len(rest)} transactions {apart:.1f} s, 2 transactions "
                  f"{together:.1f} s: {apart / together:.2f}x", flush=True)
    sh(str(BIN / "gpuinfra"), "lab", "down")
    print("one transaction per role against one for them all: median "
          f"{statistics.median(ratios):.2f}x ({len(ratios)} pairs, each host alone)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
