"""What a fleet costs per host, measured where it is meaningful on one machine, and the model
that predicts a no-op's wall time from those costs (bench/fleet.py prints them).

On this machine the lab's N+3 containers and the controller share the same cores, and N idle
systemd containers keep the load near N: wall time at N measures the machine. CPU time does
not depend on the load, so the costs are measured as CPU time:

- the laptop side: the controller's CPU (user + system seconds of `pyinfra` and every process
  it waited for, ``/usr/bin/time``) and its peak memory, per host;
- the node side: the CPU each container's cgroup used during the run, less what it uses idle
  over as long (its own timers: the health check, node_exporter's scrapes), and the wall time
  of the SSH commands the run sent it (the fleet's counting shell times each:
  gpuinfra_lab/fleet.py);

and the model (``predict``) turns them into a wall time, for this machine (to validate it
against the wall times measured in the same run) and for a laptop driving 1,000 nodes.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

# pyinfra's own default for how many hosts it works on at once (pyinfra.api.state: 20 per
# CPU, at most a third of the open-files limit): the laptop of the prediction.
LAPTOP_CORES = 8
LAPTOP_NOFILE = 1024
FORKS_PER_CPU = 20


def pyinfra_forks(cores: int, hosts: int, nofile: int) -> int:
    """How many hosts pyinfra works on at once by default (pyinfra/api/state.py)."""
    return max(1, min(FORKS_PER_CPU * cores, hosts, round((nofile - 10) / 3)))


# ------------------------------------------------------------------ the node side


def cgroup_cpu_file(pid: int, root: Path = Path("/sys/fs/cgroup")) -> Path | None:
    """The file holding the CPU time of the cgroup of process ``pid`` (a container's init)."""
    return cgroup_cpu_path((Path("/proc") / str(pid) / "cgroup").read_text(), root)


def cgroup_cpu_path(proc_cgroup: str, root: Path) -> Path | None:
    """From a process's /proc/<pid>/cgroup: cgroup v1's ``cpuacct.usage`` (nanoseconds) where
    the cpuacct controller is mounted, else cgroup v2's ``cpu.stat`` (``usage_usec``).
    systemd inside the container moves itself to ``init.scope``: the container's cgroup is the
    one above it."""
    lines = proc_cgroup.splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            found = root / "cpuacct" / path.lstrip("/") / "cpuacct.usage"
            if found.exists():
                return found
    for line in lines:
        if line.startswith("0::"):
            path = line[3:].removesuffix("/init.scope").lstrip("/")
            for base in (root, root / "unified"):
                if (base / path / "cpu.stat").exists():
                    return base / path / "cpu.stat"
    return None


def read_cpu_seconds(path: Path) -> float:
    text = path.read_text()
    if path.name == "cpuacct.usage":
        return int(text.strip()) / 1e9
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise ValueError(f"{path}: no usage_usec line")


class NodeMeter:
    """The CPU seconds each lab container has used, read from the host (no SSH command)."""

    def __init__(self, names: list[str]) -> None:
        out = subprocess.run(["podman", "ps", "--format", "{{.Names}} {{.Pid}}"],
                             capture_output=True, text=True, check=True).stdout
        self.files: dict[str, Path] = {}
        for line in out.splitlines():
            container, _, pid = line.partition(" ")
            name = container.rsplit("-", 1)[0]
            if name in names and pid.strip().isdigit():
                found = cgroup_cpu_file(int(pid))
                if found is not None:
                    self.files[name] = found
        missing = sorted(set(names) - set(self.files))
        if missing:
            raise SystemExit(f"bench.fleet: no cgroup CPU figure for {', '.join(missing)}")

    def read(self) -> dict[str, float]:
        return {name: read_cpu_seconds(path) for name, path in self.files.items()}


def spent(before: dict[str, float], after: dict[str, float], seconds: float,
          idle_rate: dict[str, float]) -> dict[str, float]:
    """Each node's CPU seconds between two readings ``seconds`` apart, less its idle use over
    as long (never below zero: an idle timer that did not fire in the run)."""
    return {n: max(0.0, after[n] - before[n] - idle_rate.get(n, 0.0) * seconds) for n in before}


def command_spans(lines: list[str]) -> list[tuple[float, float]]:
    """The counting shell's lines (``start end``, seconds) as pairs; a line without both (a
    command that was still running, an older image's empty line) is left out."""
    spans = []
    for line in lines:
        parts = line.split()
        if len(parts) == 2:
            try:
                spans.append((float(parts[0]), float(parts[1])))
            except ValueError:
                continue
    return spans


def busy_seconds(spans: list[tuple[float, float]]) -> float:
    """The wall time a node spent running the run's commands: the union of their spans (two
    commands at once count once)."""
    total, end = 0.0, -math.inf
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


# ------------------------------------------------------------------ the model


@dataclass(frozen=True)
class Costs:
    """What one no-op cost, measured at one size: ``hosts`` (fleet + head + 2 workers),
    ``controller_s`` (the controller's CPU seconds), ``node_cpu_s`` (all nodes' CPU seconds
    less their idle use), ``node_busy_s`` (the longest a node spent running the run's
    commands), ``idle_cores`` (the cores the idle containers keep busy: their summed idle
    rate), ``cores`` (this machine's) and ``others_s`` (the CPU seconds the rest of this
    machine used meanwhile: its own processes, another job; /proc/stat less the controller and
    the containers)."""

    hosts: int
    controller_s: float
    node_cpu_s: float
    node_busy_s: float
    idle_cores: float
    cores: int
    others_s: float = 0.0


def on_this_machine(c: Costs) -> float:
    """The model's wall time for a no-op on this machine, where the controller and the nodes
    share its cores. Three bounds, the largest wins:

    - the controller is one process (pyinfra: one Python process, its SSH connections in
      threads and greenlets that share one interpreter lock): at least its CPU seconds;
    - all the work shares the cores the idle containers leave: (controller + nodes' CPU +
      what the rest of the machine used meanwhile) over (cores - idle cores);
    - a node's own commands run one after the other: at least the busiest node's time.
    """
    free = max(c.cores - c.idle_cores, 0.25)
    return max(c.controller_s, (c.controller_s + c.node_cpu_s + c.others_s) / free,
               c.node_busy_s)


def machine_busy_s(proc_stat: str) -> float:
    """The CPU seconds this machine has been busy (every CPU's time less idle and iowait),
    from /proc/stat's first line (USER_HZ: 100 per second)."""
    fields = [int(v) for v in proc_stat.splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / 100


def fit_controller(sizes: list[Costs]) -> tuple[float, float]:
    """The controller's CPU as fixed + per host (least squares over the sizes measured; one
    size: all of it per host)."""
    if len(sizes) == 1:
        return 0.0, sizes[0].controller_s / sizes[0].hosts
    xs = [c.hosts for c in sizes]
    ys = [c.controller_s for c in sizes]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
             / sum((x - mean_x) ** 2 for x in xs))
    return max(0.0, mean_y - slope * mean_x), slope


def on_a_laptop(sizes: list[Costs], nodes: int, cores: int = LAPTOP_CORES,
                nofile: int = LAPTOP_NOFILE) -> float:
    """The model's wall time for a no-op over ``nodes`` nodes from a laptop with ``cores``
    cores: the nodes are machines of their own (their CPU is not the laptop's), so the bounds
    are the controller's CPU (fixed + per host, fitted on the sizes measured: one core, one
    process) and the rounds of ``forks`` hosts at once, each as long as the busiest node's
    commands."""
    fixed, per_host = fit_controller(sizes)
    busy = max(c.node_busy_s for c in sizes)
    forks = pyinfra_forks(cores, nodes, nofile)
    return max(fixed + per_host * nodes, math.ceil(nodes / forks) * busy)


def model_error(c: Costs, measured_wall_s: float) -> float:
    """The model's error at one size, in percent of the measured wall time."""
    return abs(on_this_machine(c) - measured_wall_s) / measured_wall_s * 100
