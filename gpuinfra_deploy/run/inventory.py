"""Read a pyinfra inventory the way `pyinfra INVENTORY deploy.py` does, for the spec validator.

pyinfra's own loader merges the data (host data > group_data/<group>.py > group_data/all.py),
so `gpuinfra validate` sees exactly what the deploy sees. The loader runs under
:func:`~gpuinfra_deploy.pyinfra_patches.loader.checked_loading` (the one place pyinfra's
loader is patched), which executes each file once and turns every way a file can be broken
into one :class:`InventoryError` naming the file, the line and what was expected. Host names
listed twice, which pyinfra would silently merge, are found in the raw groups it read
(:func:`duplicates`). :class:`InventoryError` is defined beside the checked loader and
imported from here as well.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuinfra.spec import HostInput
from gpuinfra_deploy.pyinfra_patches.loader import InventoryError, checked_loading


def group_data_candidates(inventory: str, cwd: str | None = None) -> list[Path]:
    """Where a site's group_data may be, in order: beside the working directory and beside
    the inventory file (as pyinfra looks), and the site's root (the folder above
    ``inventory/``), so a site is read the same from any working directory."""
    file = Path(inventory).resolve()
    return list(dict.fromkeys([Path(cwd or os.getcwd()).resolve() / "group_data",
                               file.parent / "group_data", file.parent.parent / "group_data"]))


def group_data_folders(inventory: str, cwd: str | None = None) -> list[Path]:
    """The group_data folders a deploy of ``inventory`` reads: the candidates that exist."""
    return [c for c in group_data_candidates(inventory, cwd) if c.is_dir()]


def load_hosts(path: str, cwd: str | None = None,
               group_data: str | None = None) -> tuple[list[HostInput], list[str]]:
    """(hosts with merged data, host names listed more than once within a group).

    ``group_data``: the site's group_data folder, given explicitly (an error when it is not a
    folder); None: found as :func:`group_data_folders` says.
    """
    inventory, groups = load_inventory(path, cwd, group_data)
    hosts = host_inputs(inventory, ignore_groups=("all", Path(path).stem))
    folders = [Path(group_data)] if group_data is not None else group_data_folders(path, cwd)
    refuse_unknown_groups(path, hosts, folders)
    return hosts, duplicates(groups)


def refuse_unknown_groups(path: str, hosts: Sequence[HostInput], folders: Sequence[Path]
                          ) -> None:
    """An InventoryError naming each group of ``path`` that is none of gpuinfra's and that no
    group_data file gives data (``folders``): such a group deploys nothing, so it is a typo or
    a role gpuinfra does not have (a login node), not something to accept silently. A group
    of the site's own (for ``--limit``, or its own data) has a group_data/<group>.py, which
    may be empty."""
    from difflib import get_close_matches

    from gpuinfra.spec.model import ROLE_GROUPS

    with_data = {f.stem for folder in folders for f in Path(folder).glob("*.py")}
    unknown: dict[str, list[str]] = {}
    for host in hosts:
        for group in host.groups:
            if group not in ROLE_GROUPS and group not in with_data:
                unknown.setdefault(group, []).append(host.name)
    if not unknown:
        return
    where = ", ".join(str(f) for f in folders) or "no group_data folder"
    lines = []
    for group, names in unknown.items():
        close = get_close_matches(group.lower(), ROLE_GROUPS, n=1, cutoff=0.75)
        meant = f"rename it to {close[0]!r} (did you mean it?)" if close else \
            "move the hosts to the gpuinfra group meant"
        lines.append(f"{path}: group {group!r} ({', '.join(names)}) is none of gpuinfra's "
                     f"groups ({', '.join(ROLE_GROUPS)}) and no group_data/{group}.py gives it "
                     f"data (looked in {where}): it would deploy nothing there. Fix: {meant}, "
                     f"or add group_data/{group}.py (it may be empty) to keep a group of your "
                     "own (for --limit)")
    raise InventoryError("no host was touched:\n  " + "\n  ".join(lines))


def load_inventory(path: str, cwd: str | None = None,
                   group_data: str | None = None) -> tuple[Any, dict[str, Any]]:
    """(pyinfra's Inventory of ``path``, the raw groups it read): as :func:`load_hosts`, with
    the hosts' connection data, for a run that connects (`gpuinfra render --record-facts`)."""
    file = Path(path)
    if not file.is_file() or file.suffix != ".py":
        raise InventoryError(f"{path}: not an inventory file (expected inventory/<site>.py)")
    from pyinfra.api import State
    from pyinfra.context import ctx_state
    from pyinfra_cli.inventory import make_inventory_from_files  # the deploy's own loader

    if group_data is not None:
        if not Path(group_data).is_dir():
            raise InventoryError(f"{group_data}: no such group_data folder (give the folder "
                                 "holding all.py and <group>.py of the site)")
        cwd = str(Path(group_data).resolve().parent)  # pyinfra reads <cwd>/group_data
        folders: list[str] = []
    else:  # pyinfra reads <cwd>/group_data and <inventory's folder>/group_data itself
        own = {Path(cwd or os.getcwd()).resolve() / "group_data",
               file.resolve().parent / "group_data"}
        folders = [str(f) for f in group_data_folders(path, cwd) if f not in own]
    with ctx_state.use(State()), checked_loading() as groups:
        inventory = make_inventory_from_files(str(file), cwd=cwd or os.getcwd(),
                                              group_data_directories=folders)
    return inventory, groups


def host_inputs(inventory: Any, ignore_groups: tuple[str, ...] = ("all",)) -> list[HostInput]:
    """Each host of a loaded pyinfra inventory as the validator's input: name, groups, data.

    ``ignore_groups`` are groups pyinfra adds to every host (``all``, the inventory file's).
    """
    return [
        HostInput(host.name, tuple(g for g in host.groups if g not in ignore_groups),
                  host.data.dict())
        for host in inventory
    ]


def duplicates(groups: dict[str, Any]) -> list[str]:
    """Host names listed more than once within one group of the raw inventory."""
    dups: set[str] = set()
    for value in groups.values():
        hosts = value[0] if isinstance(value, tuple) else value
        names = [h[0] if isinstance(h, tuple) and h else h for h in hosts]
        dups.update(n for n, c in Counter(n for n in names if isinstance(n, str)).items()
                    if c > 1)
    return sorted(dups)
