"""Run the `job_containers` role alone, on the hosts where it applies (as deploy.py runs it):

    pyinfra inventory/<site>.py roles/job_containers/deploy.py
"""

from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.job_containers import ROLE

entry(ROLE)
