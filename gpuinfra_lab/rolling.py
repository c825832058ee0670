"""Lab proof: `gpuinfra roll` rolls a reboot-requiring change over the workers with jobs
running and no person waiting, survives the command being killed, and stops at a node that
fails, leaving only that node out of service.

    .venv/bin/python -m gpuinfra_lab.rolling [inventory/lab.py]

On a deployed lab with two workers (containers restart after a reboot, as machines do:
gpuinfra_lab/podman.py; slurmd says it rebooted when it restarts: the container's kernel is
the host's, gpuinfra_lab/gpuinfra-lab-slurmd-boot.conf), with a sampler reading `sinfo` every
second, each step prints one line; exit 0 when every step held, 1 listing what did not:

1. the bound: a job that outlives ``--wait-jobs 5`` on the first worker stops the roll, which
   names the job; the first worker is back in service, the second was never drained, no
   device mode changed; ``--abandon`` drops the roll's state;
2. the unattended roll: a job on each worker (25 s and 70 s) and a reboot-requiring change
   (``nvidia_driver_device_mode``: the driver's options). The command is killed while the
   first worker waits for its job; ``--status`` shows the node waiting for that job; another
   roll is refused; the same command run again resumes and finishes: both jobs COMPLETED (a
   node rebooted under its job would have failed it), each worker drained, changed, rebooted
   by Slurm (``scontrol reboot ASAP nextstate=RESUME``), judged and back in service; the
   sampler never saw both workers out of service at once;
3. a node that fails its checks after its reboot (the first worker's topology replay swapped
   for another machine's PCIe-only captures): the roll stops there, exit 1, the node stays
   drained with the cause (``gpuinfra-roll: <its health check's first failure>``, or the
   health check's own ``gpuinfra: ...`` when it ran first: every 10 s in the lab, so it may
   drain the node before the roll takes it, and the roll then reboots it itself and keeps
   that drain), and the second worker (after it in the roll) was never drained.

Then the captures are put back, the stopped roll dropped and every worker rolled back to the
site's mode, whatever happened.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from gpuinfra.health.slurm import PREFIX as HEALTH_PREFIX
from gpuinfra.parsers.slurm import SINFO, parse_sinfo_nodes
from gpuinfra.roll import PREFIX
from gpuinfra_lab.health_drain import BROKEN_CAPTURES, HARDWARE, write
from gpuinfra_lab.limited_run import workers
from gpuinfra_lab.refusal import REPO, lab_ssh, on_head
from gpuinfra_lab.steps import Steps

TAG = "rolling"
MODE = "0640"  # the site's mode is the default 0660 (group_data/lab.py leaves it)
DATA = f'nvidia_driver_device_mode="{MODE}"'
BROKEN = REPO / "gpuinfra_lab" / "hardware" / "2x-a100-pcie-bridge-missing"


GPUINFRA_ROLL = [str(REPO / ".venv" / "bin" / "gpuinfra"), "roll", "--inventory",
                 "inventory/lab.py"]


def roll(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUINFRA_ROLL, *args], cwd=REPO, capture_output=True, text=True,
                          check=False, timeout=1800)


def killed_while(words: str, *args: str, within_s: float = 120) -> str:
    """Start a roll, kill it (SIGTERM, as `kill` does) once its output says ``words``: what
    it printed."""
    with subprocess.Popen([*GPUINFRA_ROLL, *args], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as command:
        assert command.stdout is not None
        seen, deadline = [], time.monotonic() + within_s
        for line in command.stdout:
            seen.append(line)
            if words in line or time.monotonic() > deadline:
                break
        command.send_signal(signal.SIGTERM)
        seen.append(command.communicate(timeout=60)[0])
    return "".join(seen)


class Sampler:
    """`sinfo` on the head every second, in a thread: the states seen, in order."""

    def __init__(self, head_name: str) -> None:
        self.head = head_name
        self.seen: list[dict[str, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            out = lab_ssh(self.head, SINFO).stdout
            self.seen.append({n.name: n.state for n in parse_sinfo_nodes(out).values()})
            time.sleep(1)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    # A sample where sinfo named no such node (it failed or timed out while slurmctld
    # restarted) says nothing about the node: it is neither in service nor out of it.
    def out(self, name: str) -> bool:
        return bool(self.states_out(name))

    def states_out(self, name: str) -> list[str]:
        """The states seen for ``name`` that do not serve jobs, in order (the evidence)."""
        return [s[name] for s in self.seen if name in s and not _serving(s[name])]

    def drained(self, name: str) -> list[str]:
        """The drain states seen for ``name`` (``drain``, ``drng``, ``drained``...), in order:
        the evidence that a roll drained it. A node ``unknown`` to a slurmctld that has just
        restarted (the roll's deploy restarts it when gres.conf changes) until its slurmd
        registers again is out of service for those seconds, but was not drained."""
        return [s[name] for s in self.seen if name in s
                and s[name].rstrip("*~#!%$@^-+").startswith(("drain", "drng"))]

    def both_out(self, names: list[str]) -> bool:
        """A sample with every one of ``names`` taken out (drained, down, rebooting); a node
        ``unknown`` to a just-restarted slurmctld is the controller's state, not the node's."""
        return any(all(n in s and not _serving(s[n])
                       and not s[n].rstrip("*~#!%$@^-+").startswith("unknown") for n in names)
                   for s in self.seen)


def _serving(state: str) -> bool:
    return state.rstrip("*~#!%$@^-+") in ("idle", "mixed", "allocated", "completing")


class RollProof(Steps):
    def __init__(self, inventory: str) -> None:
        super().__init__(TAG, inventory)

    def mode(self, name: str) -> str:
        return lab_ssh(name, "stat -c %a /dev/nvidia0").stdout.strip()

    def run(self) -> int:
        names = self.two_workers(workers())
        if not names:
            return 1
        try:
            self.bound(*names)
            self.rolled(*names)
            self.stops(*names)
        finally:
            on_head(self.head, "scancel -u root")
            put_back = " && ".join(f"mv -f {HARDWARE}/{f}.saved {HARDWARE}/{f}"
                                   for f in BROKEN_CAPTURES)
            lab_ssh(names[0], f"[ -e {HARDWARE}/topo-m.txt.saved ] && {put_back}; true")
            on_head(self.head, f"scontrol update nodename={','.join(names)} state=resume")
            roll("--abandon")
            back = roll("--why", "lab proof: back to the site's mode")
            self.say(back.returncode == 0 and all(self.mode(n) == "660" for n in names),
                     "every worker rolled back to the site's mode",
                     f"rolling back failed (exit {back.returncode}): "
                     f"{back.stdout.strip().splitlines()[-3:]}")
        return self.end()

    def bound(self, first: str, second: str) -> None:
        job = self.job(first, 600)
        with Sampler(self.head) as sampler:
            out = roll("--wait-jobs", "5", "--data", DATA, "--why", "lab proof: the bound")
        nodes = parse_sinfo_nodes(lab_ssh(self.head, SINFO).stdout)
        self.say(out.returncode == 1 and f"{job} (on {first})" in out.stdout
                 and _serving(nodes[first].state) and not sampler.drained(second)
                 and self.mode(first) == self.mode(second) == "660",
                 f"the bound: stopped naming job {job}; {first} back in service, {second} "
                 "never drained, nothing changed",
                 f"the bound: exit {out.returncode}, job named: "
                 f"{f'{job} (on {first})' in out.stdout}, {first} {nodes[first].state}, "
                 f"{second} drained: {sampler.drained(second)}, modes {self.mode(first)}/"
                 f"{self.mode(second)}")
        on_head(self.head, f"scancel {job}")
        dropped = roll("--abandon")
        self.say(dropped.returncode == 0 and "dropped; no node was left out of service"
                 in dropped.stdout, "--abandon dropped the stopped roll; no node left out",
                 f"--abandon: exit {dropped.returncode}: {dropped.stdout.strip()}")

    def rolled(self, first: str, second: str) -> None:
        jobs = {first: self.job(first, 25), second: self.job(second, 70)}
        why = ("--data", DATA, "--why", "lab proof: device mode")
        with Sampler(self.head) as sampler:
            killed = killed_while(f"{first}: waiting for job(s) {jobs[first]}", *why)
            status = roll("--status")
            other = roll("--why", "lab proof: another change")
            out = roll(*why)
        waits = [line for line in status.stdout.splitlines() if line.split()[:1] == [first]
                 and f"waiting for job(s) {jobs[first]}" in line]
        self.say("interrupted" in killed and bool(waits) and "not driven now" in status.stdout,
                 f"killed while {first} waited for job {jobs[first]}; --status shows it "
                 "waiting for that job, the roll not driven",
                 f"the kill or --status: {killed.strip().splitlines()[-2:]} / "
                 f"{status.stdout.strip().splitlines()}")
        self.say(other.returncode == 2 and "a roll is live on the head" in other.stderr,
                 "another roll is refused while this one is live",
                 f"another roll: exit {other.returncode}: {other.stderr.strip()[-300:]}")
        states = {n: on_head(self.head, f"sacct -n -X -j {j} -o State").split()
                  for n, j in jobs.items()}
        modes = {n: self.mode(n) for n in (first, second)}
        self.say(out.returncode == 0 and "resuming the roll" in out.stdout
                 and all(v[:1] == ["COMPLETED"] for v in states.values())
                 and set(modes.values()) == {MODE.lstrip("0")}
                 and out.stdout.count("Slurm reboots it") == 2,
                 f"the same command resumed and finished: jobs {jobs[first]} and "
                 f"{jobs[second]} COMPLETED, both workers drained, changed (mode {MODE}), "
                 "rebooted by Slurm once idle, verified and resumed",
                 f"the resumed roll: exit {out.returncode}, jobs {states}, modes {modes}, "
                 f"output: {out.stdout.strip().splitlines()[-4:]}")
        self.say(sampler.out(first) and sampler.out(second)
                 and not sampler.both_out([first, second]),
                 f"never both out of service ({len(sampler.seen)} samples)",
                 f"both workers were out of service at once, or one never drained "
                 f"({len(sampler.seen)} samples)")

    def stops(self, first: str, second: str) -> None:
        """The first worker in the roll's order fails after its reboot; the second is after it
        and must never be drained."""
        lab_ssh(first, " && ".join(f"cp -p {HARDWARE}/{f} {HARDWARE}/{f}.saved"
                                   for f in BROKEN_CAPTURES))
        for capture in BROKEN_CAPTURES:
            write(first, f"{HARDWARE}/{capture}", (BROKEN / capture).read_text())
        with Sampler(self.head) as sampler:
            out = roll("--reboot", "--why", "lab proof: a bad node")
        nodes = parse_sinfo_nodes(lab_ssh(self.head, SINFO).stdout)
        reason = nodes[first].reason
        # The node's own health check (every 10 s in the lab, and at slurmd's start after the
        # reboot) may drain it first ("gpuinfra: <cause>"), even before the roll takes it: the
        # roll then keeps that drain (someone else's), reboots the node itself rather than
        # through Slurm (whose RESUME would clear the drain) and leaves it drained. Otherwise
        # Slurm reboots it and the roll drains it with the cause. Both are the roll's way.
        rebooted = ("Slurm reboots it" if "Slurm reboots it" in out.stdout else
                    "the roll rebooted it, the health check's drain kept"
                    if f"{first}: already drained by someone else" in out.stdout
                    and f"{first}: rebooting (--reboot)" in out.stdout else "")
        self.say(out.returncode == 1 and f"{first}: failed:" in out.stdout
                 and reason.startswith((PREFIX, HEALTH_PREFIX))
                 and not _serving(nodes[first].state) and bool(rebooted),
                 f"a node failing after its reboot stops the roll: {first} left drained "
                 f"({reason}; {rebooted})",
                 f"a failing node: exit {out.returncode}, {first} {nodes[first].state} "
                 f"({reason!r}); output: {out.stdout.strip().splitlines()[-3:]}")
        self.say(not sampler.drained(second), f"{second}: never drained by the stopped roll",
                 f"{second} was drained by a roll that stopped at {first}: states seen "
                 f"{sampler.drained(second)} in {len(sampler.seen)} samples")


def main(argv: list[str]) -> int:
    return RollProof(argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
