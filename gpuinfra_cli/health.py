"""`gpuinfra health`: the health check's circuit breaker, seen and reset from the laptop.

    gpuinfra health breaker --inventory inventory/<site>.py        is it tripped, and why
    gpuinfra health reset-breaker --inventory inventory/<site>.py  clear the trip (after
                                                                   looking at the nodes)

Both ask Slurm on the head (the breaker's state is the nodes' Comment: gpuinfra.health.breaker)
and, on a Kubernetes site, the API server (the nodes' annotations gpuinfra.io/breaker-tripped
and gpuinfra.io/tainted-at: gpuinfra.health.taint). The reset clears only the trip; the nodes
drained or tainted automatically stay so until their check passes (or an operator resumes
them), and their stamps keep counting in the window. Exit 0; 1 when ``breaker`` finds it
tripped; 2 when the head cannot be asked.
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.health import breaker, taint
from gpuinfra.kubernetes.kubeadm import ADMIN_CONF

SINFO = breaker.SINFO_LINE


KUBECTL_NODES = f"kubectl --kubeconfig {ADMIN_CONF} get nodes -o json"


def cmd_health(args: argparse.Namespace) -> int:
    from gpuinfra_cli.roll import Ssh, load_site

    site = load_site(args.inventory)
    settings = dict(site.spec.nodes[0].settings) if site.spec.nodes else {}
    seconds = int(settings.get("health_breaker_window", breaker.Breaker().window_s))
    head = Ssh(site.target(site.spec.head[0].name), args.sudo)
    try:
        codes = []
        if "slurm" in site.spec.schedulers:
            codes.append(_slurm(args, head, seconds))
        if "kubernetes" in site.spec.schedulers:
            codes.append(_kubernetes(args, head, seconds))
        return max(codes, default=0)
    finally:
        head.close()


def _ask(head: Any, command: str) -> str:
    rc, out, err = head.run(command)
    if rc != 0:
        raise GpuinfraError(f"on the head: `{command}` failed (exit {rc}): "
                            f"{(err or out).strip()[:300]}")
    return out


def _slurm(args: argparse.Namespace, head: Any, seconds: int) -> int:
    """Slurm's drains: the nodes' Comment (gpuinfra.health.breaker)."""
    nodes = breaker.parse(_ask(head, SINFO))
    held = breaker.tripped(nodes)
    window = breaker.recent(nodes, time.time(), seconds)
    if args.action == "breaker":
        if held is None:
            print(f"health: the breaker is not tripped; {len(window)} GPU node(s) drained "
                  f"automatically within {seconds} s" + (f": {', '.join(window)}" if window
                                                          else ""))
            return 0
        print(f"health: the breaker is TRIPPED ({held.name}: {held.comment}); no node is "
              "drained automatically. Look at the drained nodes (`sinfo -R`) and the held "
              "one, then: gpuinfra health reset-breaker --inventory " + args.inventory)
        return 1
    commands = breaker.reset(nodes)
    if not commands:
        print("health: the breaker is not tripped: nothing to reset")
        return 0
    for command in commands:
        _ask(head, shlex.join(command))
    print(f"health: the breaker is reset (it held {held.name if held else '?'}); automatic "
          f"drains start again. Still drained automatically within {seconds} s: "
          f"{', '.join(window) or 'none'}")
    return 0


def _kubernetes(args: argparse.Namespace, head: Any, seconds: int) -> int:
    """Kubernetes' taints: the nodes' annotations (gpuinfra.health.taint.bounded_patch)."""
    try:
        nodes = json.loads(_ask(head, KUBECTL_NODES)).get("items") or []
    except (ValueError, AttributeError):
        raise GpuinfraError(f"on the head: `{KUBECTL_NODES}` printed no node list") from None
    names = [str((n.get("metadata") or {}).get("name", "")) for n in nodes]
    held = [name for name, n in zip(names, nodes, strict=True) if taint.tripped([n]) is not None]
    window = [name for name, n in zip(names, nodes, strict=True)
              if taint.tainted_within(n, time.time(), seconds)]
    if args.action == "breaker":
        if not held:
            print(f"health: Kubernetes: the breaker is not tripped; {len(window)} node(s) "
                  f"tainted within {seconds} s" + (f": {', '.join(window)}" if window else ""))
            return 0
        why = (nodes[names.index(held[0])].get("metadata") or {}).get("annotations", {}).get(
            taint.TRIPPED, "")
        print(f"health: Kubernetes: the breaker is TRIPPED ({held[0]}: {why}); no node is "
              f"tainted {taint.TAINT_KEY} automatically. Look at the tainted nodes (`kubectl "
              "describe node`, condition GpuinfraUnhealthy) and the held one, then: gpuinfra "
              "health reset-breaker --inventory " + args.inventory)
        return 1
    if not held:
        print("health: Kubernetes: the breaker is not tripped: nothing to reset")
        return 0
    for name in held:
        _ask(head, shlex.join(["kubectl", "--kubeconfig", ADMIN_CONF, "annotate", "node", name,
                               f"{taint.TRIPPED}-"]))
    print(f"health: Kubernetes: the breaker is reset (it held {', '.join(held)}); taints start "
          f"again. Still tainted within {seconds} s: {', '.join(window) or 'none'}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("health", help="the health check's circuit breaker",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("breaker", "reset-breaker"))
    parser.add_argument("--inventory", required=True, help="inventory/<site>.py")
    parser.add_argument("--sudo", action="store_true",
                        help="the SSH user is not root: commands on the head through `sudo -n`")
    parser.set_defaults(func=cmd_health)
