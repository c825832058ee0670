"""Run the `common` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/common/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.common import ROLE

entry(ROLE)
