"""`gpuinfra nccl`: the multi-node NCCL all-reduce check for a Slurm GPU partition.

    gpuinfra nccl script --inventory inventory/<site>.py [--partition P] [--nodes N]
                         [--nic-gbps G | --min-busbw X] [--mpi pmix] [--binary PATH]
                         [--output FILE]                    write the sbatch job
    gpuinfra nccl check LOG --profile P --model M [--nodes N] [--gpus G]
                        [--nics K --nic-gbps G | --min-busbw X] [--json]
                                                            diagnose a finished job's log

`script` exits 1 when the spec is invalid (every problem listed, as `gpuinfra validate`), 2 when
the partition cannot be tested in one run. `check` exits 0 pass, 1 fail, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.jobs.nccl import JobSettings, plan_job, sbatch_script
from gpuinfra.jobs.nccl_verdict import check_shape, judge_all_reduce, unjudged
from gpuinfra.knowledge.nccl import min_busbw
from gpuinfra.knowledge.topology import PROFILES
from gpuinfra.parsers.nccl import parse_all_reduce
from gpuinfra.rdma.node import gid_index
from gpuinfra_cli.inputs import add_site_options, spec_node

EXIT_OK, EXIT_FAIL, EXIT_UNUSABLE = 0, 1, 2
_SIZE = re.compile(r"^(\d+)([KMG]?)$", re.IGNORECASE)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `nccl script` and `nccl check` to the gpuinfra command line."""
    nccl = sub.add_parser("nccl", help="multi-node NCCL all-reduce check (Slurm)",
                          description=__doc__.split("\n\n")[0])
    actions = nccl.add_subparsers(dest="nccl_command", required=True, parser_class=type(nccl))
    _add_script(actions)
    _add_check(actions)


def _add_script(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser("script", help="write the sbatch job for a partition",
                           description="Render an sbatch script that runs all_reduce_perf on the "
                           "GPU nodes of a Slurm partition; its exit code is the verdict.")
    p.add_argument("--inventory", required=True, metavar="FILE", help="inventory/<site>.py")
    p.add_argument("--partition", help="Slurm partition (default: the spec's default one)")
    p.add_argument("--nodes", type=int, metavar="N",
                   help="nodes to use (default: every eligible node of the partition)")
    floor = p.add_mutually_exclusive_group()
    floor.add_argument("--nic-gbps", type=float, metavar="G",
                       help="rate of each RDMA NIC in Gb/s (required across nodes with NICs)")
    floor.add_argument("--min-busbw", type=float, metavar="X",
                       help="pass floor in GB/s, instead of the knowledge table")
    p.add_argument("--mpi", default="pmix", help="srun --mpi plugin (default: pmix)")
    p.add_argument("--binary", default="all_reduce_perf",
                   help="all_reduce_perf built with MPI=1 (default: found on PATH)")
    p.add_argument("--time", default="00:30:00", help="job time limit (default: 00:30:00)")
    p.add_argument("--output", metavar="FILE", help="write the script here (default: stdout)")
    p.set_defaults(func=run_script)


def _add_check(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser("check", help="verdicts on an all_reduce_perf log",
                           description="Parse and judge an all_reduce_perf log. With --inventory "
                           "and --host, the profile, model, GPUs, NICs and their rate come from "
                           "that host's spec (an option given still wins). Exit 0 all pass, 1 "
                           "any failure, 2 unusable input.")
    p.add_argument("log", help="the job's log ('-' for standard input)")
    p.add_argument("--profile", help=f"one of: {', '.join(PROFILES)} (required without "
                   "--inventory)")
    p.add_argument("--model", help="GPU model key, e.g. H100-SXM5-80GB (required without "
                   "--inventory)")
    p.add_argument("--nodes", type=int, help="nodes the job should span (default: from the log)")
    p.add_argument("--gpus", type=int, help="GPUs per node (default: from the log)")
    p.add_argument("--nics", type=int, help="RDMA NICs per node (default: 0, or the spec's)")
    floor = p.add_mutually_exclusive_group()
    floor.add_argument("--nic-gbps", type=float, metavar="G", help="rate of each NIC in Gb/s")
    floor.add_argument("--min-busbw", type=float, metavar="X", help="pass floor in GB/s")
    p.add_argument("--max-size", type=_bytes, metavar="SIZE",
                   help="largest size the sweep must reach, e.g. 8G (default: 1G)")
    p.add_argument("--json", action="store_true", help="print the JSON envelope (docs/json.md)")
    add_site_options(p)
    p.set_defaults(func=run_check)


def _bytes(text: str) -> int:
    """"8G" -> 8 GiB, as nccl-tests reads -e (powers of 1024)."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 8G, 512M or 1024")
    return int(match[1]) * 1024 ** " KMG".index((match[2] or " ").upper())


# ---------------------------------------------------------------------------- script

def run_script(args: argparse.Namespace) -> int:
    from gpuinfra_deploy.run.site import validated_site

    site = validated_site(args.inventory)
    if site is None:
        return EXIT_FAIL
    _, spec = site
    plan = plan_job(spec, args.partition, args.nodes)  # GRES types: the nodes' settings
    node, gpus = plan.first, plan.first.gpus
    assert gpus is not None  # plan_job keeps GPU nodes only
    rates = {nic.rate_gbps for nic in node.rdma_nics}
    nic_gbps = args.nic_gbps  # else the spec's rate, when every NIC of the node declares one
    if nic_gbps is None and args.min_busbw is None and len(rates) == 1 and None not in rates:
        nic_gbps = rates.pop()
    threshold = min_busbw(gpus.topology.name, gpus.model.key, gpus.count, len(plan.nodes),
                          len(node.rdma_nics), nic_gbps, args.min_busbw)
    settings = JobSettings(mpi=args.mpi, binary=args.binary, time_limit=args.time,
                           exclude=plan.excluded)
    text = sbatch_script(plan.partition, threshold, plan.gpu_type,
                         [nic.name for nic in node.rdma_nics], settings,
                         gid_index(node.rdma_nics))
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    if threshold.derived:
        print(f"note: {threshold.derived}", file=sys.stderr)
    summary = (f"{len(plan.nodes)} node(s) x {gpus.count} {gpus.model.key} in partition "
               f"{plan.partition}: pass at busbw >= {threshold.min_busbw:g} GB/s")
    from gpuinfra_cli.output import emit_script

    emit_script(text, args.output, summary)
    return EXIT_OK


# ---------------------------------------------------------------------------- check

def run_check(args: argparse.Namespace) -> int:
    from gpuinfra.envelope import envelope
    from gpuinfra_cli.inputs import read_capture
    from gpuinfra_cli.output import render

    given = _from_inventory(args)
    if not (given["profile"] and given["model"]):
        raise GpuinfraError("nccl check: give --profile and --model, or --inventory and --host")
    text = read_capture(args.log, "nccl")
    result = parse_all_reduce(text)
    shape = check_shape(result, args.nodes, given["gpus"])  # first: a floor is one shape's
    nodes = args.nodes or len(result.hosts) or 1
    floor = None
    if shape.failed:
        findings = unjudged(result, shape)
    else:
        gpus = given["gpus"] or _gpus_from_log(result.ranks, nodes)
        threshold = min_busbw(given["profile"], given["model"], gpus, nodes, given["nics"],
                              given["nic_gbps"], args.min_busbw)
        floor = threshold.min_busbw
        findings = judge_all_reduce(result, threshold, args.max_size)
    if args.json:
        extra = {"nodes": nodes, "gpus_per_node": given["gpus"], "nics": given["nics"],
                 "nic_gbits_per_s": given["nic_gbps"], "min_busbw_gbytes_per_s": floor}
        print(json.dumps(envelope("nccl", findings, host=args.host, inputs=[args.log],
                                  profile=given["profile"], model=given["model"], extra=extra),
                         indent=2))
    else:
        what = (f"{args.host or 'job'} all_reduce_perf ({nodes} node(s), {given['model']}, "
                f"{given['profile']})")
        print(render(findings, what))
    return EXIT_FAIL if any(f.failed for f in findings) else EXIT_OK


def _from_inventory(args: argparse.Namespace) -> dict[str, Any]:
    """profile, model, gpus (per node), nics, nic_gbps: the options, else --host's spec."""
    given = {"profile": args.profile, "model": args.model, "gpus": args.gpus,
             "nics": args.nics, "nic_gbps": args.nic_gbps}
    if args.inventory:
        node, _ = spec_node(args)
        if node.gpus is None:
            raise GpuinfraError(f"{args.host}: the spec gives it no GPUs: not an NCCL node")
        rates = {nic.rate_gbps for nic in node.rdma_nics}
        spec = {"profile": node.gpus.topology.name, "model": node.gpus.model.key,
                "gpus": node.gpus.count, "nics": len(node.rdma_nics),
                "nic_gbps": rates.pop() if len(rates) == 1 else None}
        given = {k: v if v is not None else spec[k] for k, v in given.items()}
        if args.min_busbw is not None:
            given["nic_gbps"] = None  # --min-busbw replaces the NIC floor (exclusive options)
    given["nics"] = given["nics"] or 0
    return given


def _gpus_from_log(ranks: Sequence[Any], nodes: int) -> int:
    """GPUs per node as the log lists them (ranks / nodes), when that is a whole number."""
    if not ranks or len(ranks) % nodes:
        raise GpuinfraError("the log does not say how many GPUs each node has: pass --gpus")
    return len(ranks) // nodes

