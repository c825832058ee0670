"""`gpuinfra perftest check`: judge each NIC's `ib_write_bw` run against its link rate.

    gpuinfra perftest check LOG [LOG...] --nic-gbps G [--json]
    gpuinfra perftest check LOG [LOG...] --inventory I --host H [--json]   (rates: the spec's)

One log per NIC (the client side's output). Exit 0 all pass, 1 any failure, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json

from gpuinfra.errors import GpuinfraError
from gpuinfra_cli.inputs import add_site_options, spec_node

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
    p.add_argument("--nic-gbps", type=float, metavar="G",
                   help="each NIC's usable rate in Gb/s (`ibstat` Rate: 400 NDR, 200 HDR); "
                   "default with --inventory/--host: each NIC's rate_gbps in the spec")
    p.add_argument("--json", action="store_true", help="print the JSON envelope (docs/json.md)")
    add_site_options(p)
    p.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from gpuinfra.envelope import envelope
    from gpuinfra.parsers.perftest import parse_ib_write_bw
    from gpuinfra.rdma.perftest import judge_ib_write_bw
    from gpuinfra_cli.inputs import one_stdin, read_capture
    from gpuinfra_cli.output import render

    if args.nic_gbps is not None and args.nic_gbps <= 0:
        raise GpuinfraError(f"--nic-gbps {args.nic_gbps:g}: must be a positive rate in Gb/s")
    spec_rates = _spec_rates(args) if args.inventory else {}
    if args.nic_gbps is None and not spec_rates:
        raise GpuinfraError("perftest check: give --nic-gbps, or --inventory and --host")
    one_stdin([(f"LOG {n}", log) for n, log in enumerate(args.logs, 1)])
    runs = []
    for log in args.logs:
        text = read_capture(log, "perftest")
        try:
            runs.append(parse_ib_write_bw(text))
        except GpuinfraError as exc:
            raise GpuinfraError(f"{log}: {exc}") from None
    rates = {run.device: _rate(run.device, args.nic_gbps, spec_rates, args.host)
             for run in runs}
    findings = [f for run in runs for f in judge_ib_write_bw(run, rates[run.device])]
    if args.json:
        print(json.dumps(envelope("perftest", findings, host=args.host, inputs=args.logs,
                                  extra={"nic_gbits_per_s": rates}), indent=2))
    else:
        said = ", ".join(sorted({f"{r:g}" for r in rates.values()}))
        print(render(findings, f"{args.host or 'node'} ib_write_bw ({len(runs)} NIC run(s), "
                               f"{said} Gb/s)"))
    return EXIT_FAIL if any(f.failed for f in findings) else EXIT_OK


def _spec_rates(args: argparse.Namespace) -> dict[str, float | None]:
    """Each RDMA NIC of --host's spec: its rate_gbps (None where the spec gives none)."""
    node, _ = spec_node(args)
    if not node.rdma_nics:
        raise GpuinfraError(f"{args.host}: the spec gives it no RDMA NICs (rdma_nics)")
    return {nic.name: nic.rate_gbps for nic in node.rdma_nics}


def _rate(device: str, given: float | None, spec: dict[str, float | None],
          host: str | None) -> float:
    """The rate ``device`` is held to: --nic-gbps, else its own in the spec, else the one rate
    every NIC of the spec shares."""
    if given is not None:
        return given
    rate = spec.get(device)
    shared = set(spec.values())
    if rate is None and len(shared) == 1:
        rate = shared.pop()
    if rate is None:
        raise GpuinfraError(f"{device}: the spec of {host} gives no rate_gbps for it (NICs: "
                            f"{', '.join(f'{k} {v}' for k, v in spec.items())}): pass --nic-gbps")
    return rate
