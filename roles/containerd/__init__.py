"""The `containerd` role: the distribution's containerd, configured for the kubelet.

On every Kubernetes node (and on every host with ``containerd_everywhere``): the
distribution's ``containerd`` package; ``/etc/containerd/config.toml`` made from that
containerd's own ``containerd config default`` with ``SystemdCgroup = true`` and the sandbox
image of the pinned Kubernetes release (gpuinfra.containers.containerd); staged, read by containerd
itself (``containerd --config <staged> config dump``) and only then moved in
(gpuinfra_deploy/ops/checked.py); containerd restarted only when the file changed; a boot drop-in
bounds its restarts (gpuinfra_deploy/ops/boot.py). What the container toolkit adds to the file
afterwards (the
nvidia runtime) is carried over by every rewrite.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.api import FactBase, FunctionCommand, StringCommand, deploy, operation
from pyinfra.facts.files import FileContents
from pyinfra.operations import apt, files, server, systemd

from gpuinfra.containers.containerd import CONFIG, containerd_config, same_config
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.boot import BootNeeds, boot_order
from gpuinfra_deploy.ops.checked import check_script, checked_files
from gpuinfra_deploy.ops.remote import put_text, run
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site

DISTRO = {
    "debian-12": {"package": "containerd"},  # 1.6.20 (bookworm)
    # 1.7.24~ds1-6+deb13u1 (trixie main and trixie-security main Packages, 2026-12-07)
    "debian-13": {"package": "containerd"},
    "ubuntu-22.04": {"package": "containerd"},  # 1.7.x (jammy-updates)
    "ubuntu-24.04": {"package": "containerd"},  # 1.7.x (noble-updates)
}
# The package's unit restarts containerd forever (Restart=always); the project's drop-in bounds
# it, so a containerd that cannot start shows as failed (gpuinfra_deploy/ops/boot.py,
# gpuinfra.units).
BOOT = BootNeeds("containerd.service", "the local file systems and the network (the CRI's "
                 "streaming server, image pulls)", ("local-fs.target", "network-online.target"),
                 ("network-online.target",))
STAGE = "/etc/containerd/.gpuinfra-stage"
STAGED = f"{STAGE}/config.toml"
CHECK = check_script(f"containerd --config {STAGED} config dump", "containerd",
                     STAGE)


class ContainerdDefaultConfig(FactBase):
    """``containerd config default`` of the installed containerd (its text); None when
    containerd is not installed."""

    def requires_command(self) -> str:
        return "containerd"

    def command(self) -> str:
        return "containerd config default"

    def process(self, output: list[str]) -> str:
        return "\n".join(output) + "\n"


def runs_containerd(node: NodeSpec) -> bool:
    return "kubernetes" in node.schedulers or bool(node.settings["containerd_everywhere"])


def _stage_from_installed(state: Any, host: Any, sandbox_image: str) -> None:  # noqa: ARG001
    """Execution time, after the package was installed by this run: render the config from
    the installed containerd's own default and stage it for the check."""
    default = run(host, StringCommand("containerd", "config", "default"),
                  "containerd config default")
    put_text(host, containerd_config(default, sandbox_image), STAGED, "containerd config")


@operation()
def containerd_configured(sandbox_image: str):
    """``/etc/containerd/config.toml``: containerd's default, SystemdCgroup on, the sandbox
    image, the toolkit's nvidia runtime kept; checked by containerd before it goes in.

    + sandbox_image: e.g. ``registry.k8s.io/pause:3.10.1``
    """
    lines = host.get_fact(FileContents, path=CONFIG)
    live = "\n".join(lines) + "\n" if lines is not None else None
    default = host.get_fact(ContainerdDefaultConfig)
    if default is None:
        # Installed by this run: its default is read when the operation runs.
        yield StringCommand("install", "-d", "-m", "0700", STAGE)
        yield FunctionCommand(_stage_from_installed, (sandbox_image,), {})
        yield StringCommand(CHECK)
        yield StringCommand("cp", STAGED, f"{CONFIG}.gpuinfra-new", "&&", "chmod", "0644",
                            f"{CONFIG}.gpuinfra-new", "&&", "mv", "-f",
                            f"{CONFIG}.gpuinfra-new", CONFIG)
        return
    desired = containerd_config(default, sandbox_image, live)
    if same_config(desired, live):
        host.noop(f"{CONFIG} already has SystemdCgroup = true and {sandbox_image}")
        return
    yield from checked_files._inner(files={CONFIG: desired}, stage=STAGE, check=CHECK)


@deploy("containerd")
def containerd(site: Site, node: NodeSpec) -> None:
    # Where it runs: applies() below (ROLE.apply never calls it elsewhere).
    apt.packages(name="Install containerd", packages=packages(site, node), no_recommends=True,
                 update=True, cache_time=APT_CACHE_S)
    files.directory(name="/etc/containerd exists", path="/etc/containerd", user="root",
                    group="root", mode="755")
    config = containerd_configured(
        name="containerd config.toml (SystemdCgroup, sandbox image), checked by containerd",
        sandbox_image=site.spec.kubernetes.pause_image)
    # Not systemd.service(restarted=True): it restarts only a unit running at plan time, and
    # on a fresh node the package's postinst starts containerd after planning.
    server.shell(name="Restart containerd on its new configuration",
                 commands=["systemctl restart containerd.service"], _if=config.did_change)
    boot_order([BOOT])
    systemd.service(name="Run containerd", service="containerd", running=True, enabled=True)


def packages(site: Site, node: NodeSpec) -> list[str]:
    """The distribution's containerd (deploy.py installs it with the other roles')."""
    return [DISTRO[host_distro()]["package"]]


def applies(site: Site, node: NodeSpec) -> bool:
    """Kubernetes nodes, and every host where containerd_everywhere is set."""
    return runs_containerd(node)


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("containerd", containerd, applies, packages=packages)
apply = ROLE.apply
