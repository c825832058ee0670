"""Run the `slurm` role alone (after munge):

    pyinfra inventory/<site>.py roles/slurm/deploy.py
"""

from roles.site import this_node
from roles.slurm import slurm

slurm(*this_node())
