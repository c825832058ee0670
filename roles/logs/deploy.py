"""Run the `logs` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/logs/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.logs import ROLE

entry(ROLE)
