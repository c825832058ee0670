"""Every role's plain packages for a host in one apt transaction, early in deploy.py.

Each apt transaction reads the package lists again and runs dpkg's triggers (man-db,
ldconfig, systemd's reload) again: eight roles installing their own packages on a worker
cost more than one transaction of the same packages (docs/measurements.md, "One apt
transaction per host").
A role declares its plain packages (``Role.packages``: the distribution's archive, nothing
pinned, nothing of its own before them); deploy.py installs them all right after the common
role has set up apt, each host at its own pace (no meeting), so the head installs Slurm,
MariaDB and Prometheus while the workers install theirs and their driver. Each role's own
install stays where it was and finds its packages there (it runs them itself when the role
is deployed alone). Pinned packages (the driver, the toolkit, Kubernetes) and packages from
a repository a role adds keep their own installs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyinfra.api import deploy
from pyinfra.operations import apt

from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site

NAME = "Install the packages of this host's roles in one apt transaction"


def ahead_packages(site: Site, node: NodeSpec, roles: Iterable[Role]) -> dict[str, list[str]]:
    """Role name -> the plain packages it installs on ``node`` (roles that apply there and
    declare some), in the deploy's order."""
    found = {}
    for role in roles:
        if role.packages is None or not role.applies(site, node):
            continue
        names = list(role.packages(site, node))
        if names:
            found[role.name] = names
    return found


@deploy("packages")
def _install(site: Site, node: NodeSpec, names: list[str], needs_head: bool) -> None:
    # A head that failed stops the roles that need it (site.head_up), their packages too:
    # skipped here, each role that still runs installs its own.
    condition: dict[str, Any] = {"_if": site.head_up} if needs_head else {}
    op = apt.packages(name=NAME, packages=names, no_recommends=True, update=True,
                      cache_time=APT_CACHE_S, **condition)
    site.once(("packages ahead", node.name), lambda: op)


def packages_ahead(site: Site, node: NodeSpec, roles: Iterable[Role]) -> None:
    """deploy.py: ``roles``' plain packages on this host in one apt transaction (nothing
    when none applies)."""
    roles = list(roles)
    by_role = ahead_packages(site, node, roles)
    if by_role:
        names = list(dict.fromkeys(p for listed in by_role.values() for p in listed))
        _install(site, node, names, any(r.needs_head for r in roles if r.name in by_role))


def installed_ahead(site: Site, node: NodeSpec) -> Any | None:
    """The operation that installed this host's role packages ahead in this run, or None
    (a role deployed alone, or none declared): a role whose next step follows its
    packages' first install (``_if=...did_change``) asks this one too."""
    return site.once(("packages ahead", node.name), lambda: None)
