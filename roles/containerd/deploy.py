"""Run the `containerd` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/containerd/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.containerd import ROLE

entry(ROLE)
