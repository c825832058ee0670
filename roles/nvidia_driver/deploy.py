"""Run the `nvidia_driver` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/nvidia_driver/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.nvidia_driver import ROLE

entry(ROLE)
