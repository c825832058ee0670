"""`gpuinfra report`: run the verify suite (gpuinfra_verify/) and print its per-node report.

    gpuinfra report --inventory inventory/lab.py               run the suite, then report
    gpuinfra report --inventory inventory/lab.py --junit FILE  report on a finished run

The report itself is gpuinfra_verify/report.py. Exit 0 when every test passed or was skipped, 1 when
any failed, 2 when there is nothing to report on.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import gpuinfra_verify
from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_verify.report import read_junit, render

# The installed suite itself (a checkout or the wheel): `gpuinfra report` runs from anywhere.
SUITE = Path(gpuinfra_verify.__file__).resolve().parent


def _run_suite(inventory: str, junit: Path, workers: str) -> int:
    """Run the verify suite (its output goes to the terminal); pytest's exit code."""
    if not SUITE.is_dir():
        raise GpuinfraError(f"{SUITE} not found: reinstall gpuinfra (pip install gpuinfra)")
    command = [sys.executable, "-m", "pytest", str(SUITE), "--inventory", inventory, "-q",
               "-p", "no:cacheprovider", f"--junitxml={junit}"]
    if workers != "0":
        command += ["-n", workers]
    print("$ " + " ".join(command[2:]), flush=True)
    return subprocess.run(command, check=False).returncode


def cmd_report(args: argparse.Namespace) -> int:
    from gpuinfra_deploy.run.inventory import load_hosts

    if args.junit and not Path(args.junit).is_file():
        raise GpuinfraError(f"{args.junit}: no such file (write it with `pytest gpuinfra_verify "
                            f"--inventory {args.inventory} --junitxml {args.junit}`)")
    hosts, duplicates = load_hosts(args.inventory)
    spec = build_spec(hosts, duplicates)
    with tempfile.TemporaryDirectory(prefix="gpuinfra-report-") as tmp:
        junit = Path(args.junit) if args.junit else Path(tmp) / "verify.xml"
        if not args.junit:
            rc = _run_suite(args.inventory, junit, args.workers)
            if rc not in (0, 1) or not junit.is_file():
                print(f"gpuinfra report: the verify suite did not run (pytest exit {rc})",
                      file=sys.stderr)
                return 2
        try:
            cases = read_junit(junit.read_text())
        except ET.ParseError as exc:
            raise GpuinfraError(f"{junit}: not a junit XML file: {exc}") from None
    text, code = render(spec, cases, str(args.junit or "this run"))
    print(text)
    return code


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `report` to the gpuinfra command line."""
    report = sub.add_parser("report", help="per-node report of the verify suite",
                            description=__doc__.split("\n\n")[0])
    report.add_argument("--inventory", required=True, metavar="FILE",
                        help="the pyinfra inventory (inventory/<site>.py)")
    report.add_argument("--junit", metavar="FILE",
                        help="read this junit XML of a finished `pytest verify` run "
                             "instead of running the suite")
    report.add_argument("-n", "--workers", default="4", metavar="N",
                        help="pytest-xdist workers when running the suite (0: serial)")
    report.set_defaults(func=cmd_report)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `report` alone (python -m gpuinfra_cli.report --inventory ...)."""
    parser = argparse.ArgumentParser(prog="gpuinfra")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["report", *(argv if argv is not None else sys.argv[1:])])
    try:
        return int(args.func(args))
    except GpuinfraError as exc:
        print(f"gpuinfra: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
