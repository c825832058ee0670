"""pyinfra's inventory loader with every file checked (:func:`checked_loading`).

For the time of a ``with`` block, ``pyinfra_cli.inventory.exec_file`` and
``_get_groups_from_filename`` are replaced (pinned pyinfra 3.10: they are internals of
pyinfra's CLI, see README.md here), so pyinfra's own loader, which merges the data exactly as
a deploy sees it, executes each file once and turns every way a file can be broken into one
:class:`InventoryError` naming the file, the line and what was expected: bytes that are not
UTF-8, a syntax error, an exception, a ``sys.exit()``, hosts written as JSON-style lists
(which pyinfra would silently drop). The raw groups it read come back too, so that host names
listed twice (which pyinfra would silently merge) can be found.

Used by gpuinfra_deploy/run/inventory.py (``gpuinfra validate``) and by the gate
(gpuinfra_deploy/pyinfra_patches/gate.py) on pyinfra's own load.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuinfra.errors import GpuinfraError, clip


class InventoryError(GpuinfraError):
    """The inventory or one of its group_data files cannot be loaded at all."""


@contextlib.contextmanager
def checked_loading() -> Iterator[dict[str, Any]]:
    """pyinfra's inventory loader, for the time of the block, with every file checked.

    Yields the inventory file's raw groups (filled once pyinfra read them). Any broken file
    raises :class:`InventoryError` naming it; pyinfra's loader is restored on the way out.
    """
    import pyinfra_cli.inventory as loader
    from pyinfra.api.exceptions import PyinfraError
    from pyinfra_cli.exceptions import UnexpectedExternalError

    original_exec, original_groups = loader.exec_file, loader._get_groups_from_filename
    groups: dict[str, Any] = {}

    def exec_checked(filename: str, return_locals: bool = False,
                     is_deploy_code: bool = False) -> Any:
        _check_source(filename)
        try:
            return original_exec(filename, return_locals=return_locals,
                                 is_deploy_code=is_deploy_code)
        except UnexpectedExternalError as exc:
            raise InventoryError(_describe(filename, exc.exception)) from None
        except PyinfraError as exc:
            raise InventoryError(_describe(filename, exc)) from None
        except SystemExit as exc:
            raise InventoryError(f"{_shown(filename)}: calls sys.exit({clip(exc.code)}) while "
                                 "being loaded: an inventory or group_data file must only "
                                 "assign values (raise an exception to stop with a message)")\
                from None

    def groups_checked(filename: str) -> dict[str, Any]:
        attrs = exec_checked(filename, return_locals=True)
        _check_group_shapes(filename, attrs)
        found = {k: v for k, v in attrs.items() if loader._is_inventory_group(k, v)}
        groups.update(found)
        return found

    loader.exec_file, loader._get_groups_from_filename = exec_checked, groups_checked
    try:
        yield groups
    except InventoryError:
        raise
    except Exception as exc:  # pyinfra's loader itself refused the data
        raise InventoryError(f"the inventory cannot be loaded: {type(exc).__name__}: "
                             f"{clip(str(exc), 300)}") from None
    finally:
        loader.exec_file, loader._get_groups_from_filename = original_exec, original_groups


def _shown(filename: str) -> str:
    """``filename`` relative to the working directory when it is under it."""
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _check_source(filename: str) -> None:
    """The file's text is UTF-8 and Python: else the file, the line and what is wrong."""
    try:
        data = Path(filename).read_bytes()
    except OSError as exc:
        raise InventoryError(f"{_shown(filename)}: cannot be read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InventoryError(f"{_shown(filename)}: line {line}: not UTF-8 text (byte "
                             f"{data[exc.start]:#04x} at offset {exc.start}): save the file "
                             "as UTF-8") from None
    try:
        compile(text, filename, "exec")
    except SyntaxError as exc:
        raise InventoryError(f"{_shown(filename)}: line {exc.lineno}: syntax error: "
                             f"{clip(exc.msg, 200)}") from None
    except ValueError as exc:  # e.g. a NUL byte
        raise InventoryError(f"{_shown(filename)}: not Python source: {exc}") from None


def _describe(filename: str, exc: BaseException) -> str:
    """``file: line N: Type: message`` of an exception raised while executing ``filename``."""
    frames = [f for f in traceback.extract_tb(getattr(exc, "_traceback", None)
                                              or exc.__traceback__)
              if Path(f.filename).resolve() == Path(filename).resolve()]
    where = f" line {frames[-1].lineno}:" if frames else ""
    return f"{_shown(filename)}:{where} {type(exc).__name__}: {clip(str(exc), 300)}"


def _check_group_shapes(filename: str, attrs: dict[str, Any]) -> None:
    """Hosts are names or (name, data) tuples: a list in their place (JSON style) would make
    pyinfra drop the whole group with a warning, so it is refused here, naming the group."""
    for key, value in attrs.items():
        if key.startswith("_") or not isinstance(value, (list, tuple)):
            continue
        hosts = value[0] if isinstance(value, tuple) and len(value) == 2 \
            and isinstance(value[1], dict) else value
        if not isinstance(hosts, (list, tuple)):
            continue
        for index, host in enumerate(hosts):
            if isinstance(host, list):
                raise InventoryError(
                    f"{_shown(filename)}: group {key!r}, host {index}: {clip(host)} is a list; "
                    "write each host as a name or a (name, data) tuple, e.g. "
                    f"{key} = [(\"w1\", {{...}})]")
