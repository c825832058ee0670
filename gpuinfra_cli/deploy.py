"""`gpuinfra deploy`: the whole deploy in one command, reboots included, never all at once.

    gpuinfra deploy --inventory inventory/<site>.py [--max-unavailable 1|N|P%] [--sudo]
                    [--wait-jobs S] [--limit NODE ...] [--data KEY=VALUE ...]

1. ``pyinfra -y INVENTORY deploy.py`` (with ``--limit``/``--data`` as given) and
   ``reboot_policy=never``: the deploy records on each host why it needs a reboot (the marker
   /run/gpuinfra/reboot-required) and reboots nothing itself;
2. the workers that recorded one are read over SSH (one command each);
3. with the site's ``reboot_policy = "if-needed"`` (or ``--data reboot_policy=if-needed``):
   ``gpuinfra roll`` on exactly those workers, at most ``--max-unavailable`` out at once:
   each drained, its jobs left to end, deployed, rebooted by Slurm, deployed again on the
   loaded driver (gres.conf's ``Links=``/``Cores=``, the CDI spec: what waits for the reboot),
   judged by its health check and resumed; the first node that fails stays drained with the
   cause and no new node is taken. With ``"never"``: it names them and the command that
   finishes them.

A first deploy of GPU nodes is then whole in one command. Exit: pyinfra's status when the
deploy failed (2 when it could not start), the roll's (1: it stopped, saying where), else 0.
Hosts outside the schedulers (hypervisors) and the head are rebooted by the deploy itself
under ``"if-needed"`` (gpuinfra_deploy/ops/reboot.py); only workers are rolled.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.reboot import REBOOT_MARKER
from gpuinfra.roll import max_unavailable
from gpuinfra_deploy.entry import pyinfra_command

NO_REBOOT = "reboot_policy=never"  # the deploy records; this command rolls (gpuinfra_cli.roll)


def _site(inventory: str) -> Any:
    from gpuinfra_cli.roll import load_site

    return load_site(inventory)


def policy_of(site_policy: str, data: list[str]) -> str:
    """The reboot policy this run follows: the last ``--data reboot_policy=...``, else the
    site's; a value the spec would refuse is refused here too."""
    from gpuinfra.spec.model import REBOOT_POLICIES

    policy = site_policy
    for item in data:
        key, _, value = item.partition("=")
        if key.strip() == "reboot_policy":
            policy = value.strip().strip("'\"")
    if policy not in REBOOT_POLICIES:
        raise GpuinfraError(f"--data reboot_policy={policy}: one of "
                            f"{', '.join(REBOOT_POLICIES)}")
    return policy


def waiting(site: Any, names: list[str], sudo: bool = False) -> dict[str, str]:
    """The workers among ``names`` whose marker says a reboot is needed: {name: reasons};
    a worker that cannot be read is refused (this command would otherwise leave it half
    done without saying so)."""
    from gpuinfra_cli.roll import Ssh

    found: dict[str, str] = {}
    for name in names:
        node = Ssh(site.target(name), sudo)
        try:
            got = node.try_run(f"cat {REBOOT_MARKER} 2>/dev/null || true")
        finally:
            node.close()
        if got is None or got[0] != 0:
            raise GpuinfraError(f"{name}: cannot read {REBOOT_MARKER} over SSH after the "
                                "deploy: is it up? Run `gpuinfra deploy` again once it is")
        reasons = sorted({line.strip() for line in got[1].splitlines() if line.strip()})
        if reasons:
            found[name] = "; ".join(reasons)
    return found


def cmd_deploy(args: argparse.Namespace) -> int:
    from gpuinfra_cli.roll import cmd_roll

    for item in args.data:
        if "=" not in item:
            raise GpuinfraError(f"--data {item!r}: KEY=VALUE, as pyinfra's --data")
    if args.wait_jobs is not None and args.wait_jobs < 0:
        raise GpuinfraError(f"--wait-jobs {args.wait_jobs}: seconds, 0 or more")
    site = _site(args.inventory)
    policy = policy_of(site.spec.reboot_policy, args.data)
    workers = [n.name for n in site.spec.nodes if n.is_worker]
    most = max_unavailable(args.max_unavailable, len(workers))
    unknown = [n for n in args.limit if n not in {n.name for n in site.spec.nodes}]
    if unknown:
        raise GpuinfraError(f"--limit {unknown[0]}: not a host of {args.inventory}")
    command = pyinfra_command(args.inventory, *[a for n in args.limit for a in ("--limit", n)],
                              *[a for d in args.data for a in ("--data", d)], "--data", NO_REBOOT,
                              *(["--sudo"] if args.sudo else []))
    print("deploy: $ " + " ".join(command[1:]), flush=True)
    rc = subprocess.run(command, check=False).returncode
    if rc != 0:
        print(f"deploy: pyinfra exited {rc}: nothing rebooted; fix what it said and run "
              "`gpuinfra deploy` again", file=sys.stderr)
        return rc
    reached = [n for n in workers if not args.limit or n in args.limit]
    need = waiting(site, reached, args.sudo)
    if not need:
        print(f"deploy: done; no worker needs a reboot ({len(reached)} checked)")
        return 0
    for name, why in need.items():
        print(f"deploy: {name} needs a reboot: {why}")
    limits = " ".join(f"--limit {n}" for n in need)
    if policy == "never":
        print(f"deploy: reboot_policy is 'never': nothing rebooted. Until these reboot, "
              "gres.conf has no Links=/Cores= for them and the CDI spec waits. Finish with: "
              f"gpuinfra roll --inventory {args.inventory} {limits} (drained, a few at a "
              "time)")
        return 0
    print(f"deploy: rolling {len(need)} worker(s), at most {most} out at once (drained, "
          "rebooted, deployed again, judged, resumed)", flush=True)
    roll_args = argparse.Namespace(
        inventory=args.inventory, max_unavailable=str(most), max_fail="0",
        wait_jobs=args.wait_jobs,
        limit=list(need), data=[*args.data, NO_REBOOT], reboot=False,
        why="reboot the deploy needs", sudo=args.sudo)
    return cmd_roll(roll_args)


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("deploy", help="deploy, then roll the reboots it needs",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--inventory", required=True, help="inventory/<site>.py")
    parser.add_argument("--max-unavailable", default="1", metavar="N|P%",
                        help="workers rebooted at once: a number or a share (default 1)")
    parser.add_argument("--wait-jobs", type=int, default=None, metavar="S",
                        help="bound the roll's wait for a node's jobs (default: none)")
    parser.add_argument("--limit", action="append", default=[], metavar="NODE",
                        help="deploy only these hosts, as pyinfra's --limit (repeatable)")
    parser.add_argument("--data", action="append", default=[], metavar="KEY=VALUE",
                        help="data for the deploy, as pyinfra's --data (repeatable)")
    parser.add_argument("--sudo", action="store_true",
                        help="the SSH user is not root: pyinfra's --sudo, and the roll's "
                             "commands through `sudo -n`")
    parser.set_defaults(func=cmd_deploy)
