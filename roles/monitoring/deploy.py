"""Run the `monitoring` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/monitoring/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.monitoring import ROLE

entry(ROLE)
