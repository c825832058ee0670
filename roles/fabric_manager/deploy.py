"""Run the `fabric_manager` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/fabric_manager/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.fabric_manager import ROLE

entry(ROLE)
