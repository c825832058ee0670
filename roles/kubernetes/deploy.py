"""Run the `kubernetes` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/kubernetes/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.kubernetes import ROLE

entry(ROLE)
