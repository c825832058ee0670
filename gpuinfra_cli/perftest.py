"""`gpuinfra perftest check`: judge each NIC's `ib_write_bw` run against its link rate.

    gpuinfra perftest check LOG [LOG...] --nic-gbps G [--json]

One log per NIC (the client side's output). Exit 0 all pass, 1 any failure, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json

from gpuinfra.errors import GpuinfraError

EXIT_OK, EXIT_FAIL = 0, 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `perftest check` to the gpuinfra command line."""
    perftest = sub.add_parser("perftest", help="per-NIC RDMA bandwidth check (ib_write_bw)",
                              description=__doc__.split("\n\n")[0])
    actions = perftest.add_subparsers(dest="perftest_command", required=True,
                                      parser_class=type(perftest))
    p = actions.add_parser("check", help="verdicts on ib_write_bw client logs",
                           description="Judge ib_write_bw runs (one NIC each): BW average at "
                           "the largest message size against what a healthy NIC of this rate "
                           "reaches. Exit 0 all pass, 1 any failure, 2 unusable input.")
    p.add_argument("logs", nargs="+", metavar="LOG",
                   help="ib_write_bw client output ('-' for standard input)")
    p.add_argument("--nic-gbps", type=float, required=True, metavar="G",
                   help="each NIC's usable rate in Gb/s (`ibstat` Rate: 400 NDR, 200 HDR)")
    p.add_argument("--json", action="store_true", help="print findings as JSON")
    p.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from gpuinfra.parsers.perftest import parse_ib_write_bw
    from gpuinfra.perftest import judge_runs
    from gpuinfra_cli.commands import one_stdin, read_capture, render_findings

    if args.nic_gbps <= 0:
        raise GpuinfraError(f"--nic-gbps {args.nic_gbps:g}: must be a positive rate in Gb/s")
    one_stdin([(f"LOG {n}", log) for n, log in enumerate(args.logs, 1)])
    runs = []
    for log in args.logs:
        text = read_capture(log, "perftest")
        try:
            runs.append(parse_ib_write_bw(text))
        except GpuinfraError as exc:
            raise GpuinfraError(f"{log}: {exc}") from None
    findings = judge_runs(runs, args.nic_gbps)
    if args.json:
        print(json.dumps([f.to_json() for f in findings], indent=2))
    else:
        print(render_findings(findings))
    return EXIT_FAIL if any(f.failed for f in findings) else EXIT_OK
