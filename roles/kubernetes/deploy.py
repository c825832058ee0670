"""Run the `kubernetes` role alone (after common, containerd and, on GPU nodes, the GPU roles):

    pyinfra inventory/<site>.py roles/kubernetes/deploy.py
"""

from roles.kubernetes import kubernetes
from roles.site import this_node

kubernetes(*this_node())
