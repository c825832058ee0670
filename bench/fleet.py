"""Benchmark at fleet size: the lab with N light workers (gpuinfra_lab/fleet.py), over real SSH:
what a no-op costs per host, measured where this machine can measure it (CPU time, not the
wall time of a machine that N idle containers keep loaded), and a model that predicts the wall
time from those costs, validated against the wall time measured here (bench/fleet_cost.py).

    .venv/bin/python -m bench.fleet N [N ...] [--runs 3] [--no-ansible] [--compare]
                                     [--data KEY=VALUE]

For each N, in increasing order, on this machine (its load is printed with each figure):

1. `gpuinfra lab up --fleet N` (the head and two workers stay; lab-fleet1..N from the fleet
   image): time, and the fleet containers' memory (podman's cgroup figure, per node);
2. the first deploy of the new fleet workers, then a second that must change nothing;
3. the containers idle for 20 s: each one's CPU from its cgroup (their timers), which the
   node side's figures are net of;
4. the no-op deploy ``--runs`` times (each must change nothing), median: wall time; the
   controller's CPU seconds (``/usr/bin/time``: pyinfra and what it waited for) and peak
   memory, per host; per fleet node its cgroup CPU seconds (less its idle use) and the wall
   time it spent running the run's SSH commands (the fleet's counting shell times each);
   then the same with ``--limit`` to the head and the two workers (the 3-node no-op);
5. `gpuinfra report` (the verify suite over every host), learning then learned: wall and
   controller CPU;
6. Ansible: the playbook of bench/noop.py (the same converged state, every host) with its
   users' settings for this size (forks = hosts, pipelining, ControlPersist), after a warm-up
   run, metered as ours;
7. the model's wall time for this machine against the measured one (its error).

``--compare`` adds the earlier comparisons: each fact read on its own against a host's fact
reads in one round trip, pyinfra's order against each host at its own pace, a one-line change
on every worker and back, and the report with ``--no-batch``.

Then the model (fitted on every size run) and one line per N:
``fleet N=<n>: controller <ms> ms/host/noop (<a>x Ansible's), flat <f>x from N=<first>, node
<s> s/noop, predicted 1000-node noop <s> s (model error <e> %)``. Leaves the fleet up
(`gpuinfra lab up` without --fleet removes it). Not a test; figures go to
docs/measurements.md with the date.
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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.fleet_cost import (
    LAPTOP_CORES,
    LAPTOP_NOFILE,
    Costs,
    NodeMeter,
    busy_seconds,
    command_spans,
    fit_controller,
    machine_busy_s,
    model_error,
    on_a_laptop,
    on_this_machine,
    pyinfra_forks,
    spent,
)
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
    elapsed, peak, _, out = timed_cpu(command, check, env)
    return elapsed, peak, out


def timed_cpu(command: list[str], check: bool = True,
              env: dict[str, str] | None = None) -> tuple[float, int, float, str]:
    """Wall seconds, the peak RSS in KiB, the CPU seconds (user + system, the command and
    every process it waited for: /usr/bin/time) and the output."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as rss:
        start = time.monotonic()
        done = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", rss.name, *command],
                              cwd=REPO, capture_output=True, text=True, check=False, env=env)
        elapsed = time.monotonic() - start
        figures = (rss.read().strip().splitlines() or ["0 0 0"])[-1].split()
        peak, cpu = int(figures[0]), float(figures[1]) + float(figures[2])
    if check and done.returncode != 0:
        log = Path(tempfile.mkdtemp(prefix="gpuinfra-bench-fleet-")) / "failed.log"
        log.write_text(done.stdout + done.stderr)
        said = [line for line in (done.stdout + done.stderr).splitlines()
                if "rror" in line or "failed" in line.lower()]
        raise SystemExit(f"`{' '.join(command)}` failed (exit {done.returncode}; whole output: "
                         f"{log}):\n" + "\n".join(said[-40:]))
    return elapsed, peak, cpu, done.stdout


def fleet_names() -> list[str]:
    doc = json.loads(Paths(REPO).hosts_json.read_text())
    return [h["name"] for h in doc["hosts"] if h["name"].startswith(FLEET_PREFIX)]


def ssh_counts(names: list[str]) -> dict[str, int]:
    """Each fleet node's count of SSH commands so far (this read itself is one more)."""
    return {name: len(lines) for name, lines in command_logs(names).items()}


def command_logs(names: list[str]) -> dict[str, list[str]]:
    """Each fleet node's lines of its counting shell so far (``start end`` per SSH command);
    this read is its next line."""
    logs = {}
    for name in names:
        out = subprocess.run(["ssh", "-F", str(Paths(REPO).ssh_config), name,
                              f"cat {COMMAND_LOG} 2>/dev/null || true"],
                             capture_output=True, text=True, check=False).stdout
        logs[name] = out.splitlines()
    return logs


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
    elapsed, peak, out = timed(pyinfra(*extra), env=None if env is None else {**os.environ,
                                                                             **env})
    no_change(out, extra)
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


def ansible(meter: NodeMeter, idle: dict[str, float], names: list[str],
            runs: int) -> Measured:
    """bench/noop.py's playbook, its users' settings for this size (forks = hosts,
    pipelining, ControlPersist), after a warm-up run: the median of ``runs``, metered as
    ours."""
    from bench.noop import ansible_setup, run_ansible

    with tempfile.TemporaryDirectory(prefix="gpuinfra-bench-") as tmp:
        setup = ansible_setup(Path(tmp))
        run_ansible(*setup, 0)  # the warm-up: the control sockets
        def playbook() -> tuple[float, int, float, str]:
            (wall, cpu), = run_ansible(*setup, 1, warm_up=False)
            return wall, 0, cpu, ""

        done = [measured(meter, idle, names, playbook)[0] for _ in range(runs)]
    return median_of(done)


@dataclass
class Measured:
    """One no-op (or Ansible run): wall and controller CPU seconds, the controller's peak RSS
    (KiB), and the node side: each node's CPU seconds less its idle use, and each fleet
    node's SSH commands and the wall time it spent running them (fleet_cost)."""

    wall: float
    cpu: float
    peak: int
    node_cpu: dict[str, float]
    busy: dict[str, float]
    commands: dict[str, int]
    others: float = 0.0  # CPU seconds the rest of the machine used meanwhile


def measured(meter: NodeMeter, idle: dict[str, float], names: list[str],
             run: Callable[[], tuple[float, int, float, str]]) -> tuple[Measured, str]:
    """``run`` (its wall seconds, peak RSS, controller CPU seconds and output: timed_cpu) with
    the node side metered: the fleet's command logs and every container's cgroup CPU read
    before and after (not by SSH: no command of the reading is counted)."""
    logs = command_logs(names)
    cpu, machine, start = meter.read(), machine_busy(), time.monotonic()
    wall, peak, spent_cpu, out = run()
    after, machine, seconds = meter.read(), machine_busy() - machine, time.monotonic() - start
    later = command_logs(names)
    run_lines = {n: later[n][len(logs[n]) + 1:] for n in names}  # +1: the first reading
    spans = {n: command_spans(lines) for n, lines in run_lines.items()}
    others = machine - spent_cpu - sum(after[n] - cpu[n] for n in cpu)
    return Measured(wall, spent_cpu, peak, spent(cpu, after, seconds, idle),
                    {n: busy_seconds(s) for n, s in spans.items()},
                    {n: len(lines) for n, lines in run_lines.items()}, max(0.0, others)), out


def machine_busy() -> float:
    return machine_busy_s(Path("/proc/stat").read_text())


def idle_rates(meter: NodeMeter, seconds: float = 20.0) -> dict[str, float]:
    """Each container's CPU seconds per second with nothing sent to it (its timers)."""
    before = meter.read()
    time.sleep(seconds)
    after = meter.read()
    return {n: (after[n] - before[n]) / seconds for n in before}


def median_of(runs: list[Measured]) -> Measured:
    """The run of median wall time (its other figures are that run's, not medians)."""
    return sorted(runs, key=lambda r: r.wall)[len(runs) // 2]


@dataclass
class Size:
    """What one size measured: the figures the last lines are made of."""

    n: int
    noop: Measured
    small: Measured
    report: tuple[float, float]
    ansible: Measured | None
    idle_cores: float  # the cores the idle containers kept busy
    costs: Costs = field(init=False)

    def __post_init__(self) -> None:
        self.costs = Costs(hosts=self.n + len(CORE), controller_s=self.noop.cpu,
                           node_cpu_s=sum(self.noop.node_cpu.values()),
                           node_busy_s=max(self.noop.busy.values(), default=0.0),
                           idle_cores=self.idle_cores, cores=os.cpu_count() or 1,
                           others_s=self.noop.others)

    def ms_per_host(self, run: Measured, hosts: int | None = None) -> float:
        return run.cpu * 1000 / (hosts or self.costs.hosts)

    def fleet_mean(self, figures: dict[str, float]) -> float:
        fleet = [v for k, v in figures.items() if k.startswith(FLEET_PREFIX)]
        return statistics.mean(fleet) if fleet else 0.0


def one_size(n: int, runs: int, with_ansible: bool, compare: bool) -> Size:
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
    meter = NodeMeter([*CORE, *names])
    idle = idle_rates(meter)
    idle_cores = sum(idle.values())
    say(f"N={n}: idle, the {len(idle)} containers use {idle_cores:.2f} of "
        f"{os.cpu_count()} cores (their timers: cgroup CPU over 20 s)")
    if compare:
        compare_noops(n, runs, names)
    noops = []
    for _ in range(runs):
        run, out = measured(meter, idle, names, lambda: timed_cpu(pyinfra()))
        no_change(out, ())
        noops.append(run)
    noop = median_of(noops)
    small_runs = []
    limited = pyinfra(*[a for h in CORE for a in ("--limit", h)])
    for _ in range(runs):
        run, out = measured(meter, idle, names, lambda: timed_cpu(limited))
        no_change(out, ("--limit", "(the 3 core hosts)"))
        small_runs.append(run)
    small = median_of(small_runs)
    size = Size(n, noop, small, (0.0, 0.0), None, idle_cores)
    say(f"N={n}: no-op {noop.wall:.2f} s (runs {', '.join(f'{r.wall:.2f}' for r in noops)}); "
        f"controller {noop.cpu:.2f} CPU s, {size.ms_per_host(noop):.0f} ms per host, peak "
        f"{noop.peak / 1024:.0f} MiB ({noop.peak / 1024 / size.costs.hosts:.1f} MiB per host); "
        f"per fleet node {size.fleet_mean(noop.node_cpu):.3f} CPU s, "
        f"{size.fleet_mean(noop.busy):.3f} s running {size.fleet_mean(noop.commands):.0f} SSH "
        f"command(s) (the busiest {size.costs.node_busy_s:.3f} s); all nodes "
        f"{size.costs.node_cpu_s:.2f} CPU s; the rest of the machine {noop.others:.2f} CPU s "
        f"(load {load()})")
    say(f"N={n}: the 3-node no-op (--limit the head and two workers) {small.wall:.2f} s, "
        f"controller {small.cpu:.2f} CPU s ({size.ms_per_host(small, len(CORE)):.0f} ms per "
        f"host); the fleet's {n} nodes add {(noop.cpu - small.cpu) * 1000 / n:.0f} ms each")
    if compare:
        one_line_change(n, names)
    report_s, report_cpu = reports(n, names, compare)
    size.report = (report_s, report_cpu)
    if with_ansible:
        size.ansible = ansible(meter, idle, names, runs)
        theirs = size.ansible
        say(f"N={n}: Ansible (forks {n + 3}, pipelining, ControlPersist) {theirs.wall:.2f} s; "
            f"controller {theirs.cpu:.2f} CPU s, {size.ms_per_host(theirs):.0f} ms per host; "
            f"per fleet node {size.fleet_mean(theirs.node_cpu):.3f} CPU s, "
            f"{size.fleet_mean(theirs.busy):.3f} s running "
            f"{size.fleet_mean(theirs.commands):.0f} SSH commands (load {load()})")
    model = on_this_machine(size.costs)
    say(f"N={n}: the model on this machine: {model:.2f} s against {noop.wall:.2f} s measured "
        f"({model_error(size.costs, noop.wall):.0f} % off): max(controller {noop.cpu:.2f} s, "
        f"(controller + nodes + the rest) "
        f"{noop.cpu + size.costs.node_cpu_s + noop.others:.2f} CPU s / "
        f"({size.costs.cores} - {size.costs.idle_cores:.2f} idle) cores, busiest node "
        f"{size.costs.node_busy_s:.2f} s)")
    return size


def no_change(out: str, extra: tuple[str, ...]) -> None:
    from gpuinfra_lab.deploys import changed_operations

    changed = changed_operations(json.loads(out)["results"])
    if changed:
        FLAPS.append(f"a no-op run{' ' + ' '.join(extra) if extra else ''} changed {changed}")
        say(f"NOT A NO-OP: {FLAPS[-1]}")


def compare_noops(n: int, runs: int, names: list[str]) -> None:
    """--compare: the no-op each fact read on its own against a host's fact reads in one
    round trip, and pyinfra's order against each host at its own pace (alternating pairs)."""
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
    # pyinfra's order (every host at each operation: GPUINFRA_PACED=off), then each host at
    # its own pace, meeting at the scheduler roles (gpuinfra_deploy/pyinfra_patches/schedule.py)
    waiting, paced = [], []
    for _ in range(runs):
        waiting.append(noop(env={"GPUINFRA_PACED": "off"})[0])
        paced.append(noop()[0])
    say(f"N={n}: no-op in pyinfra's order {statistics.median(waiting):.2f} s (runs "
        f"{', '.join(f'{t:.2f}' for t in waiting)}); each host at its own pace "
        f"{statistics.median(paced):.2f} s (runs {', '.join(f'{t:.2f}' for t in paced)}) "
        f"(load {load()})")


def one_line_change(n: int, names: list[str]) -> None:
    """--compare: a one-line change to a file every worker has, then back."""
    change = []
    for data in CHANGE:
        before = ssh_counts(names)
        elapsed, _, _ = timed([str(BIN / "pyinfra"), "-y", "inventory/lab.py", "deploy.py",
                               *DATA, "--data", data])
        change.append((elapsed, per_node(before, ssh_counts(names))))
    say(f"N={n}: a one-line change on every worker {change[0][0]:.1f} s and back "
        f"{change[1][0]:.1f} s ({change[0][1]:.0f} SSH commands per fleet node)")


def reports(n: int, names: list[str], compare: bool) -> tuple[float, float]:
    """`gpuinfra report` from an empty cache of learned commands: learning (the first run
    learns each node's read-only commands), then learned (it asks them in one round trip:
    gpuinfra_verify/batch.py); with --compare first each command in its own round trip
    (--no-batch, testinfra's way). The last run's wall and controller CPU seconds are the
    report's."""
    command = [str(BIN / "gpuinfra"), "report", "--inventory", "inventory/lab.py", "--json"]
    figures, verdicts = [], []
    ways = ((("each command alone (--no-batch)", ["--no-batch"]),) if compare else ()) + (
        ("learning (first run)", []), ("learned", []))
    with tempfile.TemporaryDirectory(prefix="bench-fleet-verify-") as cache:
        env = {**os.environ, "GPUINFRA_VERIFY_CACHE": cache}
        for label, extra in ways:
            before = ssh_counts(names)
            elapsed, _, cpu, out = timed_cpu(command + extra, check=False, env=env)
            per = per_node(before, ssh_counts(names))
            verdicts.append(node_verdicts(out))
            say(f"N={n}: gpuinfra report, {label}: {elapsed:.1f} s, controller {cpu:.2f} CPU s "
                f"({cpu * 1000 / (n + len(CORE)):.0f} ms per host), {per:.0f} SSH commands per "
                f"fleet node; {sum(v[1] == 'pass' for v in verdicts[-1])} of "
                f"{len(verdicts[-1])} nodes pass (load {load()})")
            figures.append((elapsed, cpu))
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
    parser.add_argument("--compare", action="store_true",
                        help="also the earlier comparisons: each fact read on its own, "
                             "pyinfra's order, a one-line change, the report with --no-batch")
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
    compiled()
    sizes = [one_size(n, args.runs, not args.no_ansible, args.compare)
             for n in sorted(args.sizes)]
    for line in FLAPS:
        print(f"found: {line}")
    for line in last_lines(sizes):
        print(line)
    return 1 if FLAPS else 0


# The project's Python: what pyinfra imports for a deploy and the report.
PACKAGES = ("gpuinfra", "gpuinfra_cli", "gpuinfra_deploy", "gpuinfra_node", "gpuinfra_verify",
            "roles")


def compiled() -> None:
    """The project's modules compiled once, as on an operator's machine: where Python may not
    write its bytecode (PYTHONDONTWRITEBYTECODE, as this machine sets), every run of the
    controller compiled about 225 of them from source again (a quarter of a second of its CPU,
    cProfile), a fixed cost a laptop does not pay. compileall writes them regardless."""
    if not sys.flags.dont_write_bytecode:
        return
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    *[str(REPO / p) for p in PACKAGES]], check=True)
    say("PYTHONDONTWRITEBYTECODE is set here: the project's modules compiled once (compileall),"
        " as a laptop's Python does on a first run")


def fitted_on(sizes: list[Size]) -> list[Costs]:
    """The points the controller's fixed + per-host cost is fitted on: each size's no-op and
    the 3-node no-op of the same run (the head and two workers: the fixed part a run pays
    whatever its size), so one size gives a fixed part too, not all of it per host."""
    return [*(s.costs for s in sizes),
            *(replace(s.costs, hosts=len(CORE), controller_s=s.small.cpu) for s in sizes)]


def last_lines(sizes: list[Size]) -> list[str]:
    """The model's statement, then one line per size: the controller's CPU per host for a
    no-op (against Ansible's in the same run), how flat it stays from the smallest size, a
    fleet node's CPU per no-op, the 1,000-node prediction and the model's error at that
    size."""
    first = sizes[0]
    hosts = 1000
    forks = pyinfra_forks(LAPTOP_CORES, hosts, LAPTOP_NOFILE)
    points = fitted_on(sizes)
    fixed, per_host = fit_controller(points)
    predicted = on_a_laptop(points, hosts)
    lines = [f"model: a no-op's wall time is the largest of the controller's CPU (one process: "
             f"{fixed:.2f} s + {per_host * 1000:.0f} ms per host, fitted on N="
             f"{', '.join(str(s.n) for s in sizes)} and the 3-node no-op of each), all the CPU "
             f"over the cores the idle "
             f"containers leave (this machine only: a laptop's nodes have their own), and the "
             f"busiest node's commands once per round of forks hosts; for {hosts} nodes from a "
             f"laptop with {LAPTOP_CORES} cores and {LAPTOP_NOFILE} open files, forks {forks}: "
             f"{predicted:.1f} s"]
    for s in sizes:
        ours = s.ms_per_host(s.noop)
        versus = (f"{ours / s.ms_per_host(s.ansible):.2f}x Ansible's" if s.ansible is not None
                  else "Ansible not run")
        lines.append(f"fleet N={s.n}: controller {ours:.0f} ms/host/noop ({versus}), flat "
                     f"{ours / first.ms_per_host(first.noop):.2f}x from N={first.n}, node "
                     f"{s.fleet_mean(s.noop.node_cpu):.2f} s/noop, predicted {hosts}-node noop "
                     f"{predicted:.0f} s (model error {model_error(s.costs, s.noop.wall):.0f} %)")
    return lines


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
