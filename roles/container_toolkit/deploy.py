"""Run the `container_toolkit` role alone:

    pyinfra inventory/<site>.py roles/container_toolkit/deploy.py
"""

from roles.container_toolkit import container_toolkit
from roles.gpu import node_driver
from roles.site import this_node

site, node = this_node()
if node.gpus is not None:
    container_toolkit(site, node, node_driver(site, node))
