"""Run the `common` role alone:

    pyinfra inventory/<site>.py roles/common/deploy.py
"""

from roles.common import common
from roles.site import this_node

common(*this_node())
