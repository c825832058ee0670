"""Run the `vfio` role alone:

    pyinfra inventory/<site>.py roles/vfio/deploy.py
"""

from roles.site import this_node
from roles.vfio import vfio

site, node = this_node()
if node.is_hypervisor:
    vfio(site, node)
