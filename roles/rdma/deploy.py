"""Run the `rdma` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/rdma/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.rdma import ROLE

entry(ROLE)
