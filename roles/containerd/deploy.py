"""Run the `containerd` role alone:

    pyinfra inventory/<site>.py roles/containerd/deploy.py
"""

from roles.containerd import containerd
from roles.site import this_node

containerd(*this_node())
