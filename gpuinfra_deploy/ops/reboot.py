"""The reboot mechanism every role shares: a marker saying why, and the site's reboot_policy.

A change that takes effect only after a reboot (a driver install, a blacklisted module, kernel
arguments) appends its reason to the marker /run/gpuinfra/reboot-required (a tmpfs: the reboot
that applies the change clears it; see gpuinfra.reboot). With ``reboot_policy = "never"`` the
deploy warns per host. With ``"if-needed"``: a scheduler's worker is never rebooted by the
deploy itself (pyinfra would reboot every such host at once, under their jobs): it says so,
and `gpuinfra deploy` rolls it after the run (drained, in batches, then the files that wait
for the reboot: gpuinfra_cli/deploy.py); any other host (a hypervisor, the head) is rebooted
in the run, unless Slurm jobs run there (then it is left to `gpuinfra roll`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyinfra import host, logger
from pyinfra.api import QuoteString, StringCommand
from pyinfra.facts.files import File
from pyinfra.operations import server

from gpuinfra import reboot
from gpuinfra_deploy.facts.system import SlurmJobsHere


def reboot_when_needed(policy: str, why: str, triggers: Sequence[tuple[Any, str]],
                       worker: bool = False) -> None:
    """Record why a reboot is needed; warn per host; reboot when the policy says so.

    + policy: the spec's reboot_policy ("never" or "if-needed")
    + why: what the reboot does, for the messages ("to load the NVIDIA driver")
    + triggers: (operation, reason) pairs; a changed operation needs a reboot for its reason
    + worker: the host is a scheduler's worker (NodeSpec.is_worker): rebooted only by the roll
    """
    triggers = [(op, reason) for op, reason in triggers if op is not None]
    for op, reason in triggers:
        server.shell(name=f"Record that a reboot is needed: {reason}",
                     commands=[_marker_command(reason)], _if=op.did_change)
    pending_before = bool(host.get_fact(File, path=reboot.REBOOT_MARKER))
    reasons = [reason for op, reason in triggers if op.will_change]
    if pending_before:
        reasons.append("a reboot recorded by an earlier deploy is still pending")
    if reasons and policy == "never":
        logger.warning(f"{host.print_prefix}reboot needed ({'; '.join(reasons)}): "
                       f"reboot_policy is 'never', reboot this host {why}; `gpuinfra roll "
                       f"--inventory inventory/<site>.py --limit {host.name}` reboots it "
                       "drained, then writes what waits for the reboot (gres.conf's GPU "
                       "topology, the CDI spec)")
    if policy != "if-needed":
        return
    if worker:
        if reasons:
            logger.warning(f"{host.print_prefix}reboot needed ({'; '.join(reasons)}): a "
                           f"worker is rebooted {why} only drained and in batches, never by "
                           "the deploy itself: `gpuinfra deploy --inventory "
                           "inventory/<site>.py` does it after the run (reboot_policy "
                           f"'if-needed'), or `gpuinfra roll --inventory inventory/<site>.py "
                           f"--limit {host.name}`")
        return
    # Never under running jobs: a node running Slurm jobs is left for `gpuinfra roll`,
    # which drains it, waits for them and reboots it.
    jobs = host.get_fact(SlurmJobsHere) if (reasons or triggers) else []
    if jobs:
        logger.warning(f"{host.print_prefix}not rebooted {why}: Slurm jobs run here "
                       f"({', '.join(jobs[:10])}); `gpuinfra roll --inventory "
                       f"inventory/<site>.py --limit {host.name}` drains it, waits for "
                       "them and reboots it")
        return
    server.reboot(name=f"Reboot {why}",
                  _if=lambda: pending_before or any(op.did_change() for op, _ in triggers))


def _marker_command(reason: str) -> StringCommand:
    directory = reboot.REBOOT_MARKER.rsplit("/", 1)[0]
    return StringCommand("mkdir", "-p", QuoteString(directory), "&&", "echo", QuoteString(reason),
                         ">>", QuoteString(reboot.REBOOT_MARKER))
