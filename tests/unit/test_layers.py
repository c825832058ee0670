"""The project's layers import only downwards.

    library gpuinfra/  <-  deploy layer roles/, deploy.py, config.py  <-  verify/, lab/
                       <-  the CLI gpuinfra_cli/ (imports any of them; nothing imports it)

and no product code imports the tests. (The library's own purity, no pyinfra and no I/O, is
tests/unit/test_library_purity.py.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

# Layer of each top-level package or file, and the packages it must never import.
FORBIDDEN: dict[str, set[str]] = {
    "gpuinfra": {"roles", "verify", "lab", "gpuinfra_cli", "tests", "deploy", "config"},
    "roles": {"verify", "lab", "gpuinfra_cli", "tests", "deploy", "config"},
    "deploy.py": {"verify", "lab", "gpuinfra_cli", "tests"},
    "config.py": {"verify", "lab", "gpuinfra_cli", "tests"},
    "verify": {"gpuinfra_cli", "tests", "lab"},
    "lab": {"gpuinfra_cli", "tests", "verify"},
    "gpuinfra_cli": {"tests"},
    "inventory": {"gpuinfra_cli", "tests", "verify"},
    "group_data": {"gpuinfra_cli", "tests", "verify", "lab", "roles"},
    # Benchmarks are developer tools beside the tests: the planning benchmark runs the plan
    # harness of tests/plan on recorded facts (bench/plan_scale.py); no product imports them.
    "bench": {"gpuinfra_cli"},
}


def _files(layer: str) -> list[Path]:
    path = REPO / layer
    return [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


def imported_packages(source: str) -> list[tuple[str, int]]:
    """(top-level package, line) of every import in ``source``, relative imports excluded."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], node.lineno))
    return found


def violations(layer: str, source: str) -> list[str]:
    return [f"imports {pkg} at line {line}" for pkg, line in imported_packages(source)
            if pkg in FORBIDDEN[layer]]


CASES = [(layer, path) for layer in FORBIDDEN for path in _files(layer)]


@pytest.mark.parametrize(("layer", "path"), CASES,
                         ids=[str(p.relative_to(REPO)) for _, p in CASES])
def test_layer_imports_only_downwards(layer, path):
    assert violations(layer, path.read_text()) == []


def test_every_layer_has_files():
    for layer in FORBIDDEN:
        assert _files(layer), layer


def test_layer_check_can_fail():
    assert violations("roles", "from gpuinfra_cli.gate import require_valid\n")
    assert violations("deploy.py", "import gpuinfra_cli.main\n")
    assert violations("gpuinfra", "from roles.site import Site\n")
    assert violations("verify", "from tests.conftest import REPO\n")
    assert not violations("roles", "from gpuinfra.spec import NodeSpec\n")
