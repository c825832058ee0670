"""Run the `rdma` role alone:

    pyinfra inventory/<site>.py roles/rdma/deploy.py
"""

from roles.rdma import rdma
from roles.site import this_node

site, node = this_node()
if node.rdma_nics:
    rdma(site, node)
