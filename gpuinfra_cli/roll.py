"""`gpuinfra roll`: a change that disrupts a node, applied batch by batch with the node drained.

    gpuinfra roll --inventory inventory/<site>.py [--batch 1] [--wait-jobs 600]
                  [--limit NODE ...] [--data KEY=VALUE ...] [--reboot] [--why TEXT] [--sudo]

For each batch of workers (inventory order; ``--limit`` picks some): drain in Slurm
(``gpuinfra-roll: <why>``) and, on Kubernetes nodes, ``kubectl drain``; wait for the jobs on the
batch to end (``--wait-jobs`` seconds at most: then the batch is put back as it was and the roll
stops, naming the jobs); deploy to the batch (``pyinfra ... --limit``, with ``--data`` and
``nvidia_driver_change_under_processes=True``: the nodes are drained; the head too, whose Slurm
files take the nodes' facts); reboot each node whose change needs it (the reboot marker, or
``--reboot``), then deploy again (what waits for the loaded driver: gres.conf's Links=/Cores=,
the CDI spec); wait until its slurmd answers; judge it with its own health check
(``gpuinfra-health check``: the verify suite's rules); resume it. The first node that fails
stays drained with the cause and the roll stops; no other node is touched. The rules are
gpuinfra/roll.py.

Exit 0: every batch rolled; 1: the roll stopped (it says where and why); 2: bad input.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuinfra import roll
from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.slurm import SINFO, SlurmNode, parse_sinfo_nodes
from gpuinfra.reboot import REBOOT_MARKER
from gpuinfra_deploy.entry import pyinfra_command

HEALTH = "/usr/local/sbin/gpuinfra-health"
# Written to /run (a tmpfs) before a reboot: gone once the node booted again.
BOOT_MARK = "/run/gpuinfra-roll-before-reboot"
DRIVER_OVERRIDE = "nvidia_driver_change_under_processes=True"
# The roll reboots the nodes itself (then deploys again on the loaded driver), not the deploy.
ROLL_REBOOTS = "reboot_policy=never"
BACK_S = 600


class Ssh:
    """Commands on one host over SSH with the site's host-key policy (gpuinfra_verify/ssh.py);
    reconnects after a reboot. ``sudo``: the SSH user is not root; each command runs as root
    through ``sudo -n`` (no password prompt: a sudo that would ask fails at once)."""

    def __init__(self, target: Any, sudo: bool = False) -> None:
        self.target = target
        self.sudo = sudo
        self.client: Any = None

    def wrapped(self, command: str) -> str:
        """``command`` as it is sent: as it is, or run by a root shell through sudo."""
        return f"sudo -n sh -c {shlex.quote(command)}" if self.sudo else command

    def run(self, command: str, timeout: float = 120) -> tuple[int, str, str]:
        from gpuinfra_verify.ssh import connect

        command = self.wrapped(command)
        if self.client is None:
            self.client = connect(self.target)
        try:
            _, out, err = self.client.exec_command(command, timeout=timeout)
            rc = out.channel.recv_exit_status()
            return rc, out.read().decode(errors="replace"), err.read().decode(errors="replace")
        except Exception:  # a dropped connection (the node rebooting): connect again next time
            self.close()
            raise

    def try_run(self, command: str, timeout: float = 30) -> tuple[int, str, str] | None:
        """Like :meth:`run`; None when the host cannot be reached now."""
        try:
            return self.run(command, timeout)
        except Exception:
            return None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None


@dataclass
class Roll:
    inventory: str
    site: Any
    batch: int
    wait_s: int
    data: list[str] = field(default_factory=list)
    reboot: bool = False
    why: str = "rolling change"
    sudo: bool = False
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gpuinfra-roll-")))

    def __post_init__(self) -> None:
        self.head = Ssh(self.site.target(self.site.spec.head[0].name), self.sudo)
        self.hosts: dict[str, Ssh] = {}

    def host(self, name: str) -> Ssh:
        if name not in self.hosts:
            self.hosts[name] = Ssh(self.site.target(name), self.sudo)
        return self.hosts[name]

    def say(self, text: str) -> None:
        print(f"roll: {text}", flush=True)

    def on_head(self, command: str) -> str:
        rc, out, err = self.head.run(command)
        if rc != 0:
            raise GpuinfraError(f"on the head: `{command}` failed (exit {rc}): "
                                f"{(err or out).strip()[:300]}")
        return out

    def slurm(self, names: Sequence[str]) -> dict[str, SlurmNode]:
        shorts = ",".join(self.site.spec.node(n).short_name for n in names)
        return parse_sinfo_nodes(self.on_head(f"{SINFO} -n {shorts}"))

    # ------------------------------------------------------------------ one batch

    def run(self, names: Sequence[str]) -> int:
        groups = roll.batches(list(names), self.batch)
        for number, group in enumerate(groups, 1):
            self.say(f"batch {number}/{len(groups)}: {', '.join(group)}")
            if not self.one(group):
                return 1
        self.say(f"done: {len(names)} node(s) rolled, in {len(groups)} batch(es)")
        return 0

    def one(self, names: list[str]) -> bool:
        spec = self.site.spec
        slurm_names = [n for n in names if "slurm" in spec.node(n).schedulers]
        kube_names = [n for n in names if "kubernetes" in spec.node(n).schedulers]
        short = {n: spec.node(n).short_name for n in names}
        before = self.slurm(slurm_names) if slurm_names else {}
        keep = {n for n in slurm_names
                if short[n] in before and roll.drained_by_someone_else(before[short[n]])}
        for name in sorted(keep):
            self.say(f"{name}: already drained by someone else ({before[short[name]].reason}): "
                     "rolled, then left drained")
        new = [n for n in slurm_names if short[n] not in before]
        for name in new:
            self.say(f"{name}: not in Slurm yet (a first deploy): nothing to drain")
        ours = [short[n] for n in slurm_names if n not in keep and n not in new]
        if ours:
            self.on_head(roll.drain(ours, self.why))
            self.say(f"drained in Slurm: {', '.join(ours)}")
        for name in kube_names:
            self.on_head(roll.kube_drain(short[name], self.wait_s))
            self.say(f"drained in Kubernetes: {short[name]}")
        in_slurm = [short[n] for n in slurm_names if n not in new]
        if in_slurm and not self.jobs_ended(in_slurm):
            if ours:
                self.on_head(roll.resume(ours))
            for name in kube_names:
                self.on_head(roll.kube_uncordon(short[name]))
            return False
        if not self.deploy(names):
            self.leave(ours, "the deploy to this batch failed (see the log)")
            return False
        booted = {n: self.reboot_if_needed(n) for n in names}
        lost = {n: why for n, why in booted.items() if why not in ("", "rebooted")}
        if "rebooted" in booted.values() and not lost and not self.deploy(
                names, "again, on the loaded driver"):
            self.leave(ours, "the deploy after the reboot failed (see the log)")
            return False
        for name in names:
            problem = lost.get(name) or self.back_and_healthy(name)
            if problem:
                self.leave([short[name]] if short[name] in ours else [], problem)
                self.say(f"stopped at {name}: {problem}; it stays drained, no other node was "
                         "touched")
                return False
            if short[name] in ours:
                self.on_head(roll.resume([short[name]]))
            if name in kube_names:
                self.on_head(roll.kube_uncordon(short[name]))
            self.say(f"{name}: changed, verified, back in service")
        return True

    def jobs_ended(self, shorts: list[str]) -> bool:
        deadline = time.monotonic() + self.wait_s
        said: set[str] = set()
        while True:
            jobs = roll.jobs_on(self.on_head(roll.squeue(shorts)))
            if not jobs:
                return True
            new = [j for j in jobs if j.job not in said]
            if new:
                self.say("waiting for " + ", ".join(f"job {j.job} (on {j.node})" for j in new))
                said |= {j.job for j in new}
            if time.monotonic() > deadline:
                self.say("stopped: " + roll.stopped_for_jobs(jobs, self.wait_s))
                return False
            time.sleep(2)

    def deploy(self, names: list[str], why: str = "") -> bool:
        """The deploy limited to ``names`` and the head (the cluster's Slurm files live there
        and take the nodes' new facts: gres.conf's Links=/Cores= once the driver is loaded)."""
        log = self.log_dir / f"deploy-{'-'.join(names)}{'-again' if why else ''}.log"
        hosts = [self.site.spec.head[0].name, *names]
        command = pyinfra_command(self.inventory, *[a for n in hosts for a in ("--limit", n)],
                                  "--data", DRIVER_OVERRIDE, "--data", ROLL_REBOOTS,
                                  *[a for d in self.data for a in ("--data", d)],
                                  *(["--sudo"] if self.sudo else []))
        self.say(f"deploying to {', '.join(names)}{f' {why}' if why else ''} (log: {log})")
        with log.open("w") as out:
            rc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                                check=False).returncode
        if rc != 0:
            tail = log.read_text().strip().splitlines()[-8:]
            self.say(f"the deploy failed (exit {rc}):\n  " + "\n  ".join(tail))
        return rc == 0

    def reboot_if_needed(self, name: str) -> str:
        """Reboot ``name`` when its change needs it (the reboot marker) or --reboot: "" (no
        reboot), "rebooted", or why it is lost."""
        node = self.host(name)
        got = node.try_run(f"test -e {REBOOT_MARKER}")
        if got is None:
            return "unreachable over SSH after the deploy"
        if not self.reboot and got[0] != 0:
            return ""
        self.say(f"{name}: rebooting ({'--reboot' if self.reboot else 'the change needs it'})")
        node.try_run(f"touch {BOOT_MARK}")
        node.try_run("systemctl reboot", timeout=10)
        node.close()
        return "rebooted" if self.booted(node) else f"did not come back within {BACK_S} s " \
                                                    "of its reboot"

    def back_and_healthy(self, name: str) -> str:
        """"" when ``name``'s slurmd answers and its health check passes; else what is wrong
        (one line)."""
        if not self.slurmd_back(name):
            return f"slurmd did not register with the controller within {BACK_S} s"
        return self.healthy(name)

    def booted(self, node: Ssh) -> bool:
        deadline = time.monotonic() + BACK_S
        time.sleep(3)
        while time.monotonic() < deadline:
            got = node.try_run(f"test -e {BOOT_MARK} && echo same || "
                               "systemctl is-system-running --wait", timeout=120)
            if got is not None and got[1].strip() in ("running", "degraded"):
                return True
            time.sleep(3)
        return False

    def slurmd_back(self, name: str) -> bool:
        if "slurm" not in self.site.spec.node(name).schedulers:
            return True
        short = self.site.spec.node(name).short_name
        deadline = time.monotonic() + BACK_S
        while time.monotonic() < deadline:
            if roll.back(self.slurm([name]).get(short)):
                return True
            time.sleep(2)
        return False

    def healthy(self, name: str) -> str:
        node = self.host(name)
        got = node.try_run(f"test -x {HEALTH} && {HEALTH} check", timeout=120)
        if got is None:
            return "unreachable over SSH"
        rc, out, err = got
        if rc == 0:
            return ""
        if rc == 1 and not out.strip():  # test -x failed: no health check on this node
            return ""
        return (out.strip().splitlines() or err.strip().splitlines() or [f"exit {rc}"])[0]

    def leave(self, shorts: list[str], problem: str) -> None:
        """Keep ``shorts`` drained, with the cause as the reason."""
        if shorts:
            self.on_head(roll.drain(shorts, problem))


def load_site(inventory: str) -> Any:
    """The site of ``inventory``, loaded in a child process (pyinfra's loader patches the
    interpreter); its own error line when it cannot be loaded."""
    from gpuinfra_verify.expect import site_from_json

    run = subprocess.run([sys.executable, "-m", "gpuinfra_verify.inventory_json",
                          str(Path(inventory).resolve())], capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
        raise GpuinfraError((run.stderr.strip().splitlines() or [f"{inventory}: cannot be "
                                                                 "loaded"])[-1])
    return site_from_json(inventory, run.stdout)


def cmd_roll(args: argparse.Namespace) -> int:
    site = load_site(args.inventory)
    workers = [n.name for n in site.spec.nodes if n.is_worker]
    unknown = [n for n in args.limit if n not in workers]
    if unknown:
        raise GpuinfraError(f"--limit {unknown[0]}: not a worker of {args.inventory} (workers: "
                            f"{', '.join(workers)})")
    if args.batch < 1 or args.batch >= max(len(workers), 2):
        raise GpuinfraError(f"--batch {args.batch}: between 1 and {max(len(workers) - 1, 1)} "
                            "(a roll never takes every worker out at once)")
    if args.wait_jobs < 0:
        raise GpuinfraError(f"--wait-jobs {args.wait_jobs}: seconds, 0 or more")
    for item in args.data:
        if "=" not in item:
            raise GpuinfraError(f"--data {item!r}: KEY=VALUE, as pyinfra's --data")
    names = [n for n in workers if not args.limit or n in args.limit]
    roller = Roll(args.inventory, site, args.batch, args.wait_jobs, args.data, args.reboot,
                  args.why, getattr(args, "sudo", False))
    try:
        return roller.run(names)
    finally:
        roller.head.close()
        for node in roller.hosts.values():
            node.close()


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("roll", help="a disruptive change, batch by batch, nodes drained",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--inventory", required=True, help="inventory/<site>.py")
    parser.add_argument("--batch", type=int, default=1, help="nodes changed at once (default 1)")
    parser.add_argument("--wait-jobs", type=int, default=600, metavar="S",
                        help="how long to wait for a batch's jobs to end (default 600 s)")
    parser.add_argument("--limit", action="append", default=[], metavar="NODE",
                        help="roll only these workers (repeatable)")
    parser.add_argument("--data", action="append", default=[], metavar="KEY=VALUE",
                        help="data for the deploy, as pyinfra's --data (repeatable)")
    parser.add_argument("--reboot", action="store_true",
                        help="reboot every node, even when its change does not need it")
    parser.add_argument("--why", default="rolling change",
                        help="said in the drain reason (gpuinfra-roll: WHY)")
    parser.add_argument("--sudo", action="store_true",
                        help="the SSH user is not root: the deploy runs with pyinfra's --sudo "
                             "and each command on a node through `sudo -n`")
    parser.set_defaults(func=cmd_roll)
