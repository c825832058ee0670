"""Lab proof: a site's own template that Slurm refuses never reaches slurmctld, and the refusal
names the template.

    .venv/bin/python -m gpuinfra_lab.bad_template [inventory/lab.py]

On a converged lab: puts the site's own ``templates/slurm/etc/slurm/slurm.conf.j2`` in the
lab site's templates/ folder (the slurm role's shipped template with one line whose value
Slurm's parser refuses; a misspelt key would be refused before any host by the parser tables),
deploys, and requires what gpuinfra_lab/bad_slurm_conf.py requires (the deploy failed with
Slurm's own error and gpuinfra's refusal; slurmctld active with the same PID; the live
slurm.conf unchanged; sinfo answers), and that the refusal names the site's template. The
override is removed afterwards. Exit 0 when all hold, 1 listing what did not.
"""

from __future__ import annotations

import sys

from gpuinfra_deploy.templates import shipped
from gpuinfra_lab.bad_slurm_conf import SLURM_SAYS, controller_probe
from gpuinfra_lab.refusal import SITE_TEMPLATES, Refusal, prove

NAME = "slurm/etc/slurm/slurm.conf.j2"
BAD_LINE = "MaxJobCount=lots\n"  # not a number: slurmd -G refuses it


def override() -> str:
    """The shipped template with the bad line after its header line."""
    first, rest = shipped()[NAME].read_text().split("\n", 1)
    return f"{first}\n{BAD_LINE}{rest}"


PROOF = Refusal(
    tag="bad-template", daemon="slurmctld", conf="slurm.conf",
    deploy=("deploy.py",),
    must_say=(SLURM_SAYS, "gpuinfra: Slurm refused the new configuration",
              f"came from the site's template {SITE_TEMPLATES / NAME}"),
    probe=controller_probe("slurm.conf", "sinfo -h -o %P"), answered="sinfo answers",
    not_answered="sinfo does not answer after the refused deploy",
    overrides={NAME: override()})

if __name__ == "__main__":
    sys.exit(prove(PROOF, sys.argv[1:]))
