"""The shape of the tree: what product code may contain."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

from tests.conftest import PRODUCT_FOLDERS, REPO

# mock.patch, and any import of unittest.mock (or the old mock package)
_MOCK = re.compile(r"\bmock\.patch\b|\bunittest\.mock\b|\bfrom unittest import\b.*\bmock\b"
                   r"|^\s*(?:import mock\b|from mock import\b)")


def test_no_mock_patch_in_product_code():
    """Product code replaces nothing with mock: a pyinfra internal is swapped for a while
    only in gpuinfra_deploy/pyinfra_patches/internals.py, by plain attributes set back in a
    ``finally``."""
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for folder in PRODUCT_FOLDERS for path in sorted(folder.rglob("*.py"))
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if _MOCK.search(line)]
    assert found == [], "mock in product code:\n" + "\n".join(found)


# ---------------------------------------------------------------------------- one class per name

def _product_files() -> list[Path]:
    return [path for folder in PRODUCT_FOLDERS for path in sorted(folder.rglob("*.py"))]


def _trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in _product_files():
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def duplicate_classes(trees: Iterator[tuple[Path, ast.Module]]) -> dict[str, list[str]]:
    """Each class name defined more than once (every ``class`` statement: at module level,
    nested or in a function), with where: ``path:line``."""
    where: dict[str, list[str]] = {}
    for path, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(f"{path.relative_to(REPO)}:{node.lineno}")
    return {name: places for name, places in sorted(where.items()) if len(places) > 1}


def test_no_class_name_is_defined_twice_in_product_code():
    """One class per name in gpuinfra/, every gpuinfra_*/ package and roles/: a name says one
    thing wherever it is read (a parser's result is not a pyinfra fact of the same name, a
    lab proof is named for what it proves)."""
    found = duplicate_classes(_trees())
    assert found == {}, "class names defined more than once:\n" + "\n".join(
        f"  {name}: {', '.join(places)}" for name, places in found.items())


# ---------------------------------------------------------------------------- no import cycle

def module_name(path: Path) -> str:
    """The dotted name a product file is imported by (roles/ is ``gpuinfra_roles``)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[0] == "roles":
        parts[0] = "gpuinfra_roles"
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom | ast.Call]:
    """Every import that can run: at module level and inside functions and methods; not the
    body of ``if TYPE_CHECKING:`` (annotations only, never run)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            stack += node.orelse
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" \
                and node.args and isinstance(node.args[0], ast.Constant):
            yield node
        stack += ast.iter_child_nodes(node)


def imports_of(module: str, package: bool, tree: ast.Module,
               modules: set[str]) -> dict[str, int]:
    """The product modules ``module`` imports, each with the line of its first import:
    relative imports resolved; ``from pkg import sub`` is the module pkg.sub when there is
    one, else pkg (whose ``__init__`` defines the name)."""
    found: dict[str, int] = {}
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                own = module.split(".") if package else module.split(".")[:-1]
                source = ".".join([*own[:len(own) - node.level + 1], *filter(None, [source])])
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                     for a in node.names]
        else:
            assert isinstance(node, ast.Call) and isinstance(node.args[0], ast.Constant)
            names = [str(node.args[0].value)]
        for name in names:
            while name and name not in modules:  # a name in a module: that module
                name = name.rpartition(".")[0]
            if name and name != module:
                found[name] = min(found.get(name, node.lineno), node.lineno)
    return found


def import_graph(trees: Iterator[tuple[Path, ast.Module]]
                 ) -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    """(module -> {imported module: line}, module -> its file) over the product modules."""
    parsed = {module_name(path): (path, tree) for path, tree in trees}
    modules = set(parsed)
    graph = {name: imports_of(name, path.name == "__init__.py", tree, modules)
             for name, (path, tree) in parsed.items()}
    return graph, {name: path for name, (path, _) in parsed.items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Each group of modules that import one another (strongly connected, Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for other in graph.get(name, {}):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in on_stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == name:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(groups)


def cycle_path(group: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """One cycle through the group's first module, as the imports that make it."""
    start = group[0]
    paths = {start: [start]}
    todo = [start]
    while todo:
        name = todo.pop(0)
        for other in sorted(graph[name]):
            if other == start:
                return [*paths[name], start]
            if other in group and other not in paths:
                paths[other] = [*paths[name], other]
                todo.append(other)
    raise AssertionError(f"no cycle through {start}")


def test_no_import_cycle_among_product_modules():
    """No product module imports itself back through others. Counted: every import that can
    run, at module level and inside functions (a deferred import still ties the modules
    together), relative ones resolved, and ``importlib.import_module("literal")``; not what
    ``if TYPE_CHECKING:`` imports for annotations. What two modules share goes into a module
    both import (gpuinfra_cli/inputs.py for the check commands)."""
    graph, files = import_graph(_trees())
    found = []
    for group in cycles(graph):
        path = cycle_path(group, graph)
        steps = [f"{a} -> {b} ({files[a].relative_to(REPO)}:{graph[a][b]})"
                 for a, b in pairwise(path)]
        found.append(f"  {', '.join(group)}:\n" + "\n".join(f"    {s}" for s in steps))
    assert found == [], "import cycles among product modules:\n" + "\n".join(found)


# ---------------------------------------------------------------------------- sizes

MAX_LINES = 600  # a product file an engineer reads in one sitting
MAX_ROOT_MODULES = 25  # the library's root: the rest lives in subpackages named by subject


def long_files(paths: list[Path], limit: int = MAX_LINES) -> list[str]:
    """``path: N lines`` for each of ``paths`` longer than ``limit`` lines."""
    found = []
    for path in paths:
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > limit:
            found.append(f"{path.relative_to(REPO)}: {count} lines")
    return found


def test_no_product_file_is_over_600_lines():
    """Split by meaning (a role's __init__.py keeps the table of contents; the library gets
    a subpackage per subject), never by line count alone."""
    found = long_files(_product_files())
    assert found == [], f"product files over {MAX_LINES} lines:\n" + "\n".join(found)


def test_the_librarys_root_holds_at_most_25_modules():
    root = sorted(p.name for p in (REPO / "gpuinfra").glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_the_size_check_can_fail():
    """The longest test module is over the limit: the check names it (and only files over)."""
    slurm_plan = REPO / "tests" / "plan" / "test_slurm_plan.py"
    units = REPO / "gpuinfra" / "units.py"
    assert long_files([slurm_plan, units]) == [
        f"tests/plan/test_slurm_plan.py: {len(slurm_plan.read_text().splitlines())} lines"]
