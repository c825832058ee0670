"""gpuinfra_deploy/pyinfra_patches/: the one page listing every patched pyinfra symbol (its
README.md) matches the installed pyinfra and the code, and nothing else patches pyinfra."""

from __future__ import annotations

import ast
import importlib
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PRODUCT_FOLDERS, REPO

PATCHES = REPO / "gpuinfra_deploy" / "pyinfra_patches"
README = PATCHES / "README.md"
PYINFRA = ("pyinfra", "pyinfra_cli")


# ------------------------------------------------------------------------------ the page

def rows() -> list[tuple[str, str, str]]:
    """(symbol, patched by, tests) of each row of README.md's table whose first cell names a
    pyinfra symbol."""
    found = []
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4:
            continue
        match = re.fullmatch(r"`((?:pyinfra|pyinfra_cli)\.[\w.]+)`", cells[0])
        if match:
            found.append((match.group(1), cells[1].strip("`"), cells[3]))
    return found


def resolve(dotted: str) -> Any:
    """The object ``dotted`` names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            value = getattr(value, attr)  # AttributeError: pyinfra changed under the patch
        return value
    raise ImportError(dotted)


def test_the_page_lists_the_patches():
    symbols = [s for s, _, _ in rows()]
    assert len(symbols) >= 12 and len(set(symbols)) == len(symbols), symbols


@pytest.mark.parametrize("symbol", [s for s, _, _ in rows()])
def test_every_listed_symbol_exists(symbol):
    value = resolve(symbol)
    # a function, a method, a property, or a module a pyinfra module imported (its shlex)
    assert callable(value) or isinstance(value, (property, types.ModuleType)), symbol


def test_every_named_test_exists():
    named = re.findall(r"(tests/[\w/]+\.py)::(\w+)", README.read_text())
    assert named
    for path, name in named:
        assert re.search(rf"^def {name}\(", (REPO / path).read_text(), re.M), f"{path}::{name}"


# ------------------------------------------------------------------------------ the code

def _pyinfra_attributes() -> dict[str, Any]:
    """Every attribute of every loaded pyinfra module, and of each class defined there."""
    seen: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in PYINFRA:
            continue
        for attr, value in list(vars(module).items()):
            seen[f"{name}.{attr}"] = value
            if isinstance(value, type) and value.__module__ == name:
                for member, inner in list(vars(value).items()):
                    seen[f"{name}.{attr}.{member}"] = inner
    return seen


def _changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {k for k in before.keys() & after.keys() if before[k] is not after[k]}


def _expected(module: str) -> set[str]:
    return {s for s, by, _ in rows() if by == module}


def test_each_module_patches_exactly_its_rows(monkeypatch, tmp_path):
    import atexit

    import click
    import pyinfra_cli.cli as cli
    from pyinfra.api import State

    from gpuinfra_deploy.pyinfra_patches import engine
    from gpuinfra_deploy.pyinfra_patches.gate import validate_before_connect
    from gpuinfra_deploy.pyinfra_patches.loader import checked_loading
    from gpuinfra_deploy.run import summary

    assert not engine._INSTALLED, "the engine was left installed by another test"
    before = _pyinfra_attributes()
    engine.install()
    try:
        assert _changed(before, _pyinfra_attributes()) == _expected("engine.py")
    finally:
        engine.uninstall()
    assert _changed(before, _pyinfra_attributes()) == set()

    from gpuinfra_deploy.pyinfra_patches import uploads

    uploads.uninstall()  # a plan test's Role.apply installed it; compared from pyinfra's own
    before = _pyinfra_attributes()
    uploads.install()
    try:
        assert _changed(before, _pyinfra_attributes()) == _expected("uploads.py")
    finally:
        uploads.uninstall()
    assert _changed(before, _pyinfra_attributes()) == set()

    with checked_loading():
        assert _changed(before, _pyinfra_attributes()) == _expected("loader.py")
    assert _changed(before, _pyinfra_attributes()) == set()

    monkeypatch.setattr(cli, "make_inventory", cli.make_inventory)  # restored afterwards
    inventory = tmp_path / "site.py"
    inventory.write_text("head = ['h1']\n")
    with click.Context(click.Command("pyinfra")) as ctx:
        ctx.params = {"inventory": str(inventory)}
        validate_before_connect()
    assert _changed(before, _pyinfra_attributes()) == _expected("gate.py")

    # The one patch outside the package: a wrap of the run's own State object.
    assert _expected("../run/summary.py") == {"pyinfra.api.state.State.init"}
    monkeypatch.setattr(atexit, "register", lambda _: None)
    state = State()
    summary.install(state, frozenset())
    assert "init" in vars(state)


# ------------------------------------------------------------------------------ nobody else

def pyinfra_assignments(source: str) -> list[str]:
    """``<name>.<attr> = ...`` (also augmented, annotated, in a tuple, or by ``setattr``)
    where ``<name>`` was bound in this source by an import of pyinfra or pyinfra_cli."""
    tree = ast.parse(source)
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names
                      if a.name.split(".")[0] in PYINFRA}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.split(".")[0] in PYINFRA:
            bound |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and getattr(node.value.func, "attr", getattr(node.value.func, "id", None)) \
                == "import_module" and node.value.args \
                and isinstance(node.value.args[0], ast.Constant) \
                and str(node.value.args[0].value).split(".")[0] in PYINFRA:
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}

    def root(node: ast.expr) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    def flat(targets: list[ast.expr]) -> list[ast.expr]:
        out: list[ast.expr] = []
        for t in targets:
            out += flat(list(t.elts)) if isinstance(t, (ast.Tuple, ast.List)) else [t]
        return out

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = flat(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "setattr" and node.args:
            targets = [ast.Attribute(value=node.args[0], attr="?", lineno=node.lineno)]
        else:
            continue
        found += [f"line {node.lineno}: {ast.unparse(t)} = ..." for t in targets
                  if isinstance(t, ast.Attribute) and root(t) in bound]
    return found


def _product_files() -> list[Path]:
    files = [REPO / "config.py", REPO / "deploy.py"]
    for package in PRODUCT_FOLDERS:
        files += sorted(package.rglob("*.py"))
    return [f for f in files if PATCHES not in f.parents]


def test_nothing_else_patches_pyinfra():
    found = {str(f.relative_to(REPO)): hits for f in _product_files()
             if (hits := pyinfra_assignments(f.read_text()))}
    assert found == {}, "patch pyinfra only in gpuinfra_deploy/pyinfra_patches/ (README.md)"


def test_the_patch_check_can_fail():
    for source in ("import pyinfra_cli.cli as cli\ncli.make_inventory = f\n",
                   "from pyinfra.api import host\nhost.Host.get_fact = f\n",
                   "from pyinfra.connectors.ssh import SSHConnector\nSSHConnector._connect = f\n",
                   "import pyinfra.api.util\npyinfra.api.util.x += 1\n",
                   "def f():\n    import pyinfra_cli.inventory as loader\n"
                   "    loader.exec_file, loader._get_groups_from_filename = a, b\n",
                   "from importlib import import_module\n"
                   "m = import_module('pyinfra.api.host')\nm.Host.get_fact = f\n",
                   "import pyinfra\nsetattr(pyinfra, 'is_cli', True)\n"):
        assert pyinfra_assignments(source), source
    for source in ("from pyinfra.context import ctx_config\nconfig = ctx_config.get()\n"
                   "config.FAIL_PERCENT = 5\n",
                   "import os\nos.environ = {}\n",
                   "self.x = 1\n"):
        assert not pyinfra_assignments(source), source
    # and the real patches are seen by it
    for name in ("engine.py", "gate.py", "loader.py"):
        assert pyinfra_assignments((PATCHES / name).read_text()), name
