"""Benchmark at fleet size: the lab with N light workers (gpuinfra_lab/fleet.py), over real SSH.

    .venv/bin/python -m bench.fleet N [N ...] [--runs 3] [--no-ansible] [--data KEY=VALUE]

For each N, in increasing order, on this machine (its load is printed with each figure):

1. `gpuinfra lab up --fleet N` (the head and two workers stay; lab-fleet1..N from the fleet
   image): time, and the fleet containers' memory (podman's cgroup figure, per node);
2. the first deploy of the new fleet workers (`pyinfra -y inventory/lab.py deploy.py`):
   time (not a target: the fleet image already holds the packages);
3. the no-op deploy, ``--runs`` alternating pairs (each must change nothing): each fact read
   on its own (``GPUINFRA_FACT_BATCH=off``), then the deploy's own way (a host's fact reads in
   one round trip: gpuinfra_deploy/pyinfra_patches/fact_batch.py), medians; and the same with
   ``--limit`` to the head and the two workers (the 3-node no-op, same machine, same
   moment): their ratio; the laptop side's peak memory (`/usr/bin/time` maximum RSS); and
   alternating pairs of pyinfra's order (``GPUINFRA_PACED=off``: every host waits for the
   slowest at each operation) against each host at its own pace (the deploy's own way:
   gpuinfra_deploy/pyinfra_patches/schedule.py);
4. a one-line change to a file every worker has (`health_on_failure` between "drain" and
   "report": one line of /etc/gpuinfra/health.json on every GPU node), then back;
5. `gpuinfra report` (the verify suite over every host): time, each command in its own round
   trip (--no-batch), then learning and learned (gpuinfra_verify/batch.py) from an empty cache;
6. SSH commands per fleet node for each of 3-5 and for Ansible (root's shell on the fleet
   workers counts every command it runs: gpuinfra_lab/fleet.py);
7. Ansible: the playbook of bench/noop.py (the same converged state, every host) with its
   users' settings for this size: forks = hosts, pipelining, ControlPersist; median of
   ``--runs`` after a warm-up run (the control sockets).

The last line per N reads ``fleet N=<n>: noop <s> s (<a>x the 3-node noop, <b>x faster than
Ansible), report <s> s``. Leaves the fleet up (`gpuinfra lab up` without --fleet removes it).
Not a test; figures go to docs/measurements.md with the date.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpuinfra_lab.fleet import COMMAND_LOG
from gpuinfra_lab.profiles import FLEET_PREFIX
from gpuinfra_lab.state import Paths, find_repo

REPO = find_repo()
BIN = REPO / ".venv" / "bin"
CORE = ("lab-head", "lab-worker1", "lab-worker2")
CHANGE = ("health_on_failure=report", "health_on_failure=drain")


def say(text: str) -> None:
    print(f"fleet: {text}", flush=True)


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def timed(command: list[str], check: bool = True,
          env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Wall seconds, the peak RSS in KiB (/usr/bin/time) and the output."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as rss:
        start = time.monotonic()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *command],
                              cwd=REPO, capture_output=True, text=True, check=False, env=env)
        elapsed = time.monotonic() - start
        peak = int((rss.read().strip().splitlines() or ["0"])[-1])
    if check and done.returncode != 0:
        log = Path(tempfile.mkdtemp(prefix="gpuinfra-bench-fleet-")) / "failed.log"
        log.write_text(done.stdout + done.stderr)
        said = [line for line in (done.stdout + done.stderr).splitlines()
                if "rror" in line or "failed" in line.lower()]
        raise SystemExit(f"`{' '.join(command)}` failed (exit {done.returncode}; whole output: "
                         f"{log}):\n" + "\n".join(said[-40:]))
    return elapsed, peak, done.stdout


def fleet_names() -> list[str]:
    doc = json.loads(Paths(REPO).hosts_json.read_text())
    return [h["name"] for h in doc["hosts"] if h["name"].startswith(FLEET_PREFIX)]


def ssh_counts(names: list[str]) -> dict[str, int]:
    """Each fleet node's count of SSH commands so far (this read itself is one more)."""
    counts = {}
    for name in names:
        out = subprocess.run(["ssh", "-F", str(Paths(REPO).ssh_config), name,
                              f"wc -l < {COMMAND_LOG} 2>/dev/null || echo 0"],
                             capture_output=True, text=True, check=False).stdout.strip()
        counts[name] = int(out or 0)
    return counts


def per_node(before: dict[str, int], after: dict[str, int]) -> float:
    """SSH commands per fleet node between two readings (less the reading itself)."""
    return statistics.mean(after[n] - before[n] - 1 for n in before)


# ``--data KEY=VALUE`` of the command line, on every deploy of the run (the report reads the
# inventory's own data: its checks of what the override turned off fail, and say so).
DATA: list[str] = []


def pyinfra(*extra: str) -> list[str]:
    return [str(BIN / "pyinfra"), "-y", "--json", "inventory/lab.py", "deploy.py", *DATA,
            *extra]


FLAPS: list[str] = []  # what a no-op run changed after all, or verdicts that differ by mode


def noop(extra: tuple[str, ...] = (), env: dict[str, str] | None = None) -> tuple[float, int]:
    from gpuinfra_lab.deploys import changed_operations

    elapsed, peak, out = timed(pyinfra(*extra), env=None if env is None else {**os.environ,
                                                                             **env})
    changed = changed_operations(json.loads(out)["results"])
    if changed:
        FLAPS.append(f"a no-op run{' ' + ' '.join(extra) if extra else ''} changed {changed}")
        say(f"NOT A NO-OP: {FLAPS[-1]}")
    return elapsed, peak


def memory_per_node(names: list[str]) -> float:
    out = subprocess.run(["podman", "stats", "--no-stream", "--format",
                          "{{.Name}} {{.MemUsage}}"], capture_output=True, text=True,
                         check=False).stdout
    sizes = []
    for line in out.splitlines():
        name, _, usage = line.partition(" ")
        if name.rsplit("-", 1)[0] in names:
            match = re.match(r"([\d.]+)\s*([kMG]i?B)", usage)
            if match:
                factor = {"kB": 1 / 1024, "kiB": 1 / 1024, "MB": 1, "MiB": 1, "GB": 1024,
                          "GiB": 1024}.get(match.group(2), 1)
                sizes.append(float(match.group(1)) * factor)
    return statistics.mean(sizes) if sizes else 0.0


def ansible(runs: int) -> float:
    from bench.noop import time_ansible

    with tempfile.TemporaryDirectory(prefix="gpuinfra-bench-") as tmp:
        return statistics.median(time_ansible(Path(tmp), runs))


def one_size(n: int, runs: int, with_ansible: bool) -> str:
    up_s, _, _ = timed([str(BIN / "gpuinfra"), "lab", "up", "--fleet", str(n)])
    names = fleet_names()
    say(f"N={n}: lab up {up_s:.1f} s; {memory_per_node(names):.0f} MiB per fleet node "
        f"(load {load()})")
    first_s, _, _ = timed([str(BIN / "pyinfra"), "-y", "inventory/lab.py", "deploy.py", *DATA])
    say(f"N={n}: first deploy of the fleet {first_s:.1f} s (load {load()})")
    # The second deploy must change nothing; what it changed is said (an idempotence gap at
    # this size), and the timed no-ops below must then change nothing at all.
    _, _, out = timed(pyinfra())
    from gpuinfra_lab.deploys import changed_operations

    changed = changed_operations(json.loads(out)["results"])
    say(f"N={n}: second deploy changed {len(changed)} operation(s)"
        + (f": {changed}" if changed else " (converged)"))
    # Alternating pairs: each fact read on its own (GPUINFRA_FACT_BATCH=off), then a host's
    # fact reads in one round trip (the deploy's own way: fact_batch.py); the latter is the
    # no-op figure.
    ours, alone, sent = [], [], {"off": 0.0, "on": 0.0}
    for _ in range(runs):
        for mode, into in (("off", alone), ("on", ours)):
            before = ssh_counts(names)
            into.append(noop(env={"GPUINFRA_FACT_BATCH": mode}))
            sent[mode] += per_node(before, ssh_counts(names)) / runs
    say(f"N={n}: no-op with each fact read on its own {statistics.median(t for t, _ in alone):.2f}"
        f" s (runs {', '.join(f'{t:.2f}' for t, _ in alone)}), {sent['off']:.0f} SSH commands "
        f"per fleet node; with a host's fact reads in one round trip "
        f"{statistics.median(t for t, _ in ours):.2f} s, {sent['on']:.0f} (load {load()})")
    # Alternating pairs: pyinfra's order (every host at each operation: GPUINFRA_PACED=off),
    # then each host at its own pace, meeting at the scheduler roles (the deploy's own way:
    # gpuinfra_deploy/pyinfra_patches/schedule.py); both with the fact reads batched.
    waiting, paced = [], []
    for _ in range(runs):
        waiting.append(noop(env={"GPUINFRA_PACED": "off"})[0])
        paced.append(noop()[0])
    say(f"N={n}: no-op in pyinfra's order {statistics.median(waiting):.2f} s (runs "
        f"{', '.join(f'{t:.2f}' for t in waiting)}); each host at its own pace "
        f"{statistics.median(paced):.2f} s (runs {', '.join(f'{t:.2f}' for t in paced)}) "
        f"(load {load()})")
    small = [noop(tuple(a for h in CORE for a in ("--limit", h)))[0] for _ in range(runs)]
    noop_s, small_s = statistics.median(t for t, _ in ours), statistics.median(small)
    peak_mib = max(p for _, p in ours) / 1024
    say(f"N={n}: no-op {noop_s:.2f} s (runs {', '.join(f'{t:.2f}' for t, _ in ours)}), 3-node "
        f"no-op {small_s:.2f} s; {sent['on']:.0f} SSH commands per fleet "
        f"node per run; pyinfra peak {peak_mib:.0f} MiB ({peak_mib / (n + 3):.1f} MiB per "
        f"host) (load {load()})")
    change = []
    for data in CHANGE:
        before = ssh_counts(names)
        elapsed, _, _ = timed([str(BIN / "pyinfra"), "-y", "inventory/lab.py", "deploy.py",
                               *DATA, "--data", data])
        change.append((elapsed, per_node(before, ssh_counts(names))))
    say(f"N={n}: a one-line change on every worker {change[0][0]:.1f} s and back "
        f"{change[1][0]:.1f} s ({change[0][1]:.0f} SSH commands per fleet node)")
    report_s = reports(n, names)
    versus = ""
    if with_ansible:
        before = ssh_counts(names)
        theirs = ansible(runs)
        per = per_node(before, ssh_counts(names)) / (runs + 1)
        say(f"N={n}: Ansible (forks {n + 3}, pipelining, ControlPersist) {theirs:.2f} s, "
            f"{per:.0f} SSH commands per fleet node per run (load {load()})")
        versus = f", {theirs / noop_s:.1f}x faster than Ansible"
    return (f"fleet N={n}: noop {noop_s:.2f} s ({noop_s / small_s:.1f}x the 3-node noop"
            f"{versus}), report {report_s:.1f} s")


def reports(n: int, names: list[str]) -> float:
    """`gpuinfra report` three ways, in one run: each command in its own round trip
    (--no-batch, testinfra's way), then the suite's own way twice from an empty cache of
    learned commands (the first run learns each node's read-only commands, the second asks
    them in one round trip: gpuinfra_verify/batch.py). The last figure is the report's."""
    command = [str(BIN / "gpuinfra"), "report", "--inventory", "inventory/lab.py", "--json"]
    figures, verdicts = [], []
    with tempfile.TemporaryDirectory(prefix="bench-fleet-verify-") as cache:
        env = {**os.environ, "GPUINFRA_VERIFY_CACHE": cache}
        for label, extra in (("each command alone (--no-batch)", ["--no-batch"]),
                             ("learning (first run)", []), ("learned", [])):
            before = ssh_counts(names)
            elapsed, _, out = timed(command + extra, check=False, env=env)
            per = per_node(before, ssh_counts(names))
            verdicts.append(node_verdicts(out))
            say(f"N={n}: gpuinfra report, {label}: {elapsed:.1f} s, {per:.0f} SSH commands "
                f"per fleet node; {sum(v[1] == 'pass' for v in verdicts[-1])} of "
                f"{len(verdicts[-1])} nodes pass (load {load()})")
            figures.append(elapsed)
    if any(v != verdicts[0] for v in verdicts):
        FLAPS.append(f"N={n}: the report's verdicts differ between --no-batch and batched "
                     f"runs: {[sorted(set(v) ^ set(verdicts[0])) for v in verdicts[1:]]}")
    return figures[-1]


def node_verdicts(out: str) -> list[tuple]:
    """Each node's verdict and its sections' verdicts and failed tests, from `report --json`
    (empty when the report printed no JSON)."""
    try:
        nodes = json.loads(out)["nodes"]
    except (ValueError, KeyError, TypeError):
        return []
    return [(node["node"], node["verdict"],
             tuple((s["name"], s["verdict"], tuple(s["failed"])) for s in node["sections"]))
            for node in nodes]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.fleet")
    parser.add_argument("sizes", nargs="+", type=int)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-ansible", action="store_true")
    parser.add_argument("--data", action="append", default=[], metavar="KEY=VALUE",
                        help="data for every deploy of the run, e.g. logs_enabled=False past "
                             "the fleet the head's disk holds the central logs of (docs/lab.md)")
    args = parser.parse_args(argv)
    bad = [d for d in args.data if "=" not in d]
    if bad:
        parser.error(f"--data {bad[0]}: give KEY=VALUE (logs_enabled=False)")
    DATA[:] = [a for d in args.data for a in ("--data", d)]
    if os.geteuid() != 0:
        raise SystemExit("bench.fleet: the lab needs root")
    say(f"machine: {os.cpu_count()} CPUs, load {load()}")
    lines = [one_size(n, args.runs, not args.no_ansible) for n in sorted(args.sizes)]
    for line in FLAPS:
        print(f"found: {line}")
    for line in lines:
        print(line)
    return 1 if FLAPS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
