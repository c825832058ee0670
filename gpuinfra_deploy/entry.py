"""The deploy's two entry files, wherever gpuinfra runs from.

``deploy.py`` (the table of contents: every role, in order) and ``config.py`` (the spec gate,
before pyinfra connects) live at the top of a checkout, where an operator reads them. The
wheel carries the same two files (setup.py's build step copies them into
``gpuinfra_deploy/entry_files/``), so an installed gpuinfra (``pip install``, not editable)
renders, validates and deploys a site kept in a folder of its own: the site folder holds only
its inventory, group_data and templates.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuinfra.errors import GpuinfraError

# A checkout: the folder above this package, when it holds the roles.
CHECKOUT = Path(__file__).resolve().parents[1]
SHIPPED = Path(__file__).resolve().parent / "entry_files"
NAMES = ("deploy.py", "config.py")


def entry_file(name: str) -> Path:
    """``deploy.py`` or ``config.py``: the checkout's own, else the one the wheel carries."""
    if name not in NAMES:
        raise ValueError(name)
    top = CHECKOUT / name
    if top.is_file() and (CHECKOUT / "roles").is_dir():
        return top
    shipped = SHIPPED / name
    if shipped.is_file():
        return shipped
    raise GpuinfraError(f"{name}: not found beside {CHECKOUT} nor in {SHIPPED}: this "
                        "gpuinfra install is incomplete; fix: reinstall it (pip install "
                        "gpuinfra), or run from a checkout")


def pyinfra_command(inventory: str, *extra: str) -> list[str]:
    """``pyinfra -y --config CONFIG INVENTORY DEPLOY EXTRA...`` with this install's pyinfra
    and entry files (absolute paths: the command works from any folder)."""
    return [str(Path(sys.executable).with_name("pyinfra")), "-y", "--config",
            str(entry_file("config.py")), inventory, str(entry_file("deploy.py")), *extra]
