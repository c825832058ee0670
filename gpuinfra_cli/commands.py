"""Subcommands `validate`, `parse` and `check`: read files, call the library, print results."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpuinfra.envelope import envelope
from gpuinfra.errors import GpuinfraError, ParseError
from gpuinfra.knowledge.gpus import GPU_MODELS, gpu_model
from gpuinfra.knowledge.lookup import require_model, require_profile
from gpuinfra.knowledge.topology import PROFILES
from gpuinfra.parsers import ALIASES, PARSERS, kind_of, parser_for
from gpuinfra.parsers.sniff import mismatch, without_echoed_command
from gpuinfra_cli import check_host, check_virt
from gpuinfra_cli.inputs import (
    STDIN,
    add_group_data,
    group_data_of,
    one_stdin,
    read_capture,
    read_text,
)
from gpuinfra_cli.output import render

EXIT_OK, EXIT_FAIL, EXIT_UNUSABLE, EXIT_NOT_CHECKED = 0, 1, 2, 3


# ---------------------------------------------------------------------------- validate

def add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a site's spec before any host is touched",
                       description="Validate inventory/<site>.py with its group_data/ (found "
                       "beside the working directory or the inventory, or given with "
                       "--group-data). Exit 0 valid, 1 invalid, 2 unusable input.")
    p.add_argument("inventory", help="the pyinfra inventory file, e.g. inventory/lab.py")
    add_group_data(p)
    p.set_defaults(func=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    from gpuinfra_deploy.run.site import validated_site

    site = validated_site(args.inventory, group_data_of(args))
    if site is None:
        return EXIT_FAIL
    from gpuinfra.platforms import os_notes

    hosts, spec = site
    from gpuinfra_deploy import templates

    try:  # the site's own templates (templates/ beside its inventory), as the gate judges them
        templates.use_site_of(args.inventory)
    except templates.TemplateProblem as exc:
        print(f"{args.inventory}: {exc}", file=sys.stderr)
        return EXIT_FAIL
    gpu_hosts = sum(1 for h in hosts if h.data.get("gpu_model"))
    print(f"{args.inventory}: valid ({len(hosts)} hosts, {gpu_hosts} with GPUs)")
    for note in os_notes({s for n in spec.nodes for s in n.schedulers}):
        print(f"note: {note}")
    return EXIT_OK


# ---------------------------------------------------------------------------- parse

def add_parse(sub: argparse._SubParsersAction) -> None:
    width = max(map(len, [*PARSERS, *ALIASES])) + 2
    lines = []
    for kind, parser in PARSERS.items():
        lines.append(f"  {kind:{width}}{parser.command}")
        lines += [f"  {alias:{width}}the same as {kind}" for alias, to in ALIASES.items()
                  if to == kind]
    p = sub.add_parser("parse", help="print a captured tool output as JSON",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Parse a captured output and print JSON. Exit 2: the file "
                       "cannot be read, is empty, or its parser cannot read it (one line on "
                       "standard error says why). A capture read in part (cut, filtered, "
                       "elided) is printed with its \"cuts\", and standard error says so.\n\n"
                       "KINDs (`gpuinfra check` judges the same captures):\n"
                       + "\n".join(lines))
    p.add_argument("kind", choices=[*PARSERS, *ALIASES], metavar="KIND")
    p.add_argument("file", help="the captured output ('-' for standard input)")
    p.add_argument("--mode", choices=list("rwnap"),
                   help="for p2p: which capability the capture shows (topo -p2p r|w|n|a|p)")
    p.set_defaults(func=run_parse)


def run_parse(args: argparse.Namespace) -> int:
    kind = kind_of(args.kind)
    name = "standard input" if args.file == STDIN else args.file
    text, _echoed = without_echoed_command(read_text(args.file), kind)
    if not text.strip() and not PARSERS[kind].blank:
        raise GpuinfraError(f"{name}: empty: nothing to parse as {args.kind} "
                            f"(`{PARSERS[kind].command}`)")
    parse = parser_for(kind)
    try:
        result = parse(text, mode=args.mode) if kind == "p2p" else parse(text)
    except ParseError as exc:
        hint = mismatch(kind, text)
        raise GpuinfraError(f"{name}: {exc}" + (f" ({hint})" if hint else "")) from None
    data = result.to_json()
    print(json.dumps(data, indent=2))
    cuts = data.get("cuts") if isinstance(data, dict) else None
    if cuts:
        print(f"gpuinfra: {name}: read in part ({len(cuts)} cut(s), under \"cuts\" in the "
              f"JSON): {cuts[0]}", file=sys.stderr)
    return EXIT_OK


# ---------------------------------------------------------------------------- check

def add_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="verdicts on captured outputs (a node's or a pasted ticket's)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Judge what a node printed, saved to a file, with the same rules as the "
        "verify suite.\n"
        "  nvidia-smi:      --profile P --gpus N [--topo F] [--p2p MODE:F] [--nvlink F] "
        "[--smi-q F]\n"
        "                   (or --inventory I --host H: the host's spec is the expectation)\n"
        "  RDMA and kernel: --ibstat F, --ibv-devinfo F, --show-gids F, --mlxconfig F, "
        "--lspci-vvv F,\n"
        "                   --lsmod F, --dmesg F, --cmdline F (expectation: --nic/--iommu/... "
        "or --inventory I --host H)\n"
        "  VFIO/Kubernetes: check KIND FILE, KIND one of iommu-groups, lspci-nnk, "
        "virsh-hostdev, vm-topo,\n"
        "                   describe-node, gpu-pods, plugin-log (`gpuinfra check KIND -h`)\n"
        "Any one FILE may be '-' (standard input). A capture of another command than the option "
        "asks for is refused, naming the command it looks like.\n"
        "Exit 0 all pass, 1 any failure, 2 unusable input, 3 no failure found but the capture "
        "was cut or held nothing to judge (never a pass).")
    p.add_argument("--profile", required=True, help=f"one of: {', '.join(PROFILES)}")
    p.add_argument("--gpus", required=True, type=int, help="GPUs the node must have")
    p.add_argument("--model", help=f"GPU model (sets link counts and speeds): "
                   f"{', '.join(GPU_MODELS)}")
    p.add_argument("--min-links", type=int, help="minimum NVLinks per required pair (overrides "
                   "the model's)")
    p.add_argument("--topo", help="output of `nvidia-smi topo -m`")
    p.add_argument("--p2p", action="append", default=[], metavar="[MODE:]FILE",
                   help="output of `nvidia-smi topo -p2p MODE` (repeatable; e.g. r:p2p-r.txt)")
    p.add_argument("--nvlink", help="output of `nvidia-smi nvlink --status`")
    p.add_argument("--smi-q", metavar="FILE", help="output of `nvidia-smi -q` (each GPU's "
                   "NVLink fabric registration: NVSwitch and NVLink-domain profiles)")
    p.add_argument("--json", action="store_true", help="print the JSON envelope (docs/json.md): "
                   "host, inputs, profile, model, summary, verdict, causes, findings")
    p.add_argument("--matrix", action="store_true", help="also print the GPU x GPU grid of "
                   "the pair checks (NVLink, P2P): '.' as expected, the cell seen where not")
    p.set_defaults(func=run_check)
    check_host.add_to(p)  # the RDMA and kernel captures (issue 24)
    check_virt.add_kinds(p)  # VFIO and Kubernetes capture kinds: check KIND FILE


def run_check(args: argparse.Namespace) -> int:
    from gpuinfra.parsers.fabric import parse_fabric
    from gpuinfra.parsers.nvlink import parse_nvlink
    from gpuinfra.parsers.p2p import parse_p2p
    from gpuinfra.parsers.topo import parse_topo_partial
    from gpuinfra.verdicts import check_system

    require_profile(args.profile)
    if args.model:
        require_model(args.model)
    if args.gpus < 1 or (args.min_links is not None and args.min_links < 1):
        raise GpuinfraError("--gpus and --min-links must be positive integers")
    if not (args.topo or args.p2p or args.nvlink or args.smi_q):
        raise GpuinfraError("nothing to check: give at least one of --topo, --p2p, --nvlink, "
                            "--smi-q")
    p2p_files = list(map(_split_mode, args.p2p))
    one_stdin([("--topo", args.topo), *(("--p2p", f) for _, f in p2p_files),
               ("--nvlink", args.nvlink), ("--smi-q", args.smi_q)])
    topo = parse_topo_partial(read_capture(args.topo, "topo")) if args.topo else None
    p2p = [parse_p2p(read_capture(f, "p2p"), mode=m) for m, f in p2p_files]
    nvlink = parse_nvlink(read_capture(args.nvlink, "nvlink")) if args.nvlink else None
    fabric = parse_fabric(read_capture(args.smi_q, "fabric")) if args.smi_q else None
    model = gpu_model(args.model).key if args.model else None
    findings = check_system(args.profile, args.gpus, model, args.min_links, topo=topo, p2p=p2p,
                            nvlink=nvlink, fabric=fabric)
    inputs = [path for path in (args.topo, *(f for _, f in p2p_files), args.nvlink, args.smi_q)
              if path]
    cuts = (list(fabric.cuts) if fabric is not None else []) + \
        ([f"topo: {c}" for c in topo.cuts] if topo is not None else [])
    if args.json:
        source = getattr(args, "expectation_from", "--profile/--gpus/--model")
        print(json.dumps(envelope("check", findings, host=args.host, inputs=inputs,
                                  profile=args.profile, model=model, complete=not cuts,
                                  extra={"gpus": args.gpus, "expectation_from": source,
                                         "cuts": cuts}),
                         indent=2))
    else:
        what = f"{args.host or 'node'} ({args.gpus}x {model or 'GPUs'}, {args.profile})"
        if getattr(args, "expectation_from", None):
            what += f", from {args.expectation_from}"
        print(render(findings, what))
        if args.matrix:
            print(_matrices(findings, args.gpus, p2p))
        for cut in cuts:
            print(f"note  cut: {cut}")
        if cuts and not any(f.failed for f in findings):
            print("note  no failure shown, but the capture is cut: not a pass (exit 3)")
    if any(f.failed for f in findings):
        return EXIT_FAIL
    return EXIT_NOT_CHECKED if cuts else EXIT_OK


def _matrices(findings: list[Any], gpus: int, p2p: list[Any]) -> str:
    from gpuinfra_cli.output import matrix

    checks = [("nvlink-topology", "NVLink (topo -m)"), ("nvlink-links", "")]
    checks += [(f"p2p-{m.mode}" if m.mode else "p2p", f"P2P {m.mode or ''} (topo -p2p)")
               for m in p2p]
    lines: list[str] = []
    for check, title in checks:
        grid = matrix(findings, check, gpus, f"\n{title}: '.' as expected, else what was seen, "
                      "'-' not required") if title else []
        lines += grid
    return "\n".join(lines) if lines else "\n(no pair check to draw: give --topo or --p2p)"


def _split_mode(spec: str) -> tuple[str | None, str]:
    if len(spec) > 2 and spec[1] == ":" and spec[0] in "rwnap":
        return spec[0], spec[2:]
    return None, spec


def render_findings(findings: list[Any], what: str = "checks") -> str:
    """The ticket text of ``findings`` (gpuinfra_cli.output.render)."""
    return render(findings, what)
