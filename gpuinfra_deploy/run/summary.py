"""The end of a run: which hosts failed, where, and what to do next.

pyinfra prints each error where it happens and a results table at the end; with a site's
``max_fail_percent`` a run goes on past a dead or failed worker, so the operator needs one
list at the bottom naming every failed host, the step it failed at, and the next command.
Installed by the gate (gpuinfra_deploy/pyinfra_patches/gate.py) on CLI runs only.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from pyinfra.api.state import BaseStateCallback, StateStage

from gpuinfra_deploy.pyinfra_patches import internals


@dataclass(frozen=True)
class Failure:
    host: str
    step: str  # the operation's name, or "connecting"
    head: bool


def failure_summary(failures: list[Failure], total: int, fail_percent: Any,
                    finished: bool = True) -> str:
    """The closing lines for ``failures`` out of ``total`` hosts ('' when none failed);
    ``finished``: the run reached its end (else pyinfra stopped it part-way)."""
    if not failures:
        return ""
    lines = [f"gpuinfra: {len(failures)} of {total} host(s) failed in this run:"]
    for f in sorted(failures, key=lambda f: (not f.head, f.host)):
        role = " (head)" if f.head else ""
        lines.append(f"  - {f.host}{role}: failed at {f.step}")
    if not finished:
        lines.append("  The run stopped before its end (pyinfra's error above): hosts may be "
                     "part-deployed.")
    elif any(f.head for f in failures):
        lines.append("  The head failed: munge and slurm were skipped on every host (they need "
                     "the head's key and controller); the other roles went on.")
    elif len(failures) < total:
        lines.append("  The healthy hosts were deployed (site key max_fail_percent = "
                     f"{fail_percent}%: more than that share failing stops every host).")
    lines.append("  Next: read each host's error above, fix the host (power, network, disk), "
                 "then rerun the same command: the deploy converges from any point, "
                 "including an interrupted dpkg or a held apt lock.")
    return "\n".join(lines)


class _Recorder(BaseStateCallback):
    """Remembers, per host, the first step it failed at; and how long each operation took
    (written where GPUINFRA_OP_TIMES names, for bench/cold.py: where a deploy's time goes)."""

    def __init__(self) -> None:
        self.steps: dict[str, str] = {}
        self.began = time.monotonic()
        self.started: dict[Any, float] = {}
        self.times: list[dict[str, Any]] = []
        self.host_started: dict[tuple[str, Any], float] = {}
        self.host_times: dict[Any, dict[str, float]] = {}

    def operation_start(self, state: Any, op_hash: Any) -> None:
        self.started[op_hash] = time.monotonic()

    def operation_host_start(self, state: Any, host: Any, op_hash: Any) -> None:
        self.host_started[(host.name, op_hash)] = time.monotonic()

    def operation_host_success(self, state: Any, host: Any, op_hash: Any,
                               retry_count: int = 0) -> None:
        began = self.host_started.pop((host.name, op_hash), None)
        if began is not None:
            self.host_times.setdefault(op_hash, {})[host.name] = time.monotonic() - began

    def operation_end(self, state: Any, op_hash: Any) -> None:
        began = self.started.pop(op_hash, None)
        if began is None:
            return
        names = internals.op_names(state, op_hash)
        self.times.append({"op": " | ".join(sorted(names)) or str(op_hash),
                           "start_s": round(began - self.began, 3),
                           "wall_s": round(time.monotonic() - began, 3),
                           "hosts": {k: round(v, 3)
                                     for k, v in self.host_times.pop(op_hash, {}).items()}})

    def write_times(self) -> None:
        path = os.environ.get("GPUINFRA_OP_TIMES")
        if not path:
            return
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"total_s": round(time.monotonic() - self.began, 3),
                       "operations": self.times}, out, indent=1)

    def host_connect_error(self, state: Any, host: Any, error: Any) -> None:
        self.steps.setdefault(host.name, f"connecting ({error})")

    def operation_host_error(self, state: Any, host: Any, op_hash: Any,
                             retry_count: int = 0, max_retries: int = 0) -> None:
        names = internals.op_names(state, op_hash)
        self.steps.setdefault(host.name, " | ".join(sorted(names)) or op_hash)


def install(state: Any, head_names: frozenset[str]) -> None:
    """Record failures on ``state`` and print the summary when the process exits.

    The gate runs before pyinfra initialises the State (which creates its callback list), so
    the recorder joins right after ``state.init``."""
    recorder = _Recorder()
    init = state.init

    def init_then_record(*args: Any, **kwargs: Any) -> Any:
        result = init(*args, **kwargs)
        state.add_callback_handler(recorder)
        return result

    state.init = init_then_record

    def report() -> None:
        recorder.write_times()
        failed = sorted(h.name for h in state.failed_hosts)
        failures = [Failure(n, recorder.steps.get(n, "an earlier step"), n in head_names)
                    for n in failed]
        text = failure_summary(failures, len(state.inventory), state.config.FAIL_PERCENT,
                               finished=state.current_stage == StateStage.Disconnect)
        if text:
            print(text, file=sys.stderr)

    atexit.register(report)
