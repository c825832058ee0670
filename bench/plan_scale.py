"""Planning at scale: 1 head + N workers, the whole deploy.py, on recorded facts.

    .venv/bin/python -m bench.plan_scale [10 100 1000 ...]

Each size is planned in a fresh child process (so memory is measured per size) with the plan
harness of tests/plan (a real pyinfra State over @fake hosts whose facts come from the
recorded JSON files, as the CLI orders operations) and with the project's engine installed
(gpuinfra_deploy/pyinfra_patches/engine.py, as config.py installs it). Prints, per size: wall time,
peak RSS, operations planned per host, and the ratio of time per host to the smallest size's (1.0 =
linear).

The site planned is the one such a cluster would have: central logs on (the default), and the
head's file system for them (recorded: 100 GiB) as large as the logs role requires of a head
receiving every worker's journal (the cap plus one active file per worker, 15% free: roles/logs
refuses a smaller one), rounded up to whole TiB when the recorded disk is too small; the
output says which disk each size planned with.
"""

from __future__ import annotations

import json
import math
import resource
import subprocess
import sys
import time

SIZES = [10, 100, 1000]
LOG_DISK = "gpuinfra_roles.logs.LogDiskBytes"  # the head's fact: bytes of /var/log's file system
TIB = 1024 ** 4


def head_log_disk(recorded: int, workers: int, max_use: str) -> int:
    """The head's log file system for ``workers`` uploading nodes: the recorded one where the
    logs role accepts it, else the smallest whole TiB it accepts (gpuinfra.logs.journal)."""
    from gpuinfra.logs.journal import disk_problem

    if disk_problem(recorded, max_use, workers) is None:
        return recorded
    size = TIB
    while disk_problem(size, max_use, workers) is not None:
        size += TIB
    return size


def plan_once(workers: int) -> dict:
    from gpuinfra_deploy.pyinfra_patches import engine
    from gpuinfra_roles.logs.defaults import DEFAULTS as LOGS
    from tests.plan.harness import DEPLOY, FakeHost, load_facts, plan_hosts

    engine.install()
    head_facts = load_facts("base-fresh", "debian-12", "monitoring-fresh", "munge-fresh",
                            "slurm-fresh")
    recorded = head_facts[LOG_DISK]
    head_facts[LOG_DISK] = head_log_disk(recorded, workers, LOGS["logs_max_use"])
    worker_facts = load_facts("base-fresh", "debian-12", "monitoring-fresh", "gpu-fresh",
                              "gpu-debian-12", "munge-fresh", "slurm-fresh", "slurm-lab-worker1")
    spec = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}
    hosts = [FakeHost("head", ("head",), head_facts, {"ssh_hostname": "10.255.255.1"})]
    hosts += [FakeHost(f"gpu{i:05d}", ("workers",), worker_facts,
                       {**spec, "ssh_hostname": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"})
              for i in range(1, workers + 1)]
    site = {"cluster_name": "bench", "nvidia_driver_kernel_headers": False,
            "fabric_manager_enabled": False, "container_toolkit_enabled": False}
    start = time.perf_counter()
    # Every host planned, and its commands made (as a run makes them); one worker's kept.
    result = plan_hosts(DEPLOY, hosts, [h.name for h in hosts], site, kept=["gpu00001"])
    seconds = time.perf_counter() - start
    ops = len(result.plans["gpu00001"].ops)
    return {"workers": workers, "seconds": round(seconds, 2), "ops_per_worker": ops,
            "peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "logs_max_use": LOGS["logs_max_use"], "log_disk": head_facts[LOG_DISK],
            "log_disk_recorded": recorded}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(json.dumps(plan_once(int(argv[1]))))
        return 0
    sizes = [int(a) for a in argv] or SIZES
    rows: list[dict] = []
    failed = None
    for n in sizes:
        projected = _projected_mib(rows, n)
        if projected > _available_mib():
            failed = (f"planning {n} workers skipped: memory grows faster than linearly "
                      f"(the per-host copies of the cluster-wide files), projected "
                      f"{projected} MiB > {_available_mib()} MiB available")
            break
        out = subprocess.run([sys.executable, "-m", "bench.plan_scale", "--child", str(n)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            errors = [line for line in out.stderr.splitlines()
                      if "is currently in beta" not in line]
            failed = f"planning {n} workers failed (exit {out.returncode})\n" + \
                "\n".join(errors[-40:])
            break
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    if rows:
        base = rows[0]["seconds"] / (rows[0]["workers"] + 1)
        print(f"{'workers':>8} {'seconds':>9} {'peak MiB':>9} {'ops/worker':>10} "
              f"{'s/host vs first':>16}")
        for r in rows:
            per_host = r["seconds"] / (r["workers"] + 1)
            print(f"{r['workers']:>8} {r['seconds']:>9.2f} {r['peak_mib']:>9} "
                  f"{r['ops_per_worker']:>10} {per_host / base:>16.2f}")
        print(logs_line(rows))
    if failed:
        print(failed, file=sys.stderr)
        return 1
    return 0


def logs_line(rows: list[dict]) -> str:
    """One line: the central logs planned, and the head's disk for them at each size."""
    def size(n: int) -> str:
        return f"{n / TIB:g} TiB" if n % TIB == 0 else f"{n / 1024 ** 3:g} GiB"

    recorded = rows[0]["log_disk_recorded"]
    disks = ", ".join(f"{size(r['log_disk'])} for {r['workers']}"
                      + (" (as recorded)" if r["log_disk"] == recorded else "")
                      for r in rows)
    return (f"central logs on (logs_max_use {rows[0]['logs_max_use']}, every worker uploading "
            f"to the head); the head's log disk: {disks} (the recorded {size(recorded)} where "
            "it holds them, else the whole TiB the logs role needs for that many uploaders)")


def _projected_mib(rows: list[dict], workers: int) -> int:
    """Peak memory for ``workers``, extrapolated from the sizes done: with the growth seen
    between the last two (at least linear), else linearly from the one done, with a margin of
    half again. (A quadratic plan once went past 23 GiB at 10,000 workers, thrashing the
    machine; planning has been linear since, 651 MiB at 1,000 workers: docs/measurements.md.
    Projecting quadratically from 10 workers skipped 1,000 workers at a "538 GB" that a real
    run never came near.)"""
    if not rows:
        return 0
    last = rows[-1]
    exponent = 1.0
    margin = 1.5 if len(rows) < 2 else 1.0
    if len(rows) >= 2 and rows[-2]["peak_mib"] > 0:
        before = rows[-2]
        exponent = max(1.0, math.log(last["peak_mib"] / before["peak_mib"])
                       / math.log((last["workers"] + 1) / (before["workers"] + 1)))
    return round(margin * last["peak_mib"] * ((workers + 1) / (last["workers"] + 1)) ** exponent)


def _available_mib() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
