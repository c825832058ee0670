"""Run the `munge` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/munge/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.munge import ROLE

entry(ROLE)
