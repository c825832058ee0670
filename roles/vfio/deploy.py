"""Run the `vfio` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/vfio/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.vfio import ROLE

entry(ROLE)
