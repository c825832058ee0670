"""The `fabric_manager` role: NVIDIA Fabric Manager on NVSwitch systems, nothing elsewhere.

Only hosts whose spec profile requires it (``gpu_topology = "nvswitch-all-to-all"``: HGX/DGX
baseboards) get anything; PCIe and NVLink-bridge hosts get no operation at all. The package
matches the driver's exact version (docs/hardware-reference.md 1.6), is pinned and held, and the
service is enabled, and started when the driver is loaded. Data keys: defaults.py.

Where the package comes from (:data:`DISTRO`): Ubuntu's archive (multiverse, enabled by the
nvidia_driver role); on Debian 12 only NVIDIA's CUDA repository carries it, added with its key,
and pinned low so it can never replace Debian's driver packages. Where the driver itself comes
from that repository (Debian, branches after 535), Fabric Manager comes from the same one.
Boards whose NVSwitch fabric needs more than Fabric Manager (NVLink 5: the NVLink subnet manager
``nvlsm``) are named in a warning: no role installs it yet.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.operations import systemd

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.packages import (
    DriverRelease,
    default_fabric_manager_version,
    fabric_manager_packages,
    same_upstream,
)
from gpuinfra.knowledge.repositories import CUDA_REPOS
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.kernel import LoadedModules
from gpuinfra_deploy.ops.apt import install_pinned, require_available
from gpuinfra_deploy.ops.cuda_repo import cuda_repository, key_url_for
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site

SERVICE = "nvidia-fabricmanager"
PIN_FILE = "/etc/apt/preferences.d/gpuinfra-fabricmanager"

# Per-distribution values: where the package comes from (None: the distribution's archive).
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {"repo": CUDA_REPOS["debian-12"]},
    # Trixie: no Fabric Manager in its archive (no nvidia-fabricmanager in trixie's Packages,
    # 2026-12-07) and NVIDIA's CUDA repository for debian13 is not added (its key is not
    # verified: gpuinfra.knowledge.drivers.NARROWER): only from fabric_manager_repo_url.
    "debian-13": {"repo": None, "archive": False},
    "ubuntu-22.04": {"repo": None},
    "ubuntu-24.04": {"repo": None},
}


@deploy("fabric_manager")
def fabric_manager(site: Site, node: NodeSpec, driver: DriverRelease) -> None:
    if node.gpus is None or not node.gpus.needs_fabric_manager:
        host.noop("no NVSwitch in this host's topology: Fabric Manager not needed")
        return
    data = node.settings
    if not data["fabric_manager_enabled"]:
        logger.warning(f"{host.print_prefix}Fabric Manager is required by this host's topology "
                       "but disabled by data (fabric_manager_enabled = False): NVSwitch "
                       "systems do not initialise their fabric without it")
        return
    distro = DISTRO[driver.distro]
    version = data["fabric_manager_version"] or default_fabric_manager_version(driver.distro,
                                                                               driver.branch)
    if not same_upstream(version, driver.version):
        raise GpuinfraError(f"Fabric Manager {version} does not match the driver "
                            f"{driver.version}: FM refuses to start against another driver; "
                            "set fabric_manager_version to the driver's version")

    if (driver.repo is None and not distro.get("archive", True)
            and not data["fabric_manager_repo_url"]):
        raise GpuinfraError(f"Fabric Manager on {driver.distro}: the distribution does not "
                            "carry it and these roles add no NVIDIA repository for it there "
                            "(its signing key is not verified): set fabric_manager_repo_url "
                            "to a repository signed by NVIDIA's CUDA key (3bf863cc.pub) that "
                            f"carries nvidia-fabricmanager-{driver.branch} at the driver's "
                            f"upstream version {driver.upstream} (and fabric_manager_version "
                            "to its exact version), or run NVSwitch nodes on Debian 12 or "
                            "Ubuntu")
    pinned = fabric_manager_packages(driver.distro, driver.branch, version)
    require_available("NVIDIA Fabric Manager", pinned, "fabric_manager_version")
    _fabric_services(node)
    if driver.repo is not None:  # the driver's own repository (the nvidia_driver role added it)
        _same_repository(data, driver)
    elif distro["repo"] or not distro.get("archive", True):
        url = (data["fabric_manager_repo_url"] or distro["repo"]).rstrip("/")
        cuda_repository(url, key_url_for(url, data["fabric_manager_repo_key_url"]),
                        "Fabric Manager")
    install_pinned("NVIDIA Fabric Manager", pinned, PIN_FILE)
    # FM exits when the driver is not loaded yet (first install, before the reboot): then it
    # is only enabled, and starts at boot.
    driver_loaded = "nvidia" in host.get_fact(LoadedModules).get("modules", {})
    systemd.service(name="Run Fabric Manager" if driver_loaded else
                    "Start Fabric Manager at boot (driver not loaded yet)",
                    service=SERVICE, running=True if driver_loaded else None, enabled=True)


def _same_repository(data: dict[str, Any], driver: DriverRelease) -> None:
    """Fabric Manager from the driver's repository: a different one set here is a conflict."""
    url = data["fabric_manager_repo_url"]
    if url is not None and url.rstrip("/") != driver.repo:
        raise GpuinfraError(f"fabric_manager_repo_url {url} differs from the repository the "
                            f"driver comes from ({driver.repo}, nvidia_driver_repo_url): "
                            "Fabric Manager must come from the driver's repository; remove "
                            "fabric_manager_repo_url")


def _fabric_services(node: NodeSpec) -> None:
    """Say so when the model's fabric needs a service no role installs yet (B200: nvlsm)."""
    assert node.gpus is not None
    services = node.gpus.model.fabric_services
    if services:
        logger.warning(f"{host.print_prefix}{node.gpus.model.key}: the NVSwitch fabric also "
                       f"needs {', '.join(services)} (NVLink subnet manager, with the ib_umad "
                       "module loaded before Fabric Manager starts; docs/hardware-reference.md "
                       "1.6): no role installs it yet, install it by hand")


def applies(site: Site, node: NodeSpec) -> bool:
    """GPU nodes (the role itself says where the topology needs no Fabric Manager)."""
    return node.gpus is not None


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("fabric_manager", fabric_manager, applies, takes_driver=True)
apply = ROLE.apply
