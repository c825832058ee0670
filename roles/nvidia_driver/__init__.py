"""The `nvidia_driver` role: the NVIDIA driver at a pinned version, ready for datacenter use.

A change of the installed driver refused while GPU processes run (gpuinfra.driverchange),
archive components, kernel headers, the driver packages pinned and held, nouveau blacklisted,
GPU device access limited to one group, persistence mode on, and a reboot recorded (or done,
with ``reboot_policy = "if-needed"``) when a change needs one. Data keys: defaults.py;
per-distribution values: :data:`DISTRO`. Run it alone with ``pyinfra INVENTORY
roles/nvidia_driver/deploy.py``.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.facts.server import LinuxDistribution
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from gpuinfra import reboot
from gpuinfra.driver import (
    DEVICE_UDEV_RULE,
    NOUVEAU_BLACKLIST,
    NVIDIA_OPTIONS,
    PERSISTENCED_DROPIN,
    device_udev_rule,
    nouveau_blacklist,
    nvidia_device_options,
    persistenced_dropin,
)
from gpuinfra.knowledge.packages import DriverRelease, driver_packages, open_modules_for
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.system import GroupIds
from gpuinfra_deploy.ops.apt import APT_CACHE_S, apt_components, install_pinned, require_available
from gpuinfra_deploy.ops.checked import upload_source
from gpuinfra_deploy.ops.cuda_repo import cuda_repository
from gpuinfra_deploy.ops.reboot import reboot_when_needed
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import text as render
from gpuinfra_roles.nvidia_driver.operations import driver_change_allowed, nvidia_device_access

PIN_FILE = "/etc/apt/preferences.d/gpuinfra-nvidia-driver"
PERSISTENCED = "nvidia-persistenced"
# Rebuild the initramfs where the host has one (initramfs-tools); containers have none.
INITRAMFS = ("if command -v update-initramfs >/dev/null; then update-initramfs -u; "
             "else echo 'no update-initramfs: no initramfs to rebuild'; fi")

# Debian's layout, the same on 12 and 13.
_DEBIAN = {
    "sources": ("/etc/apt/sources.list", "/etc/apt/sources.list.d/debian.sources"),
    # The driver is in non-free, GSP firmware in non-free-firmware, persistenced in contrib.
    "components": ("contrib", "non-free", "non-free-firmware"),
    "kernel_headers": ("linux-headers-amd64",),
    "persistenced_user": "nvpd",
    # Debian's unit has an [Install] section: enable it. Ubuntu's is static (udev starts it).
    "persistenced_enabled": True,
}

# Per-distribution values: the task list below has no distro conditionals.
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": _DEBIAN,
    # Trixie: the same layout (trixie Packages, 2026-12-07: the drivers in non-free, the GSP
    # firmware in non-free-firmware, nvidia-persistenced 550.163.01-1 in contrib, whose .deb
    # adds the nvpd user and ships a unit with an [Install] section; linux-headers-amd64
    # 6.12.x, dkms 3.2.2-1~deb13u1 in main).
    "debian-13": _DEBIAN,
    "ubuntu-22.04": {
        "sources": ("/etc/apt/sources.list", "/etc/apt/sources.list.d/ubuntu.sources"),
        # The driver is in restricted; Fabric Manager (fabric_manager role) in multiverse.
        "components": ("restricted", "multiverse"),
        "kernel_headers": ("linux-headers-generic",),
        "persistenced_user": "nvidia-persistenced",
        "persistenced_enabled": None,
    },
    "ubuntu-24.04": {
        "sources": ("/etc/apt/sources.list", "/etc/apt/sources.list.d/ubuntu.sources"),
        "components": ("restricted", "multiverse"),
        "kernel_headers": ("linux-headers-generic",),
        "persistenced_user": "nvidia-persistenced",
        "persistenced_enabled": None,
    },
}


@deploy("nvidia_driver")
def nvidia_driver(site: Site, node: NodeSpec, driver: DriverRelease) -> None:
    data = node.settings
    distro = DISTRO[driver.distro]
    model = node.gpus.model if node.gpus is not None else None
    pinned = driver_packages(driver.distro, driver.branch, driver.version,
                             full=data["nvidia_driver_full"],
                             server_stream=data["nvidia_driver_server_stream"],
                             persistenced_version=data["nvidia_driver_persistenced_version"],
                             open_modules=open_modules_for(model,
                                                           data["nvidia_driver_open_modules"]))
    # Before any change: the pinned versions must be what this host's apt lists, and a change
    # of the installed driver must find no GPU process running (or the override set).
    require_available("the NVIDIA driver", pinned, "nvidia_driver_version")
    driver_change_allowed(name="Change the NVIDIA driver only where no GPU process runs",
                          packages=pinned.packages, node_name=node.short_name,
                          schedulers=list(node.schedulers),
                          under_processes=data["nvidia_driver_change_under_processes"])

    if data["nvidia_driver_manage_sources"]:
        codename = host.get_fact(LinuxDistribution)["release_meta"]["VERSION_CODENAME"]
        _archive_components(distro, codename)
    if driver.repo is not None and driver.repo_key is not None:
        cuda_repository(driver.repo, driver.repo_key, "the driver and Fabric Manager")
    headers = data["nvidia_driver_kernel_headers"]
    if headers:
        apt.packages(name="Install kernel headers for DKMS",
                     packages=list(distro["kernel_headers"] if headers is True else headers),
                     update=True, cache_time=APT_CACHE_S, no_recommends=True)
    install = install_pinned("the NVIDIA driver", pinned, PIN_FILE)

    blacklist = _nouveau_blacklist(data)
    options = _device_access(data)
    server.shell(name="Rebuild the initramfs (nouveau blacklist or driver options changed)",
                 commands=[INITRAMFS], _if=any_changed(*[op for op in (blacklist, options) if op]))
    _persistence_mode(data, distro)

    reboot_when_needed(site.spec.reboot_policy, "to load the NVIDIA driver",
                       [(install, reboot.DRIVER_CHANGED), (blacklist, reboot.NOUVEAU_BLACKLISTED),
                        (options, reboot.DEVICE_OPTIONS_CHANGED)], worker=node.is_worker)


def _archive_components(distro: dict[str, Any], codename: str) -> None:
    changed = [apt_components(name=f"Enable {' '.join(distro['components'])} in {path}",
                              path=path, codename=codename, components=list(distro["components"]))
               for path in distro["sources"]]
    apt.update(name="Refresh apt after enabling archive components", _if=any_changed(*changed))


def _nouveau_blacklist(data: dict[str, Any]) -> Any:
    if not data["nvidia_driver_blacklist_nouveau"]:
        files.file(name="nouveau not blacklisted by gpuinfra", path=NOUVEAU_BLACKLIST,
                   present=False)
        return None
    return files.put(name="Blacklist nouveau", dest=NOUVEAU_BLACKLIST,
                     src=upload_source(render(nouveau_blacklist())), mode="644")


def _device_access(data: dict[str, Any]) -> Any:
    """/dev/nvidia* for root and one group: udev rule, driver options, the nodes there now.

    Returns the driver-options operation (None when it cannot be written yet)."""
    group = data["nvidia_driver_device_group"]
    mode = data["nvidia_driver_device_mode"]
    gid = host.get_fact(GroupIds).get(group)
    if gid is None:
        gid = data["nvidia_driver_device_gid"]
        server.group(name=f"Create the GPU group {group}", group=group, system=True, gid=gid)
    files.put(name=f"udev: /dev/nvidia* for group {group}, mode {mode}", dest=DEVICE_UDEV_RULE,
              src=upload_source(render(device_udev_rule(group, mode))), mode="644")
    options = None
    if gid is None:
        logger.warning(f"{host.print_prefix}group {group} is created in this run: the driver "
                       "options (NVreg_DeviceFileGID) are written on the next deploy; set "
                       "nvidia_driver_device_gid to write them now")
    else:
        options = files.put(name=f"Driver options: /dev/nvidia* for gid {gid}, mode {mode}",
                            dest=NVIDIA_OPTIONS,
                            src=upload_source(render(nvidia_device_options(gid, mode))), mode="644")
    nvidia_device_access(name=f"Give the existing /dev/nvidia* to group {group}, mode {mode}",
                         group=group, mode=mode)
    return options


def _persistence_mode(data: dict[str, Any], distro: dict[str, Any]) -> None:
    if not data["nvidia_driver_persistence_mode"]:
        dropin = files.file(name="nvidia-persistenced as packaged (no gpuinfra drop-in)",
                            path=PERSISTENCED_DROPIN, present=False)
    else:
        unit = persistenced_dropin(distro["persistenced_user"],
                                   data["nvidia_driver_device_group"])
        dropin = files.put(name="nvidia-persistenced with persistence mode on (drop-in)",
                           dest=PERSISTENCED_DROPIN, src=upload_source(render(unit)), mode="644")
    systemd.daemon_reload(name="Reload systemd units", _if=dropin.did_change)
    # Restarted only when running (a host whose driver is not loaded yet starts it at boot).
    systemd.service(name="Restart nvidia-persistenced on the new settings", service=PERSISTENCED,
                    running=None, restarted=True, _if=dropin.did_change)
    if distro["persistenced_enabled"]:
        systemd.service(name="Start nvidia-persistenced at boot", service=PERSISTENCED,
                        running=None, enabled=True)


def applies(site: Site, node: NodeSpec) -> bool:
    """GPU nodes (gpu_model and gpu_count in the spec)."""
    return node.gpus is not None


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("nvidia_driver", nvidia_driver, applies, takes_driver=True)
apply = ROLE.apply
