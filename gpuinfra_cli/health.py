"""`gpuinfra health`: the health check's circuit breaker, seen and reset from the laptop.

    gpuinfra health breaker --inventory inventory/<site>.py        is it tripped, and why
    gpuinfra health reset-breaker --inventory inventory/<site>.py  clear the trip (after
                                                                   looking at the nodes)

Both ask Slurm on the head (the breaker's state is the nodes' Comment: gpuinfra.health.breaker).
The reset clears only the trip; the nodes drained automatically stay drained until their check
passes (or an operator resumes them), and their drain stamps keep counting in the window.
Exit 0; 1 when ``breaker`` finds it tripped; 2 when Slurm cannot be asked.
"""

from __future__ import annotations

import argparse
import shlex
import time
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.health import breaker

SINFO = breaker.SINFO_LINE


def _nodes(args: argparse.Namespace) -> tuple[Any, list[breaker.Seen], dict[str, Any]]:
    """The head's connection, the nodes as the breaker reads them, the site's settings."""
    from gpuinfra_cli.roll import Ssh, load_site

    site = load_site(args.inventory)
    settings = dict(site.spec.nodes[0].settings) if site.spec.nodes else {}
    head = Ssh(site.target(site.spec.head[0].name), args.sudo)
    rc, out, err = head.run(SINFO)
    if rc != 0:
        head.close()
        raise GpuinfraError(f"on the head: `{SINFO}` failed (exit {rc}): "
                            f"{(err or out).strip()[:300]}")
    return head, breaker.parse(out), settings


def cmd_health(args: argparse.Namespace) -> int:
    head, nodes, settings = _nodes(args)
    seconds = int(settings.get("health_breaker_window", breaker.Breaker().window_s))
    try:
        held = breaker.tripped(nodes)
        window = breaker.recent(nodes, time.time(), seconds)
        if args.action == "breaker":
            if held is None:
                print(f"health: the breaker is not tripped; {len(window)} GPU node(s) drained "
                      f"automatically within {seconds} s"
                      + (f": {', '.join(window)}" if window else ""))
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
            rc, out, err = head.run(shlex.join(command))
            if rc != 0:
                raise GpuinfraError(f"on the head: {' '.join(command)} failed (exit {rc}): "
                                    f"{(err or out).strip()[:300]}")
        print(f"health: the breaker is reset (it held {held.name if held else '?'}); automatic "
              f"drains start again. Still drained automatically within {seconds} s: "
              f"{', '.join(window) or 'none'}")
        return 0
    finally:
        head.close()


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("health", help="the health check's circuit breaker",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("breaker", "reset-breaker"))
    parser.add_argument("--inventory", required=True, help="inventory/<site>.py")
    parser.add_argument("--sudo", action="store_true",
                        help="the SSH user is not root: commands on the head through `sudo -n`")
    parser.set_defaults(func=cmd_health)
