"""gpuinfra-health: the node health check, run on the node (installed by the health role).

    gpuinfra-health check [--json]   judge the node now; exit 0 healthy, 1 not, 2 cannot judge
    gpuinfra-health reading          expectation, raw reading and verdict as JSON (the verify
                                     suite's one round trip per node)
    gpuinfra-health slurm            Slurm's HealthCheckProgram: check, then drain or resume
    gpuinfra-health prolog           Slurm's Prolog: the job's GPUs present and healthy
    gpuinfra-health epilog           Slurm's Epilog: fatal XIDs logged during the job drain
    gpuinfra-health validate FILE    judge an expectation file (the deploy stages it first)
    gpuinfra-health reset-gpu GPU    reset a GPU (nvidia-smi -r; its index or PCI bus id) and
                                     mark the reset in the kernel log: its XIDs before it no
                                     longer count (gpuinfra.monitoring.gpumetrics.RESET_MARK)

The expectation is /etc/gpuinfra/health.json (gpuinfra.health.expectation), rendered from the
spec by the deploy. The library is the project's own (gpuinfra/ and the runner
gpuinfra_node/reader.py, packed into gpuinfra.zip beside this file and imported from it);
Python's standard library otherwise.
Every run also writes its verdict where node_exporter's textfile collector reads it
(``gpuinfra-health.prom``), when the node has one.
``slurm``, ``prolog`` and ``epilog`` log what they did to the journal (``journalctl -t
gpuinfra-health``).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "gpuinfra.zip"))  # the library, as the role packed it

from gpuinfra.errors import GpuinfraError  # noqa: E402
from gpuinfra.health import breaker  # noqa: E402
from gpuinfra.health import slurm as slurm_rules  # noqa: E402
from gpuinfra.health.collect import PATH, Output  # noqa: E402
from gpuinfra.health.expectation import PATH as EXPECTATION  # noqa: E402
from gpuinfra.health.expectation import Expectation, ExpectationError, from_json  # noqa: E402
from gpuinfra.health.judge import Verdict, job_verdict, judge, xid_count  # noqa: E402
from gpuinfra.health.metrics import metrics_text  # noqa: E402
from gpuinfra.health.probes import GPU_QUERY_FIELDS, GPUS, JOB_PROBES, probes  # noqa: E402
from gpuinfra.monitoring.gpumetrics import RESET_MARK, bus_address  # noqa: E402
from gpuinfra.parsers.gpus import parse_gpus  # noqa: E402
from gpuinfra.parsers.slurm import parse_sinfo_nodes  # noqa: E402
from gpuinfra_node.reader import read, run  # noqa: E402

STATE_DIR = Path("/run/gpuinfra-health")
KMSG = "/dev/kmsg"  # the kernel log, where a GPU reset is marked (reset_gpu)
PROM = "gpuinfra-health.prom"
EXIT_UNHEALTHY, EXIT_CANNOT = 1, 2


def log(message: str) -> None:
    """One line to the journal (tag gpuinfra-health) and to stderr."""
    print(f"gpuinfra-health: {message}", file=sys.stderr)
    try:
        subprocess.run(["logger", "-t", "gpuinfra-health", "--", message], check=False,
                       timeout=5, env={"PATH": PATH})
    except (OSError, subprocess.TimeoutExpired):
        pass


def load(path: str) -> Expectation:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ExpectationError(f"{path}: cannot be read ({exc.strerror}); fix: deploy the "
                               "health role on this node") from None
    return from_json(text, path)


def write_metrics(expect: Expectation, text: str) -> None:
    if not expect.textfile_dir or not os.path.isdir(expect.textfile_dir):
        return
    handle, temp = tempfile.mkstemp(prefix=f".{PROM}.", dir=expect.textfile_dir)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temp, 0o644)
        os.replace(temp, os.path.join(expect.textfile_dir, PROM))
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class Lock:
    """One run at a time on the node (the periodic check and an epilog may meet)."""

    def __enter__(self) -> Lock:
        STATE_DIR.mkdir(mode=0o700, exist_ok=True)
        self.handle = open(STATE_DIR / "lock", "w")  # noqa: SIM115
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


def slurm_node(expect: Expectation):
    if not expect.slurm_node:
        return None
    out = run(slurm_rules.sinfo(expect.slurm_node))
    if not out.ok:
        log(f"sinfo failed for {expect.slurm_node}: {out.error}")
        return None
    return parse_sinfo_nodes(out.text).get(expect.slurm_node)


DRAINED, HELD = "drained", "held"


def carry_out(expect: Expectation, action: slurm_rules.Action) -> str:
    """Run the action's scontrol, a drain only past the circuit breaker: :data:`DRAINED` when
    the node is now drained by gpuinfra, :data:`HELD` when the breaker kept a drain from it
    (held before, or given back after), else ""."""
    stamp = ""
    wanted = action.kind == "drain"
    if wanted:
        action, stamp = gate(expect, action)
    command = slurm_rules.scontrol(expect.slurm_node or "", action)
    if stamp:
        out = run(breaker.comment(expect.slurm_node or "", stamp))
        if not out.ok:
            log(f"setting {expect.slurm_node}'s Comment failed: {out.error}")
    if not command:
        return HELD if wanted else ""
    out = run(command)
    if out.ok:
        log(f"{action.kind} {expect.slurm_node}: {action.reason or action.why}")
    else:
        log(f"{slurm_rules.shown(command)} failed: {out.error}")
    if out.ok and action.kind == "drain":
        return DRAINED if settle(expect, action) else HELD
    return ""


def settle(expect: Expectation, action: slurm_rules.Action) -> bool:
    """A moment after the drain: kept, or given back when drains racing on other nodes took
    the breaker's share first (gpuinfra.health.breaker.settle). True when it is kept."""
    time.sleep(breaker.SETTLE_S)
    out = run(breaker.SINFO)
    nodes = breaker.parse(out.text) if out.ok else []
    if not nodes:
        return True  # drained and stamped before the count: the next check reads it again
    decision = breaker.settle(expect.slurm_node or "", action.reason, nodes,
                              breaker.Breaker(expect.breaker_share, expect.breaker_window_s),
                              time.time())
    if decision.drain:
        return True
    node = expect.slurm_node or ""
    for command in ([breaker.comment(node, decision.comment)] if decision.comment else []) + [
            slurm_rules.scontrol(node, slurm_rules.Action("resume"))]:
        done = run(command)
        if not done.ok:
            log(f"{slurm_rules.shown(command)} failed: {done.error}")
    log(f"{node}: not drained: {decision.why}")
    return False


def gate(expect: Expectation, action: slurm_rules.Action) -> tuple[slurm_rules.Action, str]:
    """The drain, or none when the circuit breaker holds it (gpuinfra.health.breaker); and the
    Comment the node gets ("" for none)."""
    out = run(breaker.SINFO)
    nodes = breaker.parse(out.text) if out.ok else []
    if not nodes:
        why = (f"the circuit breaker cannot count the drained nodes (sinfo: "
               f"{out.error or 'no node listed'}): not drained")
        log(f"{expect.slurm_node}: {action.reason} ({why})")
        return slurm_rules.Action("none", why=why), ""
    decision = breaker.decide(expect.slurm_node or "", action.reason, nodes,
                              breaker.Breaker(expect.breaker_share, expect.breaker_window_s),
                              time.time())
    if not decision.drain:
        log(f"{expect.slurm_node}: not drained: {decision.why}")
        return slurm_rules.Action("none", why=decision.why), decision.comment
    own = next((n for n in nodes if n.name == expect.slurm_node), None)
    # an operator's own Comment on the node is kept (the window forgets this drain)
    mine = own is None or not own.comment or own.comment.startswith(
        (breaker.DRAINED_MARK, breaker.TRIPPED_MARK))
    return action, decision.comment if mine else ""


def check(expect: Expectation) -> tuple[Verdict, dict[str, Output], float]:
    started = time.monotonic()
    reading = read(probes(expect))
    return judge(expect, reading), reading, time.monotonic() - started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpuinfra-health", description=__doc__.split("\n")[0])
    parser.add_argument("--expect", default=EXPECTATION, help="the expectation file")
    sub = parser.add_subparsers(dest="mode", required=True)
    check_p = sub.add_parser("check", help="judge the node now")
    check_p.add_argument("--json", action="store_true", help="every finding, as JSON")
    sub.add_parser("reading", help="the raw reading as JSON")
    sub.add_parser("slurm", help="Slurm's HealthCheckProgram")
    sub.add_parser("prolog", help="Slurm's Prolog")
    sub.add_parser("epilog", help="Slurm's Epilog")
    validate_p = sub.add_parser("validate", help="judge an expectation file")
    validate_p.add_argument("file")
    reset_p = sub.add_parser("reset-gpu", help="reset a GPU and clear its XIDs")
    reset_p.add_argument("gpu", help="the GPU's index or PCI bus id, as nvidia-smi lists it")
    args = parser.parse_args(argv)
    if args.mode == "reset-gpu":
        return reset_gpu(args.gpu)
    try:
        if args.mode == "validate":
            load(args.file)
            return 0
        expect = load(args.expect)
    except ExpectationError as exc:
        log(str(exc))
        # Slurm's programs exit 0 on an unreadable file: slurmd must still register, and a
        # node is not drained for the check's own fault (the verify suite names it).
        return 0 if args.mode in ("slurm", "prolog", "epilog") else EXIT_CANNOT
    if args.mode == "reading":
        # The verify suite's one round trip: what the node expects, what it read, and its own
        # verdict on it (the suite judges the same reading itself and compares).
        verdict, reading, seconds = check(expect)
        print(json.dumps({"node": expect.node, "expect": json.loads(expect.to_json()),
                          "reading": {k: v.to_json() for k, v in reading.items()},
                          "verdict": verdict.to_json(), "seconds": round(seconds, 3)}))
        return 0
    if args.mode == "check":
        verdict, _, seconds = check(expect)
        if not expect.slurm_node:
            # A Slurm node's metrics are the periodic check's, which knows whether Slurm has the
            # node drained: a run by hand must not erase gpuinfra_health_drained.
            write_metrics(expect, metrics_text(verdict, None, seconds, time.time()))
        if args.json:
            print(json.dumps({**verdict.to_json(), "seconds": round(seconds, 3)}, indent=2))
        else:
            print(verdict.reason() or f"{expect.node}: healthy ({len(verdict.findings)} checks)")
        return 0 if verdict.healthy else EXIT_UNHEALTHY
    with Lock():
        if args.mode == "slurm":
            return periodic(expect)
        if args.mode == "prolog":
            return prolog(expect)
        return epilog(expect)


def reset_gpu(gpu: str) -> int:
    """``nvidia-smi -r -i BUS`` on one GPU, then the reset's mark in the kernel log (kmsg(4);
    root's only), which every reader of XIDs takes as the GPU's fresh start. No mark when the
    reset failed: the XIDs still count."""
    listed = run(GPUS)  # the check's own GPU list
    try:
        if not listed.ok:
            raise GpuinfraError(listed.error)
        rows = [(str(g.index), str(g.fields.get("pci.bus_id") or ""))
                for g in parse_gpus(listed.text, fields=list(GPU_QUERY_FIELDS)).gpus]
    except GpuinfraError as exc:
        print(f"gpuinfra-health: cannot list the GPUs (nvidia-smi: {exc}); nothing was reset",
              file=sys.stderr)
        return EXIT_CANNOT
    wanted = bus_address(gpu)
    bus = next((b for i, b in rows if gpu == i or (wanted and bus_address(b) == wanted)), None)
    if bus is None:
        print(f"gpuinfra-health: no GPU {gpu!r} on this node (nvidia-smi lists "
              f"{', '.join(f'{i} {b}' for i, b in rows) or 'none'}); give its index or PCI bus "
              "id", file=sys.stderr)
        return EXIT_CANNOT
    done = run(["nvidia-smi", "-r", "-i", bus])
    if not done.ok:
        print(f"gpuinfra-health: nvidia-smi -r -i {bus} failed: {done.error}. Nothing was "
              "marked: its XIDs still count. nvidia-smi(1) resets only a GPU no process uses "
              "(drain the node first; `nvidia-smi` lists them), as root; else reboot the node",
              file=sys.stderr)
        return EXIT_UNHEALTHY
    mark = f"{RESET_MARK} PCI:{bus} (nvidia-smi -r)"
    try:
        with open(KMSG, "a", encoding="utf-8") as kmsg:
            kmsg.write(mark + "\n")
    except OSError as exc:
        print(f"gpuinfra-health: GPU {bus} was reset, but the mark could not be written to "
              f"{KMSG} ({exc}): its earlier XIDs still count; run this as root",
              file=sys.stderr)
        return EXIT_UNHEALTHY
    log(f"GPU {bus} reset (nvidia-smi -r): its XIDs before now no longer count")
    print(f"GPU {bus} reset; its XIDs before now no longer count. The next health check "
          "resumes the node it drained when nothing else fails (`gpuinfra-health check` now)")
    return 0


def periodic(expect: Expectation) -> int:
    verdict, _, seconds = check(expect)
    node = slurm_node(expect)
    action = slurm_rules.decide(node, verdict.reason(), expect.on_failure)
    # The drain reason the node holds now (None: not drained by gpuinfra).
    drain_reason = action.reason if carry_out(expect, action) == DRAINED else None
    if action.kind == "none":
        if node is not None and slurm_rules.drained_by_gpuinfra(node):
            drain_reason = node.reason
        if not verdict.healthy:
            log(f"{verdict.reason()} ({action.why})")
    write_metrics(expect, metrics_text(verdict, drain_reason, seconds, time.time()))
    return 0  # slurmd blocks its registration until the program exits 0 (slurm.conf(5))


def _job() -> tuple[str, list[int] | None]:
    job = os.environ.get("SLURM_JOB_ID", "?")
    gpus = os.environ.get("SLURM_JOB_GPUS")
    indices = [int(g) for g in gpus.split(",") if g.strip().isdigit()] if gpus else None
    return job, indices


def prolog(expect: Expectation) -> int:
    """The job's GPUs listed, no remap pending, no fatal XID since boot; the XID count kept
    for the epilog. Exit 1 (Slurm drains the node and requeues the job) after draining with
    the cause; exit 0 when the circuit breaker held the drain (no unbounded drain by Slurm)."""
    job, indices = _job()
    reading = read(JOB_PROBES if expect.gpus is not None else {})
    count = xid_count(reading.get("kernel-log"))
    jobs = STATE_DIR / "jobs"
    jobs.mkdir(mode=0o700, parents=True, exist_ok=True)
    (jobs / job).write_text(str(count) if count is not None else "")
    if expect.gpus is None or indices is None:
        return 0
    done = _job_check(expect, reading, indices, job, None, "prolog")
    if done in ("healthy", HELD):
        # Held by the circuit breaker: a failing Prolog would make Slurm drain the node
        # itself, past the bound; the job runs, the trip alerts (HealthBreakerTripped).
        return 0
    return EXIT_UNHEALTHY if expect.on_failure == "drain" else 0


def _job_check(expect: Expectation, reading: Mapping[str, Output], indices: list[int] | None,
               job: str, since: int | None, hook: str) -> str:
    """Judge the job's GPUs; drain with the cause when they fail. "healthy", or what
    :func:`carry_out` did."""
    verdict = job_verdict(expect, reading, indices, job, since=since)
    if verdict.healthy:
        return "healthy"
    action = slurm_rules.decide_after_job(slurm_node(expect), verdict.reason(),
                                          expect.on_failure)
    done = carry_out(expect, action)
    log(f"{hook} of job {job}: {verdict.reason()} ({action.why}"
        f"{'; the circuit breaker held the drain: the job runs' if done == HELD else ''})")
    return done


def epilog(expect: Expectation) -> int:
    job, indices = _job()
    mark = STATE_DIR / "jobs" / job
    try:
        since = int(mark.read_text() or "0")
    except (OSError, ValueError):
        since = 0  # no prolog record: every XID since boot counts
    mark.unlink(missing_ok=True)
    if expect.gpus is None:
        return 0
    _job_check(expect, read(JOB_PROBES), indices, job, since, "epilog")
    return 0  # the drain is done with its reason; a failing Epilog would replace it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
