"""Benchmark: every parser on 50 MB inputs, to show its work grows linearly with the input.

    .venv/bin/python -m bench.parsers [--mb 50]

For each parser (gpuinfra.parsers.PARSERS) and each input shape, built from the parser's own
real capture (tests/fixtures/real): the time to parse a 1/10 size input and the full size,
and their ratio (about 10 for linear work; about 100 for quadratic). A parser may refuse an
input (ParseError) as long as it does so in linear time. Not a test: `make test` does not
run it; tests/unit/test_parsers_hostile.py bounds the inputs that used to take seconds.

Shapes:
  lines   the capture's lines repeated to the size (many lines; later ones may be refused)
  line    one line: the capture's longest line repeated without newlines
  spaces  the capture's first line, then one run of spaces, then 'x'
  escapes the capture behind one terminal title escape per line, repeated
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gpuinfra.errors import ParseError
from gpuinfra.parsers import PARSERS, parser_for

MB = 1 << 20
REAL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real"
# The real capture each parser's inputs are built from (read as data: nothing here imports
# the tests).
CAPTURES = {
    "topo": "nvidia-smi-topo-m/8x-h100-sxm-nv18-no-nics-spaces.txt",
    "p2p": "nvidia-smi-topo-p2p/8x-h100-80gb-hbm3-p2p-r-all-OK.txt",
    "nvlink": "nvidia-smi-nvlink/h100-sxm-gpu0-nvlink-status-i0-18-links-26.562.txt",
    "gpus": "nvidia-smi-query-gpu/h200-8gpu-index-name-mem-driver-power-pstate.txt",
    "mig": "nvidia-smi-mig-lgip/4x-h100-sxm5-80gb-mig-lgip-stackhpc.txt",
    "lspci": "lspci/4x-h100-sxm5-80gb-lspci-nn-grep-nvidia.txt",
    "mlxconfig": "mlxconfig/connectx5-mcx555a-edr-ib-mlxconfig-q-full-bluebanquise.txt",
    "ibstat": "ibstat/h100-node-8x-cx7-ndr-ib-plus-bluefield3-bond-spaces.txt",
    "ibv": "ibv_devinfo/kaust-ibex-login-connectx6-hdr100-1port.txt",
}


def capture(kind: str) -> str:
    return (REAL / CAPTURES[kind]).read_text()


def shapes(text: str) -> dict[str, Callable[[int], str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    longest = max(lines, key=len)
    escaped = "".join(f"\x1b]0;root@node: ~\x07{line}\n" for line in lines)

    def repeat(unit: str, size: int) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    return {
        "lines": lambda size: repeat(text if text.endswith("\n") else text + "\n", size),
        "line": lambda size: repeat(longest + " ", size) + "\n",
        "spaces": lambda size: lines[0] + " " * size + "x\n",
        "escapes": lambda size: repeat(escaped, size),
    }


def timed(parse: Callable[[str], object], text: str) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        parse(text)
        outcome = "parsed"
    except ParseError:
        outcome = "refused"
    return time.perf_counter() - start, outcome


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.parsers", description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=50, help="full input size in MB (50)")
    args = parser.parse_args(argv)
    size = args.mb * MB
    print(f"{'parser':<10}{'shape':<9}{'1/10 s':>8}{'full s':>8}{'ratio':>7}  outcome")
    worst = 0.0
    for kind in PARSERS:
        parse = parser_for(kind)
        if kind == "p2p":
            parse = lambda text, _p=parse: _p(text, mode="r")  # noqa: E731
        for shape, build in shapes(capture(kind)).items():
            small, _ = timed(parse, build(size // 10))
            full, outcome = timed(parse, build(size))
            worst = max(worst, full)
            ratio = full / small if small > 0 else float("inf")
            print(f"{kind:<10}{shape:<9}{small:8.2f}{full:8.2f}{ratio:7.1f}  {outcome}",
                  flush=True)
    print(f"slowest full-size parse: {worst:.2f} s for {args.mb} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
