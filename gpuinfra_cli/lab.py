"""`gpuinfra lab up|down|reboot|status`: a real multi-node cluster of Debian 12 containers.

`up` builds (or reuses) a Debian 12 image with debootstrap, starts one head and N GPU workers as
systemd containers on their own podman network, authorizes the lab's SSH key for root, gives
every worker replayed GPU hardware (device nodes and an `nvidia-smi` stand-in, from
gpuinfra_lab/hardware/), and writes .lab/hosts.json, which inventory/lab.py reads. With `--vm
PROFILE` it also boots QEMU guests with Debian's own kernel (a hypervisor: VFIO for real), reached
through an SSH port forward on 127.0.0.1. The deploy then reaches the lab over SSH exactly as
it reaches real hosts. `reboot` restarts every container (`podman restart`: fresh /run and
/dev) and reboots every guest, as an operator reboots after a first driver install.

This module is the command line only; the lab itself is the `lab` package (profiles, podman,
image, provisioning: gpuinfra_lab/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from gpuinfra_lab.cluster import lab_down, lab_reboot, lab_status, lab_up, print_table
from gpuinfra_lab.image import DEFAULT_OS, SUITES
from gpuinfra_lab.profiles import (
    GUEST_PROFILES,
    MAX_FLEET,
    MAX_WORKERS,
    guest_problem,
    plan_hosts,
)
from gpuinfra_lab.state import LabError, Paths, ensure_lab_dir, find_repo, locked, say


def guest_counts(values: Sequence[str]) -> dict[str, int] | str:
    """``--vm PROFILE[=N]`` values as {profile: N}; the problem when one is wrong."""
    counts: dict[str, int] = {}
    for value in values:
        name, _, count = value.partition("=")
        if count and not count.isdigit():
            return f"--vm {value}: N must be a number"
        counts[name] = int(count or 1)
        problem = guest_problem(name, counts[name])
        if problem:
            return f"--vm {value}: {problem}"
    return counts


def running_release(paths: Paths) -> str | None:
    """The release the running lab's hosts were started with (hosts.json), if any: `lab up`
    without --os keeps it (a proof that adds a worker to a trixie lab adds a trixie one)."""
    try:
        hosts = json.loads(paths.hosts_json.read_text())["hosts"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    releases = {h.get("os") for h in hosts if isinstance(h, dict)} - {None}
    return releases.pop() if len(releases) == 1 and releases <= set(SUITES) else None


def cmd_up(args: argparse.Namespace) -> int:
    if not 0 <= args.workers <= MAX_WORKERS:
        return fail(f"--workers must be between 0 and {MAX_WORKERS}")
    if not 0 <= args.fleet <= MAX_FLEET:
        return fail(f"--fleet must be between 0 and {MAX_FLEET} (light workers for the "
                    "benchmarks: gpuinfra_lab/fleet.py)")
    guests = guest_counts(args.vm)
    if isinstance(guests, str):
        return fail(guests)
    start = time.monotonic()
    try:
        paths = _root_paths()
        with locked(paths):
            hosts = lab_up(paths, plan_hosts(args.workers, args.broken, guests, args.fleet,
                                             args.backup, args.login),
                           args.os or running_release(paths) or DEFAULT_OS)
    except LabError as exc:
        return fail(str(exc))
    say(f"lab up: {len(hosts)} hosts ready in {time.monotonic() - start:.1f} s")
    print_table(hosts)
    say(
        f"inventory: inventory/lab.py (reads {paths.hosts_json.relative_to(paths.repo)}); "
        f"ssh -F {paths.ssh_config.relative_to(paths.repo)} lab-worker1"
    )
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    try:
        paths = _root_paths()
        with locked(paths):
            removed = lab_down(paths, every_lab=args.all)
    except LabError as exc:
        return fail(str(exc))
    say(f"lab down: removed {', '.join(removed) if removed else 'nothing (no lab)'}")
    return 0


def cmd_reboot(args: argparse.Namespace) -> int:
    start = time.monotonic()
    try:
        paths = _root_paths()
        with locked(paths):
            hosts = lab_reboot(paths)
    except LabError as exc:
        return fail(str(exc))
    for h in hosts:
        say(f"{h['name']}: rebooted, systemd {h['systemd']}, ssh ok on {h['address']}")
    say(f"lab reboot: {len(hosts)} hosts in {time.monotonic() - start:.1f} s")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    try:
        paths = _root_paths()
        hosts = lab_status(paths)
    except LabError as exc:
        return fail(str(exc))
    if not hosts:
        say("no lab (run `gpuinfra lab up`)")
        return 1
    print_table(hosts)
    healthy = all(h["state"].startswith("running") and h["ssh"] == "ok" for h in hosts)
    return 0 if healthy else 1


def _root_paths() -> Paths:
    """The lab's paths, after checking we may drive rootful podman."""
    if os.geteuid() != 0:
        raise LabError("the lab needs root (rootful podman, so this machine reaches the hosts)")
    paths = Paths(find_repo())
    ensure_lab_dir(paths)
    return paths


def fail(message: str) -> int:
    print(f"gpuinfra lab: {message}", file=sys.stderr)
    return 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `lab up|down|reboot|status` to the gpuinfra command line."""
    lab = sub.add_parser(
        "lab",
        help="the local podman lab cluster: up, down, reboot, status",
        description=__doc__.split("\n\n")[0],
    )
    verbs = lab.add_subparsers(dest="lab_command", required=True, parser_class=type(lab))
    up = verbs.add_parser("up", help="start (or repair) the lab; idempotent")
    up.add_argument("--os", choices=sorted(SUITES), default=None,
                    help="the release every host runs: debian-12 or debian-13 (trixie "
                         "containers and guests with trixie's own kernel); default: the "
                         "running lab's, else debian-12")
    up.add_argument("--workers", type=int, default=2, help="healthy GPU workers (default 2)")
    up.add_argument("--fleet", type=int, default=0, metavar="N",
                    help="N light workers lab-fleet1..N for the fleet benchmarks (bench/fleet.py)")
    up.add_argument(
        "--broken",
        action="store_true",
        help="add a worker whose spec says bridged pairs but whose hardware is not; guests "
             "get the broken variant of their profile (same machine, broken spec)",
    )
    up.add_argument("--backup", action="store_true",
                    help="add lab-head2, Slurm's backup controller, sharing slurmctld's state "
                         "folder with lab-head (a folder of this machine mounted in both)")
    up.add_argument("--login", action="store_true",
                    help="add lab-login1, a Slurm login node (client commands, no slurmd)")
    up.add_argument("--vm", action="append", default=[], metavar="PROFILE[=N]",
                    help="add N QEMU guests (default 1) of a guest profile: "
                         f"{', '.join(GUEST_PROFILES)}")
    up.set_defaults(func=cmd_up)
    down = verbs.add_parser("down", help="remove this checkout's lab containers and network")
    down.add_argument("--all", action="store_true",
                      help="remove every gpuinfra lab on this machine (other checkouts' too)")
    down.set_defaults(func=cmd_down)
    reboot = verbs.add_parser(
        "reboot", help="reboot every lab host (containers: podman restart, fresh /run and /dev;"
                       " guests: a real reboot)"
    )
    reboot.set_defaults(func=cmd_reboot)
    status = verbs.add_parser("status", help="each host, its address, state and hardware")
    status.set_defaults(func=cmd_status)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `lab ...` alone (python -m gpuinfra_cli.lab up), without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="gpuinfra")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["lab", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
