"""Lab proof: `gpuinfra deploy` finishes a reboot-requiring deploy in the same command, rolling
the workers that need the reboot (drained, one at a time), and touches no other worker.

    .venv/bin/python -m gpuinfra_lab.whole_deploy [inventory/lab.py]

On a deployed lab with two workers, with a sampler reading `sinfo` every second (the one of
gpuinfra_lab/rolling.py), each step prints one line; exit 0 when every step held:

1. ``reboot_policy = "never"`` (the lab's): a change that needs a reboot
   (``nvidia_driver_device_mode``, the driver's options) deployed to the second worker with
   ``gpuinfra deploy --limit <head> --limit <worker>``: exit 0, the worker named with its
   reason and the roll command that finishes it; it is not rebooted (a file in its /run is
   still there) and never left service;
2. the same command with ``--data reboot_policy=if-needed``: the worker is rolled in the same
   command: drained, rebooted (the /run file gone), its device nodes in the new mode, resumed;
   the first worker never left service;
3. back to the site's mode the same way (``gpuinfra deploy --data reboot_policy=if-needed``):
   rolled again, mode 0660, no reboot marker left.
"""

from __future__ import annotations

import subprocess
import sys

from gpuinfra.parsers.slurm import SINFO, parse_sinfo_nodes
from gpuinfra.reboot import REBOOT_MARKER
from gpuinfra_lab.limited_run import workers
from gpuinfra_lab.refusal import REPO, lab_ssh
from gpuinfra_lab.rolling import Sampler, _serving
from gpuinfra_lab.steps import Steps

TAG = "whole-deploy"
MODE = "0640"  # the site's is the default 0660
DATA = f'nvidia_driver_device_mode="{MODE}"'
IF_NEEDED = "reboot_policy=if-needed"
BEFORE = "/run/gpuinfra-proof-before-reboot"  # /run is fresh after a reboot


def deploy(head: str, worker: str, *data: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "gpuinfra"), "deploy", "--inventory",
                           "inventory/lab.py", "--limit", head, "--limit", worker,
                           *[a for d in data for a in ("--data", d)]], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=1800)


class WholeDeployProof(Steps):
    def mode(self, name: str) -> str:
        return lab_ssh(name, "stat -c %a /dev/nvidia0").stdout.strip()

    def booted_since_mark(self, name: str) -> bool:
        return lab_ssh(name, f"test -e {BEFORE}").returncode != 0

    def tail(self, out: subprocess.CompletedProcess[str]) -> str:
        return repr((out.stdout + out.stderr).strip().splitlines()[-4:])

    def run(self) -> int:
        names = self.two_workers(workers())
        if not names:
            return 1
        first, second = names
        try:
            lab_ssh(second, f"touch {BEFORE}")
            with Sampler(self.head) as sampler:
                out = deploy(self.head, second, DATA)
            said = f"deploy: {second} needs a reboot: " in out.stdout and \
                f"gpuinfra roll --inventory inventory/lab.py --limit {second}" in out.stdout
            self.say(out.returncode == 0 and said and not self.booted_since_mark(second)
                     and not sampler.drained(second) and not sampler.drained(first),
                     f"reboot_policy 'never': {second} named with its reason and the roll "
                     "command, not rebooted, never drained",
                     f"reboot_policy 'never': exit {out.returncode}, named: {said}, rebooted: "
                     f"{self.booted_since_mark(second)}, drained: "
                     f"{sampler.drained(second)} {self.tail(out)}")
            self.rolled(first, second, (DATA, IF_NEEDED), MODE.lstrip("0"), "the new mode")
            lab_ssh(second, f"touch {BEFORE}")
            self.rolled(first, second, (IF_NEEDED,), "660", "back to the site's mode")
        finally:
            lab_ssh(self.head, f"scontrol update nodename={second} state=resume 2>/dev/null")
        return self.end()

    def rolled(self, first: str, second: str, data: tuple[str, ...], mode: str,
               what: str) -> None:
        with Sampler(self.head) as sampler:
            out = deploy(self.head, second, *data)
        nodes = parse_sinfo_nodes(lab_ssh(self.head, SINFO).stdout)
        marker = lab_ssh(second, f"test -e {REBOOT_MARKER}").returncode == 0
        ok = (out.returncode == 0 and self.booted_since_mark(second) and not marker
              and self.mode(second) == mode and sampler.drained(second)
              and not sampler.drained(first) and second in nodes
              and _serving(nodes[second].state))
        self.say(ok, f"reboot_policy 'if-needed', {what}: {second} drained "
                     f"({', '.join(dict.fromkeys(sampler.states_out(second)))}), rebooted, "
                     f"mode {mode}, resumed, in the same command; {first} never drained",
                 f"reboot_policy 'if-needed', {what}: exit {out.returncode}, rebooted: "
                 f"{self.booted_since_mark(second)}, marker left: {marker}, mode "
                 f"{self.mode(second)} (want {mode}), {second} out: "
                 f"{sampler.states_out(second)}, {first} drained: {sampler.drained(first)}, "
                 f"now {nodes.get(second)} {self.tail(out)}")


def main(argv: list[str]) -> int:
    return WholeDeployProof(TAG, argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
