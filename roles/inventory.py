"""Read a pyinfra inventory the way `pyinfra INVENTORY deploy.py` does, for the spec validator.

pyinfra's own loader merges the data (host data > group_data/<group>.py > group_data/all.py),
so `gpuinfra validate` sees exactly what the deploy sees. The raw file is also read once to
find host names listed twice, which pyinfra would silently merge.
"""

from __future__ import annotations

import os
import runpy
from collections import Counter
from pathlib import Path
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec import HostInput


class InventoryError(GpuinfraError):
    """The inventory file cannot be loaded at all."""


def load_hosts(path: str, cwd: str | None = None) -> tuple[list[HostInput], list[str]]:
    """(hosts with merged data, host names listed more than once within a group)."""
    file = Path(path)
    if not file.is_file() or file.suffix != ".py":
        raise InventoryError(f"{path}: not an inventory file (expected inventory/<site>.py)")
    raw = _run(file)
    duplicates = _duplicates(raw)
    from pyinfra.api import State
    from pyinfra.context import ctx_state
    from pyinfra_cli.inventory import make_inventory_from_files  # the deploy's own loader

    try:
        with ctx_state.use(State()):
            inventory = make_inventory_from_files(str(file), cwd=cwd or os.getcwd())
    except Exception as exc:  # group_data files are user Python: report, never trace back
        problem = f"{type(exc).__name__}: {exc}"
        raise InventoryError(f"cannot load group_data for {path}: {problem}") from None
    return host_inputs(inventory, ignore_groups=("all", file.stem)), duplicates


def host_inputs(inventory: Any, ignore_groups: tuple[str, ...] = ("all",)) -> list[HostInput]:
    """Each host of a loaded pyinfra inventory as the validator's input: name, groups, data.

    ``ignore_groups`` are groups pyinfra adds to every host (``all``, the inventory file's).
    """
    return [
        HostInput(host.name, tuple(g for g in host.groups if g not in ignore_groups),
                  host.data.dict())
        for host in inventory
    ]


def _run(file: Path) -> dict[str, Any]:
    try:
        return runpy.run_path(str(file))
    except SyntaxError as exc:
        raise InventoryError(f"{file}: line {exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:
        raise InventoryError(f"{file}: cannot be loaded: {type(exc).__name__}: {exc}") from None


def _duplicates(namespace: dict[str, Any]) -> list[str]:
    dups: set[str] = set()
    for key, value in namespace.items():
        if key.startswith("_"):
            continue
        hosts = value[0] if isinstance(value, tuple) else value
        if not isinstance(hosts, list):
            continue
        names = [h[0] if isinstance(h, tuple) else h for h in hosts]
        dups.update(n for n, c in Counter(names).items() if isinstance(n, str) and c > 1)
    return sorted(dups)
