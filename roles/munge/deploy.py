"""Run the `munge` role alone:

    pyinfra inventory/<site>.py roles/munge/deploy.py
"""

from roles.munge import munge
from roles.site import this_node

munge(*this_node())
