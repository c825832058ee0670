"""`gpuinfra roll`: a change that disrupts a node, rolled over the workers with no person
waiting, resumable, never more than a set number out at once.

    gpuinfra roll --inventory inventory/<site>.py [--max-unavailable 1|N|P%] [--max-fail 0]
                  [--wait-jobs S] [--limit NODE ...] [--data KEY=VALUE ...] [--reboot]
                  [--why TEXT] [--sudo]
    gpuinfra roll --inventory inventory/<site>.py --status | --abandon

Nothing is drained unless each Slurm worker to roll runs a Slurm the head's accepts
(gpuinfra_cli/roll_slurm.py). At most ``--max-unavailable`` workers are out at once (inventory
order; ``--limit`` picks some); as one comes back the next is taken. Each is drained in Slurm
(``gpuinfra-roll: <why>``) and, on Kubernetes, drained with ``kubectl drain`` (its
PodDisruptionBudgets respected); its jobs are left to end, however long (``--wait-jobs S`` bounds
it: then the nodes still waiting are put back and the command stops, the roll resumable); once
nothing runs on it, it is deployed (``pyinfra ... --limit`` with ``--data``, and the head, whose
Slurm files take the nodes' facts); a node whose change needs a reboot (the reboot marker, or
``--reboot``) is rebooted by Slurm (``scontrol reboot ASAP nextstate=RESUME``: Slurm resumes it
when it is back, after its health check ran once); then deployed again on the loaded driver, judged
by its own health check (``gpuinfra-health check``: the verify suite's rules) and resumed. A node
that fails stays drained with the cause; past ``--max-fail`` failures the roll takes no new node.
The rules are gpuinfra/roll.py.

The roll's state is on the head (/var/lib/gpuinfra/roll.json, root's): the same command run
again after the laptop was interrupted resumes where it stopped (failed nodes are tried
again); ``--status`` says where each node is; another roll is refused while one is live
(``--abandon`` drops it, the nodes left as they are).

Exit 0: every node rolled; 1: the roll stopped or was interrupted (it says where and why; run
the same command again to resume); 2: bad input or refused.
"""

from __future__ import annotations

import argparse
import getpass
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuinfra import roll
from gpuinfra.errors import GpuinfraError
from gpuinfra.monitoring.units import TEXTFILE_DIRECTORY
from gpuinfra.parsers.slurm import SINFO, SlurmNode, parse_sinfo_nodes
from gpuinfra.reboot import REBOOT_MARKER
from gpuinfra.roll import NodeState, RollState
from gpuinfra_cli.roll_slurm import refuse_mixed_slurm
from gpuinfra_deploy.entry import pyinfra_command

HEALTH = "/usr/local/sbin/gpuinfra-health"
# Written to /run (a tmpfs) before a reboot: gone once the node booted again.
BOOT_MARK = "/run/gpuinfra-roll-before-reboot"
DRIVER_OVERRIDE = "nvidia_driver_change_under_processes=True"
# The roll reboots the nodes (Slurm does), then deploys again on the loaded driver.
ROLL_REBOOTS = "reboot_policy=never"
BACK_S = 600
POLL_S = 2
KUBE_DRAIN_S = 10  # each `kubectl drain` try; a pod still there is tried again next round
HEARTBEAT_S = 10


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
    max_unavailable: int
    max_fail: int = 0
    wait_s: int | None = None
    data: list[str] = field(default_factory=list)
    reboot: bool = False
    why: str = "rolling change"
    sudo: bool = False
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gpuinfra-roll-")))

    def __post_init__(self) -> None:
        self.head = Ssh(self.site.target(self.site.spec.head[0].name), self.sudo)
        self.hosts: dict[str, Ssh] = {}
        self.token = secrets.token_hex(8)
        self.me = f"pid {os.getpid()} on {socket.gethostname()}"
        self.state: RollState | None = None
        self.stopped = ""  # why this command stopped before the roll was over
        self.lock = threading.Lock()
        self.said: set[str] = set()  # the nodes whose wait was said once

    def host(self, name: str) -> Ssh:
        if name not in self.hosts:
            self.hosts[name] = Ssh(self.site.target(name), self.sudo)
        return self.hosts[name]

    def say(self, text: str) -> None:
        print(f"roll: {text}", flush=True)

    def on_head(self, command: str, what: str = "") -> str:
        """``command`` on the head, as root; its failure said as ``what`` (or the command)
        with the head's own last words."""
        with self.lock:
            rc, out, err = self.head.run(command)
        if rc != 0:
            shown = command if len(command) <= 120 else command[:117] + "..."
            words = ((err or out).strip().splitlines() or [""])[-1][:300]
            hint = ("; the SSH user is not root: add --sudo" if "ermission denied" in words
                    and not self.sudo else "")
            raise GpuinfraError(f"{what or f'on the head: `{shown}` failed'} (exit {rc}): "
                                f"{words}{hint}")
        return out

    def short(self, name: str) -> str:
        return self.site.spec.node(name).short_name

    def in_slurm(self, name: str) -> bool:
        return "slurm" in self.site.spec.node(name).schedulers

    def in_kube(self, name: str) -> bool:
        return "kubernetes" in self.site.spec.node(name).schedulers

    def slurm(self, names: Sequence[str]) -> dict[str, SlurmNode]:
        """Slurm's view of ``names`` (the roll's names), those Slurm lists."""
        names = [n for n in names if self.in_slurm(n)]
        if not names:
            return {}
        by_short = parse_sinfo_nodes(self.on_head(
            f"{SINFO} -n {','.join(self.short(n) for n in names)}"))
        return {n: by_short[self.short(n)] for n in names if self.short(n) in by_short}

    def jobs(self, names: Sequence[str], listed: dict[str, SlurmNode]) -> dict[str, list[str]]:
        """The job ids on each of ``names`` Slurm lists (squeue refuses a name it does not)."""
        shorts = {self.short(n): n for n in names if n in listed}
        return roll.jobs_by_node(roll.jobs_on(self.on_head(roll.squeue(list(shorts)))),
                                 shorts) if shorts else {}

    # ------------------------------------------------------------------ the state on the head

    def read_state(self) -> tuple[RollState | None, float]:
        """The roll state on the head and how long ago it was written (the head's clock)."""
        path = shlex.quote(roll.STATE_FILE)
        out = self.on_head(f"test -e {path} || exit 0; echo $(( $(date +%s) - "
                           f"$(stat -c %Y {path}) )); cat {path}")
        if not out.strip():
            return None, 0.0
        age, _, text = out.partition("\n")
        return RollState.from_json(text, f"{roll.STATE_FILE} on the head"), float(age)

    def save(self) -> None:
        """The state, written on the head (root's only; replaced whole, never half), and its
        series where node_exporter reads them (when the head has that folder)."""
        if self.state is None:
            return
        path = shlex.quote(roll.STATE_FILE)
        folder = shlex.quote(os.path.dirname(roll.STATE_FILE))
        prom = shlex.quote(f"{TEXTFILE_DIRECTORY}/{roll.METRICS_FILE}")
        self.on_head(f"umask 077 && mkdir -p {folder} && printf '%s\\n' "
                     f"{shlex.quote(self.state.to_json())} > {path}.new && mv -f {path}.new "
                     f"{path} && if [ -d {TEXTFILE_DIRECTORY} ]; then umask 022 && "
                     f"printf '%s' {shlex.quote(roll.metrics_text(self.state))} | "
                     f"sed \"s/[$]NOW/$(date +%s)/\" > {prom}.new && mv -f {prom}.new {prom}; fi",
                     f"cannot write the roll's state on the head ({roll.STATE_FILE})")

    def heartbeat(self, stop: threading.Event) -> None:
        """While a deploy runs (minutes), the state's time moves on: the roll is driven."""
        while not stop.wait(HEARTBEAT_S):
            try:
                self.save()
            except Exception:  # the head unreachable a moment: the next round says so
                pass

    def begin(self, names: Sequence[str]) -> None:
        """This command's roll: the live one resumed (same change), a new one, or refused."""
        mine = RollState(self.why, list(self.data), self.reboot, self.max_unavailable,
                         self.max_fail, [NodeState(n) for n in names], time.time(),
                         f"{getpass.getuser()}@{socket.gethostname()}")
        live, age = self.read_state()
        refused = roll.refusal(live, mine, age, self.token) if live else ""
        if refused:
            raise GpuinfraError(refused)
        if live and not live.finished:
            for node in live.phase("failed"):  # tried again: the operator looked at it
                node.phase, node.cause = "pending", ""
            live.max_unavailable, live.max_fail = self.max_unavailable, self.max_fail
            self.state = live
            self.say(f"resuming the roll started by {live.by}: "
                     f"{len(live.phase('done'))} of {len(live.nodes)} done")
        else:
            self.state = mine
        refuse_mixed_slurm(self, [n.name for n in self.state.phase("pending")])
        self.state.driver = f"{self.me} {self.token}"
        self.save()

    # ------------------------------------------------------------------ the roll

    def run(self, names: Sequence[str]) -> int:
        self.begin(names)
        state = self.state
        assert state is not None
        try:
            while not self.stopped:
                self.round()
                self.save()
                if state.settled():
                    break
                time.sleep(POLL_S)
        finally:
            state.driver = ""
            if not self.stopped and state.settled() and state.failed() == 0:
                state.finished = True
                state.outcome = f"done: {len(state.nodes)} node(s) rolled"
            try:
                self.save()
            except Exception as exc:  # the head unreachable: the next command takes over
                self.say(f"could not write the roll's state on the head: {exc}")
        if state.finished:
            self.say(state.outcome)
            return 0
        failed = state.phase("failed")
        said = self.stopped or (f"{len(failed)} node(s) failed (more than --max-fail "
                                f"{state.max_fail}): " + "; ".join(
                                    f"{n.name}: {n.cause}" for n in failed))
        self.say(f"stopped: {said}. The roll stays on the head: `gpuinfra roll --inventory "
                 f"{self.inventory} --status` shows it; the same command resumes it")
        return 1

    def round(self) -> None:
        state = self.state
        assert state is not None
        while state.may_start():
            self.take(state.phase("pending")[0])
        waiting = state.phase("waiting")
        if waiting:
            ready = self.idle(waiting)
            if ready:
                self.change(ready)
        back = [n for n in state.phase("rebooting") if self.rebooted(n)]
        if back:
            self.after_reboot(back)

    def take(self, node: NodeState) -> None:
        """Out of service: drained in Slurm and (each round) in Kubernetes."""
        node.phase, node.since = "waiting", time.time()
        if self.in_slurm(node.name):
            seen = self.slurm([node.name]).get(node.name)
            if seen is None:
                self.say(f"{node.name}: not in Slurm yet (a first deploy): nothing to drain")
            elif roll.drained_by_someone_else(seen):
                node.kept, node.cause = True, seen.reason
                self.say(f"{node.name}: already drained by someone else ({seen.reason}): "
                         "rolled, then left drained")
            else:
                self.on_head(roll.drain([self.short(node.name)], self.why))
                self.say(f"{node.name}: drained in Slurm")

    def idle(self, nodes: list[NodeState]) -> list[NodeState]:
        """The waiting nodes with nothing left on them; past --wait-jobs, the command stops."""
        listed = self.slurm([n.name for n in nodes])  # a first deploy's node is not, yet
        jobs = self.jobs([n.name for n in nodes], listed)
        ready = []
        for node in nodes:
            if node.name in listed and roll.reboot_pending(listed[node.name]):
                node.phase = "rebooting"  # asked of Slurm by a command killed before it said
                continue
            if jobs.get(node.name):
                if node.name not in self.said:
                    self.say(f"{node.name}: waiting for job(s) {', '.join(jobs[node.name])}")
                    self.said.add(node.name)
                continue
            if self.in_kube(node.name):
                with self.lock:
                    rc, out, err = self.head.run(roll.kube_drain(self.short(node.name),
                                                                 KUBE_DRAIN_S), KUBE_DRAIN_S + 30)
                if rc != 0:
                    if node.name not in self.said:
                        self.say(f"{node.name}: waiting for its pods to leave (kubectl drain: "
                                 f"{(err or out).strip().splitlines()[-1:]})")
                        self.said.add(node.name)
                    continue
            ready.append(node)
        if self.wait_s is not None:
            late = [n for n in nodes if n not in ready and time.time() - n.since > self.wait_s]
            if late:
                self.put_back(late, jobs)
        return ready

    def put_back(self, late: list[NodeState], jobs: dict[str, list[str]]) -> None:
        """--wait-jobs passed: the nodes still waiting are put back as they were."""
        seen = self.slurm([n.name for n in late])
        for node in late:
            if node.name in seen and roll.ours(seen[node.name]) and not node.kept:
                self.on_head(roll.resume([self.short(node.name)]))
            if self.in_kube(node.name):
                self.on_head(roll.kube_uncordon(self.short(node.name)))
            node.phase, node.since = "pending", 0.0
        listed = [roll.Job(j, n.name) for n in late for j in jobs.get(n.name, [])]
        self.stopped = roll.stopped_for_jobs(listed, self.wait_s or 0) if listed else (
            f"{', '.join(n.name for n in late)} still not drained after {self.wait_s} s")

    def change(self, nodes: list[NodeState]) -> None:
        """Deploy to the idle nodes; reboot those whose change needs it; judge the rest."""
        names = [n.name for n in nodes]
        if not self.deploy(names, DRIVER_OVERRIDE):
            for node in nodes:
                self.fail(node, "the deploy to it failed (see the log)")
            return
        for node in nodes:
            got = self.host(node.name).try_run(f"test -e {REBOOT_MARKER}")
            if got is None:
                self.fail(node, "unreachable over SSH after the deploy")
            elif self.reboot or got[0] == 0:
                self.reboot_node(node)
            else:
                self.judge(node)

    def reboot_node(self, node: NodeState) -> None:
        why = "--reboot" if self.reboot else "the change needs it"
        ssh = self.host(node.name)
        ssh.try_run(f"touch {BOOT_MARK}")
        if not node.kept and self.slurm([node.name]):
            self.on_head(roll.reboot([self.short(node.name)], self.why))
            node.phase, node.since = "rebooting", time.time()
            self.say(f"{node.name}: Slurm reboots it ({why}) and resumes it when it is back")
            return
        # Not in Slurm (Kubernetes only, or not registered yet), or drained by someone else
        # (Slurm's RESUME would clear that drain): the roll reboots it and waits.
        self.say(f"{node.name}: rebooting ({why})")
        ssh.try_run("systemctl reboot", timeout=10)
        ssh.close()
        if not self.booted(ssh):
            self.fail(node, f"did not come back within {BACK_S} s of its reboot")
            return
        self.after_reboot([node])

    def rebooted(self, node: NodeState) -> bool:
        """Back from Slurm's reboot: a new boot (the /run mark gone) and slurmd registered; a
        reboot Slurm gave up on (ResumeTimeout) fails the node."""
        seen = self.slurm([node.name]).get(node.name)
        if seen is not None and seen.base_state.lower() == "down" and "timed out" in seen.reason:
            self.fail(node, f"Slurm's reboot timed out ({seen.reason}): the node did not "
                            "register within ResumeTimeout; look at its console")
            return False
        if roll.rebooting(seen):
            return False
        got = self.host(node.name).try_run(f"test -e {BOOT_MARK}")
        return got is not None and got[0] != 0

    def after_reboot(self, nodes: list[NodeState]) -> None:
        """Deployed again on the loaded driver (no override: jobs may run on it again), then
        judged."""
        if not self.deploy([n.name for n in nodes], "", "again, on the loaded driver"):
            for node in nodes:
                self.fail(node, "the deploy after the reboot failed (see the log)")
            return
        for node in nodes:
            self.judge(node)

    def judge(self, node: NodeState) -> None:
        problem = self.slurmd_back(node.name) or self.healthy(node.name)
        if problem:
            self.fail(node, problem)
            return
        seen = self.slurm([node.name]).get(node.name)
        if seen is not None and roll.ours(seen) and not node.kept:
            self.on_head(roll.resume([self.short(node.name)]))
        if self.in_kube(node.name):
            self.on_head(roll.kube_uncordon(self.short(node.name)))
        node.phase, node.since = "done", time.time()
        self.say(f"{node.name}: changed, verified, back in service"
                 + (" (left drained: someone else's drain)" if node.kept else ""))

    def fail(self, node: NodeState, problem: str) -> None:
        """Kept out of service with the cause as the reason."""
        node.phase, node.since, node.cause = "failed", time.time(), problem
        if self.in_slurm(node.name) and not node.kept:
            try:
                self.on_head(roll.drain([self.short(node.name)], problem))
            except GpuinfraError as exc:
                self.say(f"{node.name}: could not drain it with the cause: {exc}")
        self.say(f"{node.name}: failed: {problem}; it stays drained")

    def deploy(self, names: list[str], override: str, why: str = "") -> bool:
        """The deploy limited to ``names`` and the head (the cluster's Slurm files live there
        and take the nodes' new facts: gres.conf's Links=/Cores= once the driver is loaded)."""
        log = self.log_dir / f"deploy-{'-'.join(names)}-{int(time.time())}.log"
        hosts = [self.site.spec.head[0].name, *names]
        command = pyinfra_command(self.inventory, *[a for n in hosts for a in ("--limit", n)],
                                  *(["--data", override] if override else []),
                                  "--data", ROLL_REBOOTS,
                                  *[a for d in self.data for a in ("--data", d)],
                                  *(["--sudo"] if self.sudo else []))
        self.say(f"deploying to {', '.join(names)}{f' {why}' if why else ''} (log: {log})")
        stop = threading.Event()
        beat = threading.Thread(target=self.heartbeat, args=(stop,), daemon=True)
        beat.start()
        try:
            with log.open("w") as out:
                rc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                                    check=False).returncode
        finally:
            stop.set()
            beat.join()
        if rc != 0:
            tail = log.read_text().strip().splitlines()[-8:]
            self.say(f"the deploy failed (exit {rc}):\n  " + "\n  ".join(tail))
        return rc == 0

    def booted(self, node: Ssh) -> bool:
        deadline, _ = time.monotonic() + BACK_S, time.sleep(3)
        while time.monotonic() < deadline:
            got = node.try_run(f"test -e {BOOT_MARK} && echo same || "
                               "systemctl is-system-running --wait", timeout=120)
            if got is not None and got[1].strip() in ("running", "degraded"):
                return True
            time.sleep(3)
        return False

    def slurmd_back(self, name: str) -> str:
        deadline = time.monotonic() + BACK_S
        while self.in_slurm(name) and time.monotonic() < deadline:
            if roll.back(self.slurm([name]).get(name)):
                return ""
            time.sleep(2)
        return f"slurmd did not register with the controller within {BACK_S} s" \
            if self.in_slurm(name) else ""

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

    # ------------------------------------------------------------------ --status, --abandon

    def status(self) -> int:
        live, age = self.read_state()
        if live is None:
            print(f"roll: no roll on the head ({roll.STATE_FILE} absent)")
            return 0
        names = [n.name for n in live.nodes if n.name in {h.name for h in self.site.spec.nodes}]
        slurm = self.slurm(names)
        jobs = self.jobs([n.name for n in live.phase("waiting")], slurm)
        driven = (f"driven now by {live.driver.rsplit(' ', 1)[0]} (its last word {age:.0f} s "
                  "ago)" if live.driver and age < roll.STALE_S else
                  "not driven now: run the command that started it again to resume it, or "
                  "`gpuinfra roll --abandon` to drop it")
        for line in roll.status_lines(live, slurm, jobs, time.time(), driven):
            print(line)
        return 0

    def abandon(self) -> int:
        live, age = self.read_state()
        if live is None:
            print(f"roll: no roll on the head ({roll.STATE_FILE} absent): nothing to drop")
            return 0
        if live.driver and age < roll.STALE_S and not live.finished:
            raise GpuinfraError(f"the roll is driven now by {live.driver.rsplit(' ', 1)[0]} "
                                f"({age:.0f} s ago): stop that command first")
        out = live.phase("waiting", "rebooting", "failed")
        self.on_head(f"rm -f {shlex.quote(roll.STATE_FILE)} "
                     f"{shlex.quote(f'{TEXTFILE_DIRECTORY}/{roll.METRICS_FILE}')}")
        if out:
            print("roll: dropped. Left as they are (drained by the roll: look at each, then "
                  "`scontrol update nodename=NODE state=resume`): " + ", ".join(
                      f"{n.name} ({n.phase}{': ' + n.cause if n.cause else ''})" for n in out))
        else:
            print("roll: dropped; no node was left out of service by it")
        return 0


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
    names = [n for n in workers if not args.limit or n in args.limit]
    most = roll.max_unavailable(args.max_unavailable, len(workers))
    fails = roll.max_fail(args.max_fail, len(names))
    if args.wait_jobs is not None and args.wait_jobs < 0:
        raise GpuinfraError(f"--wait-jobs {args.wait_jobs}: seconds, 0 or more")
    for item in args.data:
        if "=" not in item:
            raise GpuinfraError(f"--data {item!r}: KEY=VALUE, as pyinfra's --data")
    roller = Roll(args.inventory, site, most, fails, args.wait_jobs, args.data, args.reboot,
                  args.why, getattr(args, "sudo", False))
    # SIGTERM as Ctrl-C: Python's own handler raises KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        if getattr(args, "status", False):
            return roller.status()
        if getattr(args, "abandon", False):
            return roller.abandon()
        return roller.run(names)
    except KeyboardInterrupt:
        print("roll: interrupted. The roll's state is on the head: run the same command again "
              "to resume it (`--status` shows where it is)", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        roller.head.close()
        for node in roller.hosts.values():
            node.close()


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("roll", help="a disruptive change rolled over the workers, drained, "
                            "resumable", description=__doc__.split("\n\n")[0])
    parser.add_argument("--inventory", required=True, help="inventory/<site>.py")
    parser.add_argument("--max-unavailable", default="1", metavar="N|P%",
                        help="workers out of service at once: a number or a share of the "
                             "site's workers (default 1)")
    parser.add_argument("--max-fail", default="0", metavar="N|P%",
                        help="failed nodes after which the roll takes no new one (default 0: "
                             "stop at the first)")
    parser.add_argument("--wait-jobs", type=int, default=None, metavar="S",
                        help="bound the wait for a node's jobs (default: as long as they run)")
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
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--status", action="store_true",
                      help="where the roll on the head is, node by node")
    what.add_argument("--abandon", action="store_true",
                      help="drop the roll on the head (its nodes are left as they are)")
    parser.set_defaults(func=cmd_roll)
