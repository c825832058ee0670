"""`gpuinfra` command line: the I/O edge around the pure `gpuinfra` library.

    gpuinfra validate inventory/<site>.py      exit 0 valid, 1 invalid, 2 unusable input
    gpuinfra parse KIND FILE                   JSON of a captured tool output
    gpuinfra check --profile P --gpus N ...    verdicts on captured outputs
    gpuinfra lab up|down|reboot|status         the local podman lab
    gpuinfra report --inventory I [--junit F]  per-node report of the verify suite
    gpuinfra nccl script|check ...             NCCL all-reduce job and its judgement
    gpuinfra perftest check LOG... --nic-gbps G  each NIC's ib_write_bw against its rate
    gpuinfra roll --inventory I [--status]     a disruptive change rolled, drained, resumable
    gpuinfra deploy --inventory I              the deploy, then the reboots it needs, rolled
    gpuinfra health breaker|reset-breaker ...  the health check's circuit breaker
    gpuinfra render I --out DIR --os|--facts   every file each host would get, offline
    gpuinfra smoke script|check|run|manifest   multi-node PyTorch DDP smoke job

Bad input never produces a traceback: every expected error is caught here and printed as one
clear message, with exit code 2 (unusable input) or 1 (a finding / an invalid spec).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpuinfra.errors import GpuinfraError
from gpuinfra_cli import commands


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line hint instead of a usage dump on bad arguments."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"gpuinfra: error: {message}\n(run `{self.prog} --help` for the options)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpuinfra", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    commands.add_validate(sub)
    commands.add_parse(sub)
    commands.add_check(sub)
    from gpuinfra_cli import deploy, health, lab, nccl, perftest, render, report, roll, smoke

    lab.add_parser(sub)
    report.add_parser(sub)
    nccl.add_parser(sub)
    perftest.add_parser(sub)
    roll.add_parser(sub)
    deploy.add_parser(sub)
    health.add_parser(sub)
    render.add_parser(sub)
    smoke.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except GpuinfraError as exc:
        print(f"gpuinfra: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head`: not an error of the input
        sys.stderr.close()
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        print(f"gpuinfra: cannot read input: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
