"""Run the `slurm` role alone, on the Slurm nodes (after munge), as deploy.py runs it:

    pyinfra inventory/<site>.py roles/slurm/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.slurm import ROLE

entry(ROLE)
