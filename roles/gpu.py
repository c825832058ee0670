"""What the GPU roles share about a node: its driver release, resolved once per node.

deploy.py resolves it and hands it to nvidia_driver, fabric_manager and container_toolkit, so
the three agree on one version (Fabric Manager must carry the driver's exact upstream version;
the CDI spec names it) and none of them reads another role's internals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuinfra.knowledge.packages import DriverRelease, driver_release
from gpuinfra.spec import NodeSpec
from roles.facts import host_distro

if TYPE_CHECKING:  # the run's Site, built by roles.site (which imports the knobs)
    from roles.site import Site


def node_driver(site: Site, node: NodeSpec) -> DriverRelease:
    """The driver ``node`` gets: its ``nvidia_driver_version`` pin, else the default of its
    distribution for the spec's ``driver_branch``."""
    return driver_release(host_distro(), site.spec.driver_branch,
                          node.settings["nvidia_driver_version"])
