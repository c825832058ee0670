"""Run the `fabric_manager` role alone:

    pyinfra inventory/<site>.py roles/fabric_manager/deploy.py
"""

from roles.fabric_manager import fabric_manager
from roles.gpu import node_driver
from roles.site import this_node

site, node = this_node()
if node.gpus is not None:
    fabric_manager(site, node, node_driver(site, node))
