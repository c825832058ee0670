"""Run the `nvidia_driver` role alone:

    pyinfra inventory/<site>.py roles/nvidia_driver/deploy.py
"""

from roles.gpu import node_driver
from roles.nvidia_driver import nvidia_driver
from roles.site import this_node

site, node = this_node()
if node.gpus is not None:
    nvidia_driver(site, node, node_driver(site, node))
