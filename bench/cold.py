"""Cold deploy against raw apt: the first deploy on a fresh lab, and `apt-get install` of the
same packages at the same versions on the same fresh hosts, measured in one run.

    .venv/bin/python -m bench.cold [--pairs 1]

Per pair: a fresh lab, the whole deploy timed (`pyinfra -y inventory/lab.py deploy.py`); the
packages it installed on each host are read back (`apt-mark showmanual` less the image's own,
with their versions) with the apt sources and preferences it wrote; then another fresh lab
gets those sources and preferences (not timed) and every host runs, in parallel, `apt-get
update` and one `apt-get install` of its packages at those versions (timed: the slowest
host). Prints both times and their ratio; then the deploy once more on those hosts, every
package already there: the configuration alone.

The lab's hosts and the deploy's controller share this machine's cores: each deploy also
prints the controller's own CPU time (pyinfra, planning and SSH included) and the machine's
busy share over the run and the CPU seconds the hosts themselves used (their containers'
cgroups: the work, whatever the contention), and with ``--solo`` each host's raw install is
timed once more alone (one host at a time, on a third fresh lab): what the hosts' installs
cost without each other.
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


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine (/proc/stat's cpu line)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def busy_since(before: tuple[int, int]) -> float:
    """The machine's busy share since ``before`` (a :func:`cpu_ticks` reading)."""
    busy, total = cpu_ticks()
    return (busy - before[0]) / max(total - before[1], 1)


def hosts_cpu(podman: Podman, hosts: list[str]) -> dict[str, float]:
    """CPU seconds each lab host's container has used since it started (its cgroup's
    cpuacct.usage, v1, or cpu.stat's usage_usec, v2): the work done on the hosts, whatever
    the contention."""
    script = ("cat /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null || "
              "awk '$1==\"usage_usec\"{print $2*1000}' /sys/fs/cgroup/cpu.stat")
    return {h: int(float(podman.exec(h, script).split()[0])) / 1e9 for h in hosts}


def cpu_note(before: dict[str, float], after: dict[str, float]) -> tuple[float, str]:
    used = {h: after[h] - before[h] for h in after}
    return sum(used.values()), ", ".join(f"{h} {s:.1f}" for h, s in used.items())


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def deploy_once(podman: Podman, hosts: list[str]) -> tuple[float, float]:
    """The whole deploy, timed (and the hosts' CPU seconds); where its time went printed
    (the slowest operations), with the controller's CPU time, the machine's busy share over
    the run and each host's CPU seconds."""
    with tempfile.TemporaryDirectory() as folder:
        times = Path(folder) / "ops.json"
        on_hosts = hosts_cpu(podman, hosts)
        cpu, ticks = children_cpu(), cpu_ticks()
        start = time.monotonic()
        done = sh(str(BIN / "pyinfra"), "-y", "inventory/lab.py", "deploy.py",
                  env={"GPUINFRA_OP_TIMES": str(times)})
        took = time.monotonic() - start
        cpu, share = children_cpu() - cpu, busy_since(ticks)
        if done.returncode != 0:
            raise SystemExit(f"the deploy failed:\n{done.stderr[-2000:]}")
        total, each = cpu_note(on_hosts, hosts_cpu(podman, hosts))
        print(f"  controller CPU {cpu:.1f} s ({cpu / took:.2f} of one core over {took:.1f} s); "
              f"the machine's {os.cpu_count()} cores busy {share:.0%}; the hosts' CPU "
              f"{total:.1f} s ({each})", flush=True)
        if times.is_file():
            print(where_the_time_went(json.loads(times.read_text()), took), flush=True)
    return took, total


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
            apt_tar: dict[str, bytes]) -> tuple[float, float, str]:
    """The raw installs, every host at once: the slowest host's time, the hosts' CPU seconds
    (total, and each as text)."""
    for host in hosts:  # the same sources and pins as the deploy wrote (not timed)
        podman.exec(host, "tar -x -C / -f -", stdin=apt_tar[host])

    def install(host: str) -> float:
        start = time.monotonic()
        script = ("export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install "
                  "-y -q --no-install-recommends --allow-downgrades " +
                  " ".join(shlex.quote(p) for p in packages[host]))
        podman.exec(host, script)
        return time.monotonic() - start

    before = hosts_cpu(podman, hosts)
    with ThreadPoolExecutor(len(hosts)) as pool:
        took = max(pool.map(install, hosts))
    return (took, *cpu_note(before, hosts_cpu(podman, hosts)))


def raw_apt_solo(podman: Podman, hosts: list[str], packages: dict[str, list[str]],
                 apt_tar: dict[str, bytes]) -> dict[str, float]:
    """Each host's raw install alone, one host after the other (same script, fresh lab)."""
    return {host: raw_apt(podman, [host], packages, apt_tar)[0] for host in hosts}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.cold")
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--solo", action="store_true",
                        help="also time each host's raw install alone (a third fresh lab)")
    args = parser.parse_args(argv)
    podman = Podman(Paths(REPO))
    ours, raw, cpu_ours, cpu_raw, config = [], [], [], [], []
    for _ in range(args.pairs):
        hosts = fresh_lab()
        image_manual = {h: manual(podman, h) for h in hosts}
        took, used = deploy_once(podman, hosts)
        ours.append(took)
        cpu_ours.append(used)
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
        ticks = cpu_ticks()
        took, used, each = raw_apt(podman, hosts, packages, apt_tar)
        raw.append(took)
        share = busy_since(ticks)
        cpu_raw.append(used)
        print(f"pair: deploy {ours[-1]:.1f} s, raw apt {raw[-1]:.1f} s "
              f"({sum(len(p) for p in packages.values())} packages over {len(hosts)} hosts; "
              f"cores busy {share:.0%} during raw apt; the hosts' CPU {used:.1f} s: "
              f"{each}); the hosts' CPU, deploy against raw: "
              f"{cpu_ours[-1] / max(cpu_raw[-1], 1e-9):.2f}x", flush=True)
        # The same deploy on the hosts raw apt just filled: the configuration alone (files,
        # keys, checks, services), with every package already there.
        took, used = deploy_once(podman, hosts)
        config.append(took)
        print(f"  the deploy on the raw-apt hosts (the configuration alone): {took:.1f} s, the "
              f"hosts' CPU {used:.1f} s", flush=True)
        if args.solo:
            alone = raw_apt_solo(podman, fresh_lab(), packages, apt_tar)
            print("  raw apt, each host alone: " +
                  ", ".join(f"{h} {s:.1f} s" for h, s in alone.items()), flush=True)
    sh(str(BIN / "gpuinfra"), "lab", "down")
    a, b = statistics.median(ours), statistics.median(raw)
    c, d = statistics.median(cpu_ours), statistics.median(cpu_raw)
    print(f"cold deploy median {a:.1f} s, raw apt median {b:.1f} s: {a / b:.2f}x; the hosts' "
          f"CPU {c:.1f} s against {d:.1f} s: {c / d:.2f}x; the configuration alone (the "
          f"deploy on the raw-apt hosts) median {statistics.median(config):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
