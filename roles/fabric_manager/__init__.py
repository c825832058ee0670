"""The `fabric_manager` role: NVIDIA Fabric Manager on NVSwitch systems, nothing elsewhere.

Only hosts whose spec profile requires it (``gpu_topology = "nvswitch-all-to-all"``: HGX/DGX
baseboards) get anything; PCIe and NVLink-bridge hosts get no operation at all. The package
matches the driver's exact version (docs/hardware-reference.md 1.6), is pinned and held, and the
service is enabled, and started when the driver is loaded. Data keys: defaults.py.

Where the package comes from (:data:`DISTRO`): Ubuntu's archive (multiverse, enabled by the
nvidia_driver role); on Debian 12 only NVIDIA's CUDA repository carries it, added with its key,
and pinned low so it can never replace Debian's driver packages.
"""

from __future__ import annotations

from io import StringIO
from typing import TYPE_CHECKING, Any

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.operations import apt, files, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.packages import (
    SIGNING_KEYS,
    DriverRelease,
    default_fabric_manager_version,
    fabric_manager_packages,
    same_upstream,
)
from gpuinfra.render import flat_repo_list, origin_preference
from gpuinfra.spec import NodeSpec
from roles.apt import apt_keyring, install_pinned
from roles.facts import LoadedModules

if TYPE_CHECKING:  # the run's Site, built by roles.site (which imports the knobs)
    from roles.site import Site

SERVICE = "nvidia-fabricmanager"
PIN_FILE = "/etc/apt/preferences.d/gpuinfra-fabricmanager"
CUDA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
CUDA_LIST = "/etc/apt/sources.list.d/gpuinfra-cuda.list"
CUDA_ORIGIN_PIN = "/etc/apt/preferences.d/gpuinfra-cuda-origin"

# Per-distribution values: where the package comes from (None: the distribution's archive).
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {
        "repo": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64",
    },
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

    if distro["repo"]:
        _cuda_repository(data, distro["repo"])
    install_pinned("NVIDIA Fabric Manager",
                   fabric_manager_packages(driver.distro, driver.branch, version), PIN_FILE)
    # FM exits when the driver is not loaded yet (first install, before the reboot): then it
    # is only enabled, and starts at boot.
    driver_loaded = "nvidia" in host.get_fact(LoadedModules).get("modules", {})
    systemd.service(name="Run Fabric Manager" if driver_loaded else
                    "Start Fabric Manager at boot (driver not loaded yet)",
                    service=SERVICE, running=True if driver_loaded else None, enabled=True)


def _cuda_repository(data: dict[str, Any], default_url: str) -> None:
    url = (data["fabric_manager_repo_url"] or default_url).rstrip("/")
    key_url = data["fabric_manager_repo_key_url"] or f"{url}/3bf863cc.pub"
    key = apt_keyring(name="Add the CUDA repository's signing key", url=key_url,
                      path=CUDA_KEYRING, fingerprint=SIGNING_KEYS["cuda"])
    listed = files.put(name="Add NVIDIA's CUDA repository (Fabric Manager)", dest=CUDA_LIST,
                       src=StringIO(flat_repo_list(url, CUDA_KEYRING)), mode="644")
    files.put(name="Take only Fabric Manager from the CUDA repository", dest=CUDA_ORIGIN_PIN,
              src=StringIO(origin_preference(url)), mode="644")
    apt.update(name="Refresh apt after adding the CUDA repository",
               _if=any_changed(key, listed))
