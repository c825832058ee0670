"""The GPU metrics collector: runs on a GPU node, every minute, from gpuinfra-gpu-metrics.timer.

    python3 -I /usr/local/lib/gpuinfra-gpu-metrics/collect.py --out FILE [--jobs DIR]

The monitoring role installs this file as ``collect.py`` beside ``gpuinfra.zip`` (the library
and its node-side runner, gpuinfra_deploy.nodecode: the health check ships the same zip). It
takes one reading of the node with the health check's runner and command table
(gpuinfra_node.reader.read of gpuinfra.health.probes.METRICS: the nvidia-smi queries, the
NVLink status, this boot's kernel log, all at once) and writes
:func:`gpuinfra.monitoring.gpumetrics.metrics_text` to ``FILE`` atomically (a temporary file
in the same directory, then a rename), so node_exporter never reads half a file. Python's
standard library only; a command that fails or hangs counts as a failed query. With ``--jobs``,
the GPU job mapping folder that Slurm's Prolog and Epilog keep (gpuinfra.monitoring.jobmap,
read with the same runner: gpuinfra_node.reader.read_folder) adds who holds each GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ZIP_NAME = "gpuinfra.zip"  # gpuinfra_deploy.nodecode.ZIP_NAME, beside this file


def collect(jobs_dir: str | None = None) -> str:
    from gpuinfra.health.probes import METRICS
    from gpuinfra.monitoring.gpumetrics import QUERIES, metrics_text
    from gpuinfra.monitoring.jobmap import holdings
    from gpuinfra_node.reader import read, read_folder

    reading = read(METRICS)
    held = holdings(read_folder(jobs_dir)) if jobs_dir else []
    return metrics_text({query.name: reading[query.name] for query in QUERIES},
                        reading["nvlink"], reading["kernel-log"], time.time(), held)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="GPU metrics for node_exporter")
    parser.add_argument("--out", required=True, type=Path, help="the .prom file to write")
    parser.add_argument("--jobs", help="the GPU job mapping folder Slurm's Prolog keeps")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent / ZIP_NAME))
    from gpuinfra_node.textfile import write_atomically

    write_atomically(args.out, collect(args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
