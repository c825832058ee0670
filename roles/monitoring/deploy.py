"""Run the `monitoring` role alone:

    pyinfra inventory/<site>.py roles/monitoring/deploy.py
"""

from roles.monitoring import monitoring
from roles.site import this_node

monitoring(*this_node())
