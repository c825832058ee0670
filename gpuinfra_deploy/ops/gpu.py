"""What the GPU roles share about a node: its driver release, resolved once per node.

deploy.py resolves it and hands it to nvidia_driver, fabric_manager and container_toolkit, so
the three agree on one version (Fabric Manager must carry the driver's exact upstream version;
the CDI spec names it), on one repository where the driver comes from NVIDIA's, and none of
them reads another role's internals.
"""

from __future__ import annotations

from dataclasses import replace

from gpuinfra.knowledge.drivers import branch_source
from gpuinfra.knowledge.packages import DriverRelease, driver_release
from gpuinfra.knowledge.repositories import CUDA_REPOS
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.cuda_repo import key_url_for
from gpuinfra_deploy.run.site import Site


def node_driver(site: Site, node: NodeSpec) -> DriverRelease:
    """The driver ``node`` gets: its ``nvidia_driver_version`` pin, else the default of its
    distribution for the spec's ``driver_branch``; from NVIDIA's CUDA repository (or the
    site's mirror of it) where the distribution does not carry the branch."""
    distro = host_distro()
    release = driver_release(distro, site.spec.driver_branch,
                             node.settings["nvidia_driver_version"])
    if branch_source(distro, release.branch) != "cuda-repo":
        return release
    url = (node.settings["nvidia_driver_repo_url"] or CUDA_REPOS[distro]).rstrip("/")
    return replace(release, repo=url,
                   repo_key=key_url_for(url, node.settings["nvidia_driver_repo_key_url"]))
