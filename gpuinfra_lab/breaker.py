"""Lab proof: the health check's circuit breaker. A check that fails on every worker at once
drains at most the configured share, trips the breaker, raises its alert series, and drains
nothing more until a person resets it.

    .venv/bin/python -m gpuinfra_lab.breaker [inventory/lab.py]

On a deployed lab with two workers (health_check_interval = 10), each step prints one line;
exit 0 when every step held, 1 listing what did not:

1. the workers' Comments cleared (the window's memory of the drains earlier proofs made: a
   ``gpuinfra-drained: <t>`` stamp left there counts against the share, so the other worker's
   check could trip the breaker first and hold both, as a fresh-clone CI run once saw), then
   the workers deployed with ``health_breaker_share = 0.5`` (at most one of the two GPU nodes
   drained automatically within the window; the site's own value is 1.0, group_data/lab.py);
2. both workers' topology replays swapped at once for another machine's PCIe-only captures
   (tests' 2x-a100-pcie-bridge-missing): exactly one is drained (``gpuinfra: ...``), the other
   stays in service holding the trip (its Slurm Comment ``gpuinfra-breaker: tripped ...``),
   and `gpuinfra health breaker` says TRIPPED (exit 1);
3. the head's node-state collector (gpuinfra-slurm-nodes.service, run now) writes
   ``gpuinfra_health_breaker_tripped{held="<that worker>"} 1``, the series HealthBreakerTripped
   fires on (its rule is promtool-tested: tests/unit/test_monitoring_rules.py);
4. three more check intervals: still only one worker drained;
5. `gpuinfra health reset-breaker` clears the trip (exit 0, `breaker` then says not tripped).

Then the captures are put back (the drained worker is resumed by its own check), the comments
cleared and the workers deployed again with the site's values, whatever happened.
"""

from __future__ import annotations

import subprocess
import sys
import time

from gpuinfra.health import breaker
from gpuinfra_lab.health_drain import BROKEN_CAPTURES, HARDWARE, INTERVAL_S, write
from gpuinfra_lab.limited_run import workers
from gpuinfra_lab.refusal import REPO, lab_ssh, on_head
from gpuinfra_lab.rolling import BROKEN
from gpuinfra_lab.steps import Steps

TAG = "breaker"
SHARE = "health_breaker_share=0.5"
PROM = "/var/lib/prometheus/node-exporter/gpuinfra-slurm-nodes.prom"


def gpuinfra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "gpuinfra"), *args], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=600)


def deploy(names: list[str], *data: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "pyinfra"), "-y", "inventory/lab.py",
                           "deploy.py", *[a for n in names for a in ("--limit", n)],
                           *[a for d in data for a in ("--data", d)]], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=1200)


class BreakerProof(Steps):
    def __init__(self, inventory: str) -> None:
        super().__init__(TAG, inventory)

    def seen(self) -> list[breaker.Seen]:
        return breaker.parse(lab_ssh(self.head, breaker.SINFO_LINE).stdout)

    def run(self) -> int:
        names = self.two_workers(workers())
        if not names:
            return 1
        try:
            self.forget(names)
            out = deploy(names, SHARE)
            self.say(out.returncode == 0, f"both workers deployed with {SHARE}",
                     f"the deploy with {SHARE} failed: {out.stdout.strip()[-300:]}")
            if out.returncode == 0:
                self.trip(names)
        finally:
            for name in names:
                lab_ssh(name, " && ".join(f"mv -f {HARDWARE}/{f}.saved {HARDWARE}/{f}"
                                          for f in BROKEN_CAPTURES) + " 2>/dev/null; true")
            self.wait_healthy(names)
            self.forget(names)
            out = deploy(names)
            self.say(out.returncode == 0, "the captures put back, the comments cleared, the "
                     "workers deployed again with the site's values",
                     f"putting the lab back failed: {out.stdout.strip()[-300:]}")
        return self.end()

    def forget(self, names: list[str]) -> None:
        """Clear the workers' Comments: the breaker's stamps (its window's memory)."""
        on_head(self.head, " ; ".join(f"scontrol update nodename={n} comment=''"
                                      for n in names))

    def trip(self, names: list[str]) -> None:
        for name in names:
            lab_ssh(name, " && ".join(f"cp -p {HARDWARE}/{f} {HARDWARE}/{f}.saved"
                                      for f in BROKEN_CAPTURES))
        for name in names:  # both at once: a check (or policy) bug on every node
            for capture in BROKEN_CAPTURES:
                write(name, f"{HARDWARE}/{capture}", (BROKEN / capture).read_text())
        deadline = time.monotonic() + 8 * INTERVAL_S
        while time.monotonic() < deadline:
            seen = self.seen()
            if breaker.tripped(seen) is not None:
                break
            time.sleep(2)
        seen = {n.name: n for n in self.seen()}
        drained = sorted(n for n in names if seen[n].drained_by_check)
        held = breaker.tripped(seen.values())
        said = gpuinfra("health", "breaker", "--inventory", "inventory/lab.py")
        self.say(len(drained) == 1 and held is not None and held.name not in drained
                 and not seen[held.name].drained_by_check and said.returncode == 1
                 and "TRIPPED" in said.stdout,
                 f"one worker drained ({', '.join(drained)}: "
                 f"{seen[drained[0]].reason if drained else ''}), "
                 f"{held.name if held else '?'} held in service with the trip; `gpuinfra health "
                 "breaker` says TRIPPED",
                 f"drained {drained}, held {held}, states "
                 f"{ {n: (s.state, s.reason, s.comment) for n, s in seen.items()} }, "
                 f"breaker said (exit {said.returncode}) {said.stdout.strip()}")
        on_head(self.head, "systemctl start gpuinfra-slurm-nodes.service")
        prom = on_head(self.head, f"cat {PROM}")
        want = f'gpuinfra_health_breaker_tripped{{held="{held.name if held else ""}"}} 1'
        self.say(held is not None and want in prom, f"the head's collector writes {want}",
                 f"the head's collector wrote no trip: "
                 f"{[line for line in prom.splitlines() if 'breaker' in line]}")
        time.sleep(3 * INTERVAL_S)
        after = sorted(n.name for n in self.seen() if n.name in names and n.drained_by_check)
        self.say(after == drained, f"{3 * INTERVAL_S} s later still only {', '.join(drained)} "
                 "drained", f"drained after the trip: {after} (before: {drained})")
        reset = gpuinfra("health", "reset-breaker", "--inventory", "inventory/lab.py")
        again = gpuinfra("health", "breaker", "--inventory", "inventory/lab.py")
        self.say(reset.returncode == 0 and "the breaker is reset" in reset.stdout
                 and again.returncode == 0 and "not tripped" in again.stdout,
                 "reset-breaker cleared the trip; `breaker` says not tripped",
                 f"reset (exit {reset.returncode}): {reset.stdout.strip()} {reset.stderr.strip()}"
                 f"; breaker (exit {again.returncode}): {again.stdout.strip()}")

    def wait_healthy(self, names: list[str]) -> None:
        """Until no worker is drained by the check (its own check resumes it)."""
        deadline = time.monotonic() + 8 * INTERVAL_S
        while time.monotonic() < deadline:
            if not [n for n in self.seen() if n.name in names and n.drained_by_check]:
                return
            time.sleep(2)


def main(argv: list[str]) -> int:
    return BreakerProof(argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
