"""The one runner of node commands: each command of a reading (gpuinfra.health.probes) at once,
in threads, each with its own timeout, as a :class:`gpuinfra.health.collect.Output`.

Used on the node by the health check (roles/health/program.py: its reading, also the
verify suite's one SSH round trip) and by the GPU metrics collector
(roles/monitoring/collector.py); the library stays pure (no process is started
there). A command that is missing, fails or hangs gives ``ok`` False and the reason, never an
exception: the judge says "cannot read X" for it, and the other commands still count.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from gpuinfra.health.collect import PATH, TIMEOUT_S, Output

Command = tuple[str, ...] | list[str] | str


def search_path() -> str:
    """The system's directories first (a program Slurm starts has no PATH at all:
    prolog_epilog.html), then whatever the caller had."""
    inherited = os.environ.get("PATH", "")
    return f"{PATH}:{inherited}" if inherited else PATH


def run(command: Command, timeout: float = TIMEOUT_S) -> Output:
    """One command (an argv, or a string for ``sh -c``): its :class:`Output`."""
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=False, env={**os.environ, "PATH": search_path(),
                                                "LC_ALL": "C"})
    except FileNotFoundError:
        return Output(False, None, "", f"{argv[0]}: command not found",
                      time.monotonic() - started)
    except subprocess.TimeoutExpired:
        return Output(False, None, "", f"no answer within {timeout:g} s",
                      time.monotonic() - started)
    except OSError as exc:
        return Output(False, None, "", str(exc), time.monotonic() - started)
    error = "" if done.returncode == 0 else (done.stderr.strip() or done.stdout.strip())
    return Output(done.returncode == 0, done.returncode, done.stdout, error[:400],
                  time.monotonic() - started)


def read(commands: Mapping[str, Command], timeout: float = TIMEOUT_S) -> dict[str, Output]:
    """Every command's :class:`Output`, run in parallel (nvidia-smi calls overlap)."""
    if not commands:
        return {}
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {name: pool.submit(run, command, timeout) for name, command in
                   commands.items()}
        return {name: future.result() for name, future in futures.items()}


def read_folder(path: str, max_bytes: int = 65536) -> dict[str, str]:
    """The text of each regular file in ``path`` and its sub-folders, by name relative to it
    (``0``, ``jobs/7``): the GPU job mapping folder (gpuinfra.monitoring.jobmap). Empty when
    the folder is missing; a file that vanishes or cannot be read meanwhile is left out, and
    so are names starting with ``.`` (temporary files, the lock)."""
    out: dict[str, str] = {}
    for folder, subfolders, names in os.walk(path):
        subfolders[:] = [s for s in subfolders if not s.startswith(".")]
        relative = os.path.relpath(folder, path)
        for name in names:
            if name.startswith("."):
                continue
            key = name if relative == "." else f"{relative}/{name}"
            try:
                with open(os.path.join(folder, name), encoding="utf-8",
                          errors="replace") as handle:
                    out[key] = handle.read(max_bytes)
            except OSError:
                continue
    return out
