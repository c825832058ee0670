"""Lab proof: a deploy with a broken slurm.conf is refused, and the controller keeps running.

    .venv/bin/python -m gpuinfra_lab.bad_slurm_conf [inventory/lab.py]

On a converged lab: records slurmctld's PID and the live slurm.conf's SHA-256 on the head,
deploys with a value Slurm's parser refuses (``--data slurm_conf_extra='{"MaxJobCount":
"lots"}'``: a misspelt key never gets this far, the parser tables refuse it before any host is
touched, gpuinfra/knowledge/slurm_keys.py), and then requires: the deploy failed, its output
carries Slurm's own error and gpuinfra's refusal, slurmctld is active with the same PID (never
restarted), the live slurm.conf is unchanged, and sinfo still answers. Exit 0 when all hold, 1
listing what did not (gpuinfra_lab/refusal.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from gpuinfra_lab.refusal import Refusal, on_head, prove

BAD_DATA = 'slurm_conf_extra={"MaxJobCount": "lots"}'
# What slurmd -G of 22.05.8 says of it (measured in the Debian 12 judge image).
SLURM_SAYS = "MaxJobCount value (lots) is not a valid number"


def controller_probe(conf: str, answers: str) -> Callable[[dict], dict[str, str]]:
    """The probe of slurmctld on the head (gpuinfra_lab/refusal.py): its state, PID, the live
    ``conf``'s SHA-256 and whether the ``answers`` command (a client command) succeeds."""
    def probe(head: dict) -> dict[str, str]:
        name = head["name"]
        return {
            "active": on_head(name, "systemctl is-active slurmctld"),
            "pid": on_head(name, "systemctl show -p MainPID --value slurmctld"),
            "conf": on_head(name, f"sha256sum /etc/slurm/{conf} | cut -c1-16"),
            "answers": on_head(name, f"{answers} >/dev/null && echo answers"),
        }
    return probe


PROOF = Refusal(
    tag="bad-slurm-conf", daemon="slurmctld", conf="slurm.conf",
    deploy=("deploy.py", "--data", BAD_DATA),
    must_say=(SLURM_SAYS, "gpuinfra: Slurm refused the new configuration"),
    probe=controller_probe("slurm.conf", "sinfo -h -o %P"), answered="sinfo answers",
    not_answered="sinfo does not answer after the refused deploy")

if __name__ == "__main__":
    sys.exit(prove(PROOF, sys.argv[1:]))
