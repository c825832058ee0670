"""Run the `health` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/health/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.health import ROLE

entry(ROLE)
