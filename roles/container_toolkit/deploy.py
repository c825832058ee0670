"""Run the `container_toolkit` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/container_toolkit/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.container_toolkit import ROLE

entry(ROLE)
