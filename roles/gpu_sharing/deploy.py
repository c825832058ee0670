"""Run the `gpu_sharing` role alone (after the driver):

    pyinfra inventory/<site>.py roles/gpu_sharing/deploy.py
"""

from roles.gpu import node_driver
from roles.gpu_sharing import gpu_sharing
from roles.site import this_node

site, node = this_node()
if node.gpus is not None:
    gpu_sharing(site, node, node_driver(site, node))
