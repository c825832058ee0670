"""Run the `gpu_sharing` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/gpu_sharing/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.gpu_sharing import ROLE

entry(ROLE)
