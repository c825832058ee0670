"""`gpuinfra smoke`: the multi-node PyTorch DDP training smoke job (docs/smoke.md).

    gpuinfra smoke script --inventory I [--partition P] [--nodes N] [--backend nccl|gloo]
                          [--container BUNDLE] [--output FILE]      write the sbatch job
    gpuinfra smoke check LOG [--inventory I] [--min-busbw X] [--json] judge the job's output
    gpuinfra smoke run --inventory I [script's options] [--launcher auto|torchrun|srun]
                       [--wait S] [--json]              submit on the head, wait, fetch, judge
    gpuinfra smoke manifest --image IMAGE [--nodes N] [--gpus G] [--rdma]
                                                        the Kubernetes Indexed Job

`check` and `run` exit 0 pass, 1 fail, 2 unusable input (as `nccl check`; `run`: also a
launcher that cannot work on the nodes' distribution), 3 when the job could not be submitted or
did not end within --wait (`run`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.jobs.smoke import (
    BACKENDS,
    LAUNCHERS,
    SmokeSettings,
    choose_launcher,
    plan_smoke,
    sbatch_script,
)
from gpuinfra.platforms import RELEASE_COMMAND

EXIT_OK, EXIT_FAIL, EXIT_UNUSABLE, EXIT_NOT_RUN = 0, 1, 2, 3


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `smoke script|check|run|manifest` to the gpuinfra command line."""
    smoke = sub.add_parser("smoke", help="multi-node PyTorch DDP smoke job (Slurm, Kubernetes)",
                           description=__doc__.split("\n\n")[0])
    actions = smoke.add_subparsers(dest="smoke_command", required=True, parser_class=type(smoke))
    p = actions.add_parser("script", help="write the sbatch job for a partition")
    _job_options(p)
    p.add_argument("--launcher", choices=LAUNCHERS, default="torchrun",
                   help="torchrun per node (default), or srun starting every rank (env:// "
                        "from Slurm's variables; Debian 12's torch 1.13 needs it)")
    p.add_argument("--output", metavar="FILE", help="write the script here (default: stdout)")
    p.set_defaults(func=run_script)
    p = actions.add_parser("check", help="judge the job's output",
                           description="Judge a smoke job's output. With --inventory the NCCL "
                           "floor and the RDMA expectation come from the spec of the log's "
                           "nodes. Exit 0 pass, 1 fail, 2 unusable input.")
    p.add_argument("log", help="the job's output file ('-' for standard input)")
    p.add_argument("--inventory", metavar="FILE", help="inventory/<site>.py")
    _judge_options(p)
    p.set_defaults(func=run_check)
    p = actions.add_parser("run", help="submit on the head over SSH, wait, judge")
    _job_options(p)
    p.add_argument("--launcher", choices=("auto", *LAUNCHERS), default="auto",
                   help="auto (default): from the first node's /etc/os-release, srun on "
                        "Debian 12 (its torch 1.13 cannot run torchrun), torchrun on Debian 13 "
                        "and Ubuntu; or torchrun per node, or srun starting every rank")
    _judge_options(p)
    p.add_argument("--wait", type=int, default=900, metavar="S",
                   help="seconds to wait for the job to end (default 900)")
    p.add_argument("--keep-log", metavar="FILE", help="also write the job's output here")
    p.add_argument("--sudo", action="store_true",
                   help="the SSH user is not root: sbatch and the reads run through `sudo -n` "
                        "(the job then runs as root; without it, as the SSH user)")
    p.set_defaults(func=run_run)
    p = actions.add_parser("manifest", help="the smoke job as a Kubernetes Indexed Job (YAML)")
    p.add_argument("--image", required=True, help="an image with python3 and torch")
    p.add_argument("--nodes", type=int, default=2, metavar="N", help="pods (default 2)")
    p.add_argument("--gpus", type=int, default=0, metavar="G",
                   help="GPUs per pod (default 0: gloo on CPUs)")
    p.add_argument("--namespace", default="default")
    p.add_argument("--rdma", action="store_true",
                   help=f"each pod asks for the node's RDMA devices ({k8s_rdma()}) and "
                        "IPC_LOCK, for NCCL over InfiniBand/RoCE (needs --gpus)")
    p.set_defaults(func=run_manifest)


def _job_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inventory", required=True, metavar="FILE", help="inventory/<site>.py")
    p.add_argument("--partition", help="Slurm partition (default: the spec's default one)")
    p.add_argument("--nodes", type=int, metavar="N", help="nodes (default: all eligible)")
    p.add_argument("--backend", choices=BACKENDS, default="nccl",
                   help="nccl on GPUs (default), gloo on CPUs")
    p.add_argument("--container", metavar="BUNDLE",
                   help="run inside this OCI bundle (srun --container; it needs python3+torch)")
    p.add_argument("--python", default="python3", help="the interpreter with torch")
    p.add_argument("--time", default="00:15:00", help="job time limit (default 00:15:00)")


def _judge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-busbw", type=float, metavar="X", help="NCCL floor in GB/s")
    p.add_argument("--nic-gbps", type=float, metavar="G",
                   help="rate of each RDMA NIC (for the NCCL floor across nodes)")
    p.add_argument("--json", action="store_true", help="print the JSON envelope (docs/json.md)")


def _spec(inventory: str) -> Any:
    from gpuinfra_deploy.run.site import validated_site

    site = validated_site(inventory)
    if site is None:
        raise GpuinfraError(f"{inventory}: the spec is invalid (see above)")
    return site[1]


def _render(args: argparse.Namespace, spec: Any, launcher: str | None = None
            ) -> tuple[str, Any]:
    from gpuinfra.rdma.node import gid_index

    plan = plan_smoke(spec, args.partition, args.nodes, args.backend)
    settings = SmokeSettings(time_limit=args.time, container=args.container,
                             python=args.python, launcher=launcher or args.launcher)
    node = _node(spec, plan.nodes[0])
    nics = [nic.name for nic in node.rdma_nics] if plan.backend == "nccl" else []
    text = sbatch_script(plan, settings, nics, gid_index(node.rdma_nics) if nics else None)
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    return text, plan


def _node(spec: Any, short: str) -> Any:
    for node in spec.nodes:
        if short in (node.name, node.short_name):
            return node
    raise GpuinfraError(f"{short}: not a node of the spec")


def run_script(args: argparse.Namespace) -> int:
    text, plan = _render(args, _spec(args.inventory))
    summary = (f"{len(plan.nodes)} node(s) x {plan.procs_per_node} rank(s), {plan.backend}, "
               f"partition {plan.partition}")
    from gpuinfra_cli.output import emit_script

    emit_script(text, args.output, summary)
    return EXIT_OK


# ---------------------------------------------------------------------------- judging

def judge(text: str, spec: Any, args: argparse.Namespace, inputs: list[str]) -> int:
    """Judge ``text`` and print it (text or --json); the exit code."""
    from dataclasses import replace

    from gpuinfra.envelope import envelope
    from gpuinfra.jobs.smoke_verdict import expected_from_log, judge_smoke, parse_smoke
    from gpuinfra.knowledge.nccl import min_busbw
    from gpuinfra_cli.output import render

    log = parse_smoke(text)
    expected = expected_from_log(log)
    threshold, notes, node = None, [], None
    hosts = list(log.hosts) or [str(r.get("host", "")) for r in log.results]
    if spec is not None and hosts:
        node = _node(spec, hosts[0].split(".")[0])
        expected = replace(expected, rdma=bool(node.rdma_nics) and not node.soft_roce)
    if expected.backend == "nccl" and (node is not None and node.gpus is not None
                                       or args.min_busbw is not None):
        try:
            rates = {nic.rate_gbps for nic in node.rdma_nics} if node is not None else set()
            nic_gbps = args.nic_gbps or (rates.pop() if len(rates) == 1 else None)
            gpus = node.gpus if node is not None else None
            threshold = min_busbw(gpus.topology.name if gpus else "pcie-only",
                                  gpus.model.key if gpus else "H100-PCIE-80GB",
                                  expected.procs_per_node, expected.nodes,
                                  len(node.rdma_nics) if node is not None else 0, nic_gbps,
                                  args.min_busbw)
        except GpuinfraError as exc:
            notes.append(f"no NCCL floor: {exc}")
    findings = judge_smoke(log, expected, threshold)
    if args.json:
        extra = {"backend": expected.backend, "nodes": expected.nodes,
                 "procs_per_node": expected.procs_per_node, "hosts": hosts,
                 "min_busbw_gbytes_per_s": threshold.min_busbw if threshold else None,
                 "results": log.results, "notes": notes}
        print(json.dumps(envelope("smoke", findings, inputs=inputs, extra=extra), indent=2))
    else:
        what = (f"smoke job ({expected.backend}, {expected.nodes} node(s) x "
                f"{expected.procs_per_node})")
        print(render(findings, what))
        for note in notes:
            print(f"note  {note}")
    return EXIT_FAIL if any(f.failed for f in findings) else EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    from gpuinfra_cli.inputs import read_bytes_bounded

    text = read_bytes_bounded(args.log, "smoke job log").decode("utf-8", errors="replace")
    spec = _spec(args.inventory) if args.inventory else None
    return judge(text, spec, args, [args.log])


def k8s_rdma() -> str:
    from gpuinfra.knowledge.kubernetes import RDMA_RESOURCE

    return RDMA_RESOURCE


def run_manifest(args: argparse.Namespace) -> int:
    from gpuinfra.jobs.smoke import K8sSettings, indexed_job
    from gpuinfra.kubernetes.manifests import render

    objects = indexed_job(K8sSettings(image=args.image, namespace=args.namespace,
                                      nodes=args.nodes, gpus_per_node=args.gpus,
                                      rdma=args.rdma))
    sys.stdout.write(render(objects))
    return EXIT_OK


# ---------------------------------------------------------------------------- run

def run_run(args: argparse.Namespace) -> int:
    from gpuinfra_cli.roll import Ssh
    from gpuinfra_verify.expect import site_from_json

    loaded = subprocess.run([sys.executable, "-m", "gpuinfra_verify.inventory_json",
                             str(Path(args.inventory).resolve())], capture_output=True,
                            text=True, check=False)
    if loaded.returncode != 0:
        raise GpuinfraError((loaded.stderr.strip().splitlines() or [f"{args.inventory}: cannot "
                                                                    "be loaded"])[-1])
    site = site_from_json(args.inventory, loaded.stdout)
    first = plan_smoke(site.spec, args.partition, args.nodes, args.backend).nodes[0]
    launcher = _launcher(args, Ssh(site.target(_node(site.spec, first).name), args.sudo), first)
    if launcher is None:
        return EXIT_NOT_RUN
    text, plan = _render(args, site.spec, launcher)
    head = Ssh(site.target(site.spec.head[0].name), args.sudo)
    try:
        # The script on sbatch's standard input (sbatch reads it there when given no file):
        # no file on the head at all, so none at a predictable path in /tmp.
        rc, out, err = head.run(f"sbatch --parsable --chdir=/tmp <<'GPUINFRA_SMOKE_EOF'\n"
                                f"{text}GPUINFRA_SMOKE_EOF")
        if rc != 0 or not out.strip().split(";")[0].isdigit():
            print(f"gpuinfra: sbatch on the head failed (exit {rc}): {(err or out).strip()}",
                  file=sys.stderr)
            return EXIT_NOT_RUN
        job = out.strip().split(";")[0]
        print(f"smoke: job {job} submitted ({len(plan.nodes)} node(s), {plan.backend})",
              file=sys.stderr)
        batch_host = _wait(head, job, args.wait)
        if batch_host is None:
            return EXIT_NOT_RUN
        node = Ssh(site.target(_node(site.spec, batch_host).name), args.sudo)
        try:
            rc, log, err = node.run(f"cat /tmp/gpuinfra-smoke-{shlex.quote(job)}.out")
        finally:
            node.close()
        if rc != 0:
            print(f"gpuinfra: cannot read the job's output on {batch_host}: {err.strip()}",
                  file=sys.stderr)
            return EXIT_NOT_RUN
    finally:
        head.close()
    if args.keep_log:
        Path(args.keep_log).write_text(log, encoding="utf-8")
    return judge(log, site.spec, args, [f"job {job} on {batch_host}"])


def _launcher(args: argparse.Namespace, node: Any, host: str) -> str | None:
    """--launcher for the job whose first node is ``host`` (``node``: an Ssh to it): auto and
    torchrun read its /etc/os-release first (gpuinfra.jobs.smoke.choose_launcher). None
    (said) when the node cannot be asked; SmokeError (exit 2) when no launcher fits."""
    if args.launcher == "srun":
        return "srun"
    try:
        answer = node.try_run(RELEASE_COMMAND)
    finally:
        node.close()
    if answer is None or answer[0] != 0:
        why = "cannot be reached" if answer is None else (answer[2] or answer[1]).strip()
        print(f"gpuinfra: --launcher {args.launcher}: cannot read /etc/os-release on {host} "
              f"({why}); give --launcher srun (any PyTorch)", file=sys.stderr)
        return None
    distro = (answer[1].strip().splitlines() or [""])[-1].strip().lower()
    launcher, why = choose_launcher(args.launcher, host, distro, args.container, args.python)
    print(f"note: launcher {launcher}: {host} runs {distro}; {why}", file=sys.stderr)
    return launcher


def _wait(head: Any, job: str, wait_s: int) -> str | None:
    """The job's batch host once the job has ended; None (said) when it did not in time."""
    deadline = time.monotonic() + wait_s
    batch_host = None
    while time.monotonic() < deadline:
        _, out, _ = head.run(f"scontrol show job {shlex.quote(job)} 2>/dev/null; "
                             f"squeue -h -j {shlex.quote(job)} -o %T 2>/dev/null")
        for word in out.split():
            if word.startswith("BatchHost=") and word != "BatchHost=(null)":
                batch_host = word.split("=", 1)[1]
        state = out.strip().splitlines()[-1] if out.strip() else ""
        if batch_host and state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return batch_host
        time.sleep(3)
    print(f"gpuinfra: job {job} did not end within {wait_s} s (scancel {job})", file=sys.stderr)
    return None
