"""`gpuinfra report`: run the verify suite (gpuinfra_verify/) and print its per-node report.

    gpuinfra report --inventory inventory/lab.py               run the suite, then report
    gpuinfra report --inventory inventory/lab.py --junit FILE  report on a finished run
    ... --html build/report.html                                also write the HTML page
    ... --json                                                  the JSON envelope, not text
    ... --smoke build/smoke.json     add a smoke job's result (`gpuinfra smoke run --json`)

The report itself is gpuinfra_verify/report.py (the page: report_html.py; docs/report.md).
Exit 0 when every test passed or was skipped, 1 when any failed, 2 when there is nothing to
report on.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import gpuinfra_verify
from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_verify.report import (
    JobResult,
    build,
    job_result,
    read_junit,
    render_report,
    to_json,
)

# The installed suite itself (a checkout or the wheel): `gpuinfra report` runs from anywhere.
SUITE = Path(gpuinfra_verify.__file__).resolve().parent


def _run_suite(inventory: str, junit: Path, workers: str, quiet_stdout: bool = False,
               batch: bool = True, sudo: bool = False) -> int:
    """Run the verify suite (its output goes to the terminal, to stderr when stdout is for
    the JSON); pytest's exit code."""
    if not SUITE.is_dir():
        raise GpuinfraError(f"{SUITE} not found: reinstall gpuinfra (pip install gpuinfra)")
    command = [sys.executable, "-m", "pytest", str(SUITE), "--inventory", inventory, "-q",
               "-p", "no:cacheprovider", f"--junitxml={junit}"]
    if workers != "0":
        command += ["-n", workers]
    if not batch:
        command.append("--no-batch")
    if sudo:  # testinfra's own option: every command through sudo (gpuinfra_verify/ssh.py)
        command.append("--sudo")
    out = sys.stderr if quiet_stdout else sys.stdout
    print("$ " + " ".join(command[2:]), file=out, flush=True)
    return subprocess.run(command, check=False, stdout=out if quiet_stdout else None).returncode


def _job(path: str) -> JobResult:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise GpuinfraError(f"--smoke {path}: cannot be read ({exc.strerror}): write it with "
                            f"`gpuinfra smoke run ... --json > {path}`") from None
    except ValueError as exc:
        raise GpuinfraError(f"--smoke {path}: not JSON ({exc}): give the file `gpuinfra smoke "
                            f"run|check ... --json` printed") from None
    return job_result(data, path)


def cmd_report(args: argparse.Namespace) -> int:
    from gpuinfra_deploy.run.inventory import load_hosts

    if args.junit and not Path(args.junit).is_file():
        raise GpuinfraError(f"{args.junit}: no such file (write it with `pytest gpuinfra_verify "
                            f"--inventory {args.inventory} --junitxml {args.junit}`)")
    jobs = [_job(path) for path in args.smoke or []]  # read before the suite runs
    hosts, duplicates = load_hosts(args.inventory)
    spec = build_spec(hosts, duplicates)
    with tempfile.TemporaryDirectory(prefix="gpuinfra-report-") as tmp:
        junit = Path(args.junit) if args.junit else Path(tmp) / "verify.xml"
        if not args.junit:
            rc = _run_suite(args.inventory, junit, args.workers, args.json,
                            batch=not args.no_batch, sudo=args.sudo)
            if rc not in (0, 1) or not junit.is_file():
                print(f"gpuinfra report: the verify suite did not run (pytest exit {rc})",
                      file=sys.stderr)
                return 2
        try:
            cases = read_junit(junit.read_text())
        except ET.ParseError as exc:
            raise GpuinfraError(f"{junit}: not a junit XML file: {exc}") from None
    report = build(spec, cases, str(args.junit or "this run"), jobs)
    if args.html:
        from gpuinfra_verify.report_html import render_html

        path = Path(args.html)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_html(report), encoding="utf-8")
    if args.json:
        print(json.dumps(to_json(report, [str(args.junit)] if args.junit else []), indent=2))
    else:
        print(render_report(report))
    if args.html:
        print(f"HTML report: {Path(args.html).resolve()}", file=sys.stderr if args.json
              else sys.stdout)
    return 1 if report.verdict == "fail" else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `report` to the gpuinfra command line."""
    report = sub.add_parser("report", help="per-node report of the verify suite",
                            description=__doc__.split("\n\n")[0])
    report.add_argument("--inventory", required=True, metavar="FILE",
                        help="the pyinfra inventory (inventory/<site>.py)")
    report.add_argument("--junit", metavar="FILE",
                        help="read this junit XML of a finished `pytest verify` run "
                             "instead of running the suite")
    report.add_argument("--html", metavar="FILE",
                        help="also write the report as one self-contained HTML page")
    report.add_argument("--json", action="store_true",
                        help="print the report as the gpuinfra JSON envelope (kind report)")
    report.add_argument("--smoke", action="append", metavar="FILE",
                        help="add a smoke job's result (the JSON `gpuinfra smoke run|check "
                             "--json` printed); a failed job fails the report")
    report.add_argument("-n", "--workers", default="4", metavar="N",
                        help="pytest-xdist workers when running the suite (0: serial)")
    report.add_argument("--no-batch", action="store_true",
                        help="send each check's command in an SSH round trip of its own "
                             "(testinfra's way), not each node's read-only commands in one "
                             "(gpuinfra_verify/batch.py)")
    report.add_argument("--sudo", action="store_true",
                        help="the SSH user is not root: the suite's commands run through sudo "
                             "(passwordless, as `gpuinfra deploy --sudo`)")
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
