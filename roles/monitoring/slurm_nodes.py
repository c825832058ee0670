"""Slurm's node states for node_exporter: runs on the head, every minute, from
gpuinfra-slurm-nodes.timer.

    python3 -I /usr/local/lib/gpuinfra-slurm-nodes/slurm_nodes.py --out FILE

The monitoring role installs this file beside ``gpuinfra.zip`` (the library and its node-side
runner, gpuinfra_deploy.nodecode). It runs sinfo once with the node's runner
(gpuinfra_node.reader.run of gpuinfra.monitoring.slurmnodes.SINFO_COMMAND) and writes
:func:`gpuinfra.monitoring.slurmnodes.node_states_text` to ``FILE`` atomically (a temporary file
in the same directory, then a rename), and the health check's circuit breaker
(:func:`~gpuinfra.monitoring.slurmnodes.breaker_text`, a second sinfo). A sinfo that fails gives
``gpuinfra_slurm_nodes_query_ok 0`` and no node series. Python's standard library only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ZIP_NAME = "gpuinfra.zip"  # gpuinfra_deploy.nodecode.ZIP_NAME, beside this file


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Slurm node states for node_exporter")
    parser.add_argument("--out", required=True, type=Path, help="the .prom file to write")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent / ZIP_NAME))
    from gpuinfra.health.breaker import SINFO as BREAKER_SINFO
    from gpuinfra.monitoring.slurmnodes import SINFO_COMMAND, breaker_text, node_states_text
    from gpuinfra_node.reader import run
    from gpuinfra_node.textfile import write_atomically

    write_atomically(args.out, node_states_text(run(SINFO_COMMAND), time.time())
                     + breaker_text(run(BREAKER_SINFO)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
