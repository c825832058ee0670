"""Every role's knobs, found without importing any role, and the cluster spec built with them.

The spec gate (gpuinfra_deploy/pyinfra_patches/gate.py), the CLI (`gpuinfra validate`) and
the verify suite build the spec here, so they all judge the same keys with the same rules.

The registry reads each role's ``defaults.py`` by file (``roles/<role>/defaults.py``,
which imports only the library) for what the gate needs of a role: its ``KNOBS`` and, for a
scheduler role, its ``SCHEDULER``. Loading them loads no role and no pyinfra module, and a
new role folder with a ``defaults.py`` joins the gate without any change here.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec import (
    ClusterSpec,
    HostInput,
    SpecError,
    SpecInvalid,
    build_cluster,
)
from gpuinfra.spec.knobs import Knob
from gpuinfra.spec.model import SCHEDULERS

ROLES_PACKAGE = "gpuinfra_roles"


@cache
def roles_folder() -> Path:
    """The folder of the roles package (located, not imported: its roles stay unloaded)."""
    spec = importlib.util.find_spec(ROLES_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise GpuinfraError(f"the {ROLES_PACKAGE} package is not installed: pip install gpuinfra")
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def role_names() -> tuple[str, ...]:
    """Every role: each folder of the roles package with a defaults.py, sorted."""
    return tuple(sorted(p.parent.name for p in roles_folder().glob("*/defaults.py")))


def _defaults(role: str) -> ModuleType:
    name = f"{ROLES_PACKAGE}.{role}.defaults"
    if name in sys.modules:  # the role itself was imported already
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, roles_folder() / role / "defaults.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the role, imported later, finds this very module
    spec.loader.exec_module(module)
    return module


@cache
def role_knobs(role: str) -> tuple[Knob, ...]:
    """The knobs ``role`` declares (roles/<role>/defaults.py: KNOBS)."""
    if role not in role_names():
        raise GpuinfraError(f"no role {role!r}: the roles are {', '.join(role_names())}")
    return tuple(_defaults(role).KNOBS)


def knobs_of(roles: Iterable[str] | None = None) -> tuple[Knob, ...]:
    """The knobs of ``roles`` (None: of every role)."""
    return tuple(k for r in (role_names() if roles is None else roles) for k in role_knobs(r))


@cache
def role_scheduler(role: str) -> str | None:
    """The scheduler ``role`` belongs to (roles/<role>/defaults.py: ``SCHEDULER``), None for
    a role of no scheduler. A deploy running only some roles gets the schedulers of those
    roles as its default ``schedulers`` (a driver-only deploy: none)."""
    role_knobs(role)  # an unknown role refused, naming the roles
    scheduler = getattr(_defaults(role), "SCHEDULER", None)
    if scheduler is not None and scheduler not in SCHEDULERS:
        raise GpuinfraError(f"roles/{role}/defaults.py: SCHEDULER = {scheduler!r} is no "
                            f"scheduler gpuinfra deploys ({', '.join(SCHEDULERS)}, or None)")
    return scheduler


def owned_prefixes() -> tuple[str, ...]:
    """The key prefixes gpuinfra owns on a whole site: each role's ``<role>_`` and pyinfra's
    ``ssh_`` (an unknown key with one of them is a typo, never the operator's own key)."""
    return (*(f"{r}_" for r in role_names()), "ssh_")


def build_spec(hosts: Sequence[HostInput], duplicates: Sequence[str] = (),
               roles: Sequence[str] | None = None,
               groups: Mapping[str, str] | None = None) -> ClusterSpec:
    """The site's typed spec, role knobs included; raises SpecInvalid listing every problem.

    ``roles`` None: the whole site (every role's knobs, every key judged). A list of roles:
    a deploy that runs only those (another project's own deploy): only their knobs are judged,
    the typo check covers only their keys, and keys of no gpuinfra role are left alone.
    ``groups`` maps gpuinfra's groups (head, workers, hypervisors) to the operator's own.
    """
    if roles is None:
        return build_cluster(hosts, duplicates, knobs_of(None), groups=groups,
                             owned_prefixes=owned_prefixes())
    return build_cluster(hosts, duplicates, knobs_of(roles), groups=groups,
                         only_roles=tuple(roles),
                         default_schedulers=tuple(dict.fromkeys(
                             s for r in roles if (s := role_scheduler(r)) is not None)))


def spec_problems(hosts: Sequence[HostInput], duplicates: Sequence[str] = (),
                  roles: Sequence[str] | None = None) -> list[SpecError]:
    """Every problem of the site's spec and role data (empty when valid)."""
    try:
        build_spec(hosts, duplicates, roles)
    except SpecInvalid as exc:
        return list(exc.errors)
    return []
