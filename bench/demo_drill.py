"""Drill: `make demo` on a fresh lab, N times in a row (default 5), each timed.

    flock /work/heavy.lock .venv/bin/python -m bench.demo_drill [--runs 5] [--keep]

Before each run the lab is removed (`gpuinfra lab down`), so every run starts from nothing but
the cached image: lab up, deploy, lab reboot (which must come back whole), the idempotence
gate, the verify report, the broken slurm.conf refusal. Stops at the first failure, printing
the tail of its log (.lab/demo-drill-<n>.log keeps each run's output). The lab is removed at
the end unless --keep. Exit 0 when every run passed.

Not part of `make test` (each run takes minutes); its results are quoted in gpuinfra_lab/README.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GPUINFRA = str(REPO / ".venv" / "bin" / "gpuinfra")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.demo_drill", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="leave the last lab up")
    args = parser.parse_args(argv)
    times = []
    try:
        for run in range(1, args.runs + 1):
            subprocess.run([GPUINFRA, "lab", "down"], cwd=REPO, capture_output=True, check=True)
            log = REPO / ".lab" / f"demo-drill-{run}.log"
            log.parent.mkdir(exist_ok=True)
            start = time.monotonic()
            with log.open("w") as out:
                rc = subprocess.run(["make", "demo"], cwd=REPO, stdout=out,
                                    stderr=subprocess.STDOUT).returncode
            took = time.monotonic() - start
            times.append(took)
            print(f"run {run}: make demo exit {rc} in {took:.0f} s ({log.name})", flush=True)
            if rc != 0:
                print("\n".join(log.read_text().splitlines()[-40:]))
                return 1
    finally:
        if not args.keep:
            subprocess.run([GPUINFRA, "lab", "down"], cwd=REPO, capture_output=True)
    print(f"{len(times)}/{args.runs} runs passed in a row; times: "
          f"{', '.join(f'{t:.0f} s' for t in times)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
