"""The GPU metrics collector: runs on a GPU node, every minute, from gpuinfra-gpu-metrics.timer.

    python3 -I /usr/local/lib/gpuinfra-gpu-metrics/collect.py --out FILE

The monitoring role installs this file as ``collect.py`` beside a copy of the pure library
modules it needs (gpuinfra.monitoring.gpumetrics and the parsers: :data:`LIBRARY`). It runs
the nvidia-smi queries and reads this boot's kernel log (XIDs), and writes
:func:`gpuinfra.monitoring.gpumetrics.metrics_text` to ``FILE`` atomically (a temporary file
in the same directory, then a rename), so node_exporter never reads half a file. Python's
standard library only; a command that fails or hangs counts as a failed query.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The modules the collector imports, relative to the repository root (shipped as they are).
LIBRARY = (
    "gpuinfra/__init__.py",
    "gpuinfra/errors.py",
    "gpuinfra/knowledge/__init__.py",
    "gpuinfra/knowledge/gpus.py",
    "gpuinfra/parsers/__init__.py",
    "gpuinfra/parsers/_text.py",
    "gpuinfra/parsers/gpus.py",
    "gpuinfra/parsers/nvlink.py",
    "gpuinfra/monitoring/__init__.py",
    "gpuinfra/monitoring/gpumetrics.py",
)
TIMEOUT_S = 20


def _run(command: list[str]):
    from gpuinfra.monitoring.gpumetrics import Output

    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return Output(False)
    return Output(done.returncode == 0, done.stdout)


def collect() -> str:
    from gpuinfra.monitoring.gpumetrics import (
        KERNEL_LOG_COMMANDS,
        NVLINK_COMMAND,
        QUERIES,
        metrics_text,
    )

    outputs = {query.name: _run(query.command()) for query in QUERIES}
    kernel_log = None
    for command in KERNEL_LOG_COMMANDS:
        kernel_log = _run(command)
        if kernel_log.ok:
            break
    return metrics_text(outputs, _run(NVLINK_COMMAND), kernel_log, time.time())


def write_atomically(path: Path, text: str) -> None:
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="GPU metrics for node_exporter")
    parser.add_argument("--out", required=True, type=Path, help="the .prom file to write")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    write_atomically(args.out, collect())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
