"""Benchmark: the verify suite's reading of a GPU node, one SSH round trip against one per
command, on the running lab.

    .venv/bin/python -m bench.verify_reading [--inventory inventory/lab.py] [--runs 5]

For each GPU node the verify suite reads (test_gpu, test_health), takes the node's reading
both ways with the suite's own code (gpuinfra_verify/reading.py): through the node's health
check (``gpuinfra-health reading``: every command at once on the node, one round trip) and
command by command over SSH (the same table, what a node without the health check gets), and
prints the commands sent, the median wall time of each and their ratio, and whether the
library's verdicts on both readings are the same. Needs the lab up and deployed (`make
demo`, or `gpuinfra lab up && pyinfra -y inventory/lab.py deploy.py`). Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inventory", default="inventory/lab.py")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from gpuinfra.health.judge import judge
    from gpuinfra_verify import reading as r
    from gpuinfra_verify.expect import site_from_json
    from gpuinfra_verify.ssh import testinfra_host

    loaded = subprocess.run([sys.executable, "-m", "gpuinfra_verify.inventory_json",
                             str(Path(args.inventory).resolve())], cwd=REPO,
                            capture_output=True, text=True, check=False)
    if loaded.returncode != 0:
        print(loaded.stderr.strip().splitlines()[-1], file=sys.stderr)
        return 2
    site = site_from_json(args.inventory, loaded.stdout)
    nodes = [n for n in site.spec.nodes if n.gpus is not None and r.has_health_check(n)]
    if not nodes:
        print(f"{args.inventory}: no GPU node with the health check", file=sys.stderr)
        return 2
    same = True
    for node in nodes:
        host = testinfra_host(site.target(node.name))
        expect = r.spec_expectation(node)
        timed: dict[str, list[float]] = {"program": [], "one-by-one": []}
        for _ in range(args.runs):
            for way, take in (("program", r.from_program),
                              ("one-by-one", lambda h, e=expect: r.one_by_one(h, e))):
                started = time.perf_counter()
                taken = take(host)
                timed[way].append(time.perf_counter() - started)
                if taken.error:
                    print(f"{node.name}: {taken.error}", file=sys.stderr)
                    return 1
                if way == "program":
                    program = taken
                else:
                    one = taken
        verdicts = [[f.to_json() for f in judge(expect, x.reading).findings]
                    for x in (program, one)]
        same = same and verdicts[0] == verdicts[1]
        fast, slow = (statistics.median(timed[w]) for w in ("program", "one-by-one"))
        print(f"{node.name}: 1 command {fast * 1000:.0f} ms against {len(one.reading)} commands "
              f"{slow * 1000:.0f} ms (medians of {args.runs}): {slow / fast:.1f}x; same "
              f"verdicts: {verdicts[0] == verdicts[1]}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
