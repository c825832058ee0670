"""The `container_toolkit` role: NVIDIA Container Toolkit, the runtimes told about it, CDI.

NVIDIA's apt repository exactly as its install guide gives it (or the site's mirror from the
spec's ``nvidia_repo_mirror``), the toolkit pinned and held, ``nvidia-ctk runtime configure``
only for a runtime whose configuration lacks the nvidia runtime (then that runtime restarted),
and the CDI spec regenerated only when missing or made for another driver. Off unless
``container_toolkit_enabled``. Data keys: defaults.py.
"""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import StringCommand, deploy
from pyinfra.facts.files import File, FileContents
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from gpuinfra import reboot
from gpuinfra.containers.runtimes import SERVICES, cdi_driver_version, has_nvidia_runtime
from gpuinfra.knowledge.packages import (
    SIGNING_KEYS,
    DriverRelease,
    container_toolkit_packages,
)
from gpuinfra.knowledge.repositories import (
    TOOLKIT_KEYRING,
    TOOLKIT_LIST,
    toolkit_key_url,
    toolkit_list,
)
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.kernel import LoadedModules
from gpuinfra_deploy.facts.nvidia import ContainerRuntimeConfig
from gpuinfra_deploy.ops.apt import apt_keyring, install_pinned
from gpuinfra_deploy.ops.checked import upload_source
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import text

PIN_FILE = "/etc/apt/preferences.d/gpuinfra-nvidia-container-toolkit"
CDI_SPEC = "/etc/cdi/nvidia.yaml"


@deploy("container_toolkit")
def container_toolkit(site: Site, node: NodeSpec, driver: DriverRelease) -> None:
    data = node.settings
    if not data["container_toolkit_enabled"]:
        host.noop("container toolkit disabled (container_toolkit_enabled = False)")
        return
    mirror = site.spec.nvidia_repo_mirror

    keyring = apt_keyring(name="Add the container toolkit repository's signing key",
                          url=toolkit_key_url(mirror), path=TOOLKIT_KEYRING,
                          fingerprint=SIGNING_KEYS["container-toolkit"])
    listed = files.put(name="List the container toolkit repository in apt sources",
                       dest=TOOLKIT_LIST, src=upload_source(text(toolkit_list(mirror))), mode="644")
    apt.update(name="Refresh apt after adding the toolkit repository",
               _if=any_changed(keyring, listed))
    install_pinned("the NVIDIA Container Toolkit",
                   container_toolkit_packages(data["container_toolkit_version"]), PIN_FILE)

    for runtime in data["container_toolkit_runtimes"]:
        _runtime(runtime, data["container_toolkit_set_default"])
    if data["container_toolkit_cdi"]:
        _cdi_spec(driver.upstream)


def _runtime(runtime: str, set_default: bool) -> None:
    if has_nvidia_runtime(runtime, host.get_fact(ContainerRuntimeConfig, runtime=runtime)):
        host.noop(f"{runtime} already knows the nvidia runtime")
        return
    args = ["nvidia-ctk", "runtime", "configure", f"--runtime={runtime}"]
    if set_default:
        args.append("--set-as-default")
    configured = server.shell(name=f"Add the nvidia runtime to {runtime}",
                              commands=[StringCommand(*args)])
    # Restarted only when running: a stopped runtime reads the new file when it starts.
    systemd.service(name=f"Restart {runtime} on its new configuration", service=SERVICES[runtime],
                    running=None, restarted=True, _if=configured.did_change)


def _cdi_spec(driver: str) -> None:
    lines = host.get_fact(FileContents, path=CDI_SPEC)
    made_for = cdi_driver_version("\n".join(lines)) if lines is not None else None
    if made_for == driver:
        host.noop(f"{CDI_SPEC} already describes driver {driver}")
        return
    loaded = "nvidia" in host.get_fact(LoadedModules).get("modules", {})
    if not loaded or host.get_fact(File, path=reboot.REBOOT_MARKER):
        why = "missing" if lines is None else f"made for driver {made_for}"
        logger.warning(f"{host.print_prefix}{CDI_SPEC} is {why}: it is generated once driver "
                       f"{driver} is loaded (after a reboot); deploy again then")
        return
    server.shell(name=f"Generate the CDI spec {CDI_SPEC} for driver {driver}",
                 commands=[StringCommand("nvidia-ctk", "cdi", "generate",
                                         f"--output={CDI_SPEC}")])


def applies(site: Site, node: NodeSpec) -> bool:
    """GPU nodes."""
    return node.gpus is not None


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("container_toolkit", container_toolkit, applies, takes_driver=True)
apply = ROLE.apply
