"""The `common` role: what every node of the cluster needs before anything GPU-specific.

Hostname, /etc/hosts entries for every node, apt proxy, base packages, time sync (chrony),
network sysctls and an admin group. Its data keys and defaults are in defaults.py.
"""

from __future__ import annotations

from io import StringIO
from typing import Any

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.facts.files import FileContents
from pyinfra.operations import apt, files, server, systemd

from gpuinfra.apt.files import APT_PROXY_MODE, apt_proxy_conf
from gpuinfra.apt.mirror import mirror_for, point_at_mirror
from gpuinfra.platforms import hosts_block
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S, apt_ready
from gpuinfra_deploy.ops.block import shared_block
from gpuinfra_deploy.ops.checked import upload_source
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import role_file, text

PROXY_FILE = "/etc/apt/apt.conf.d/95gpuinfra-proxy"
CHRONY_SOURCES = "/etc/chrony/sources.d/gpuinfra.sources"

# Per-distribution values: the task list below has no distro conditionals.
DISTRO = {
    "debian-12": {"family": "debian", "chrony_service": "chrony",
                  "apt_sources": ["/etc/apt/sources.list",
                                  "/etc/apt/sources.list.d/debian.sources"]},
    # Trixie: deb822 debian.sources by default; chrony 4.6.1 (trixie main Packages, 2026-12-07).
    "debian-13": {"family": "debian", "chrony_service": "chrony",
                  "apt_sources": ["/etc/apt/sources.list",
                                  "/etc/apt/sources.list.d/debian.sources"]},
    "ubuntu-22.04": {"family": "ubuntu", "chrony_service": "chrony",
                     "apt_sources": ["/etc/apt/sources.list"]},
    "ubuntu-24.04": {"family": "ubuntu", "chrony_service": "chrony",
                     "apt_sources": ["/etc/apt/sources.list",
                                     "/etc/apt/sources.list.d/ubuntu.sources"]},
}


def _apt_mirror(spec: ClusterSpec, distro: dict[str, Any]) -> list[Any]:
    """Point the distribution's sources at the site mirror; the original text is kept beside."""
    mirror = mirror_for(dict(spec.apt_mirror), distro["family"])
    if not mirror:
        return []
    changes = []
    for path in distro["apt_sources"]:
        lines = host.get_fact(FileContents, path=path)
        if lines is None:
            continue
        text = "\n".join(lines) + "\n"
        mirrored = point_at_mirror(text, distro["family"], mirror)
        if mirrored == text:
            continue
        files.put(name=f"Keep the original {path}", dest=f"{path}.gpuinfra-orig",
                  src=upload_source(text), mode="644")
        changes.append(files.put(name=f"Point {path} at the site's apt mirror", dest=path,
                                 src=upload_source(mirrored), mode="644"))
    return changes


def _hosts_block(site: Site) -> str:
    """Every node whose address is known, for /etc/hosts: the same text on every node."""
    return site.once("hosts block", lambda: text(hosts_block(
        [(n.short_name, n.address) for n in site.spec.nodes if n.address])))


def _say_left_out(site: Site) -> None:
    """Once per limited run: the hosts outside it keep /etc/hosts as of their last run."""
    left = site.left_out()
    if left:
        logger.warning(f"common: not in this run: {', '.join(left)}: their /etc/hosts lists "
                       "the nodes as of their last run; after adding or removing a node, a "
                       "full run (or one including them) brings them in line")


@deploy("common")
def common(site: Site, node: NodeSpec) -> None:
    data = node.settings
    apt_proxy = site.spec.apt_proxy
    distro = DISTRO[host_distro()]

    apt_ready()  # before any apt-get: wait for a running one, finish an interrupted dpkg
    server.hostname(name="Set the hostname", hostname=node.short_name)
    block = _hosts_block(site)
    if data["common_manage_hosts"] and block:
        shared_block(name="List every cluster node in /etc/hosts", path="/etc/hosts",
                     content=block, marker="# {mark} gpuinfra cluster nodes")
        site.once("hosts left out", lambda: _say_left_out(site))

    if apt_proxy:
        files.put(name="Send apt through the site's proxy", dest=PROXY_FILE, user="root",
                  group="root", mode=APT_PROXY_MODE, src=StringIO(text(apt_proxy_conf(apt_proxy))))
    else:
        files.file(name="No apt proxy configured", path=PROXY_FILE, present=False)

    for change in _apt_mirror(site.spec, distro):
        apt.update(name="Refresh apt lists from the mirror", _if=change.did_change)
    apt.packages(name="Install base packages", packages=data["common_packages"],
                 no_recommends=True, update=True, cache_time=APT_CACHE_S)

    servers = data["common_ntp_servers"]
    chrony_conf = files.put(name="Point chrony at the site's NTP servers", dest=CHRONY_SOURCES,
                            src=upload_source(role_file("common", CHRONY_SOURCES, servers=servers)),
                            mode="644") if servers else \
        files.file(name="Keep chrony on the distribution's servers", path=CHRONY_SOURCES,
                   present=False)
    systemd.service(name="Run chrony", service=distro["chrony_service"], running=True,
                    enabled=True)
    systemd.service(name="Reload chrony sources", service=distro["chrony_service"],
                    reloaded=True, _if=chrony_conf.did_change)

    for key, value in data["common_sysctls"].items():
        server.sysctl(name=f"Set {key}", key=key, value=value, persist=True,
                      persist_file="/etc/sysctl.d/90-gpuinfra.conf")

    server.group(name="Create the admin group", group=data["common_admin_group"], system=True)


def applies(site: Site, node: NodeSpec) -> bool:
    """Every host."""
    return True


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("common", common, applies)
apply = ROLE.apply
