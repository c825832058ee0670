"""The project's layers import only downwards, and roles stand alone.

    library gpuinfra/  <-  shared deploy code gpuinfra_deploy/  <-  roles roles/
    <-  deploy.py, config.py  <-  gpuinfra_verify/, gpuinfra_lab/  <-  the CLI gpuinfra_cli/

- no product code imports the tests, and nothing imports the CLI;
- a role never imports a sibling role (shared code lives in gpuinfra_deploy/);
- shared deploy code never imports a role (it finds the roles' knobs by file, see
  gpuinfra_deploy/run/knobs.py);
- relative imports are resolved and judged too, and so are ``importlib.import_module("...")``
  calls with a literal name.

(The library's own purity, no pyinfra and no I/O, is tests/unit/test_library_purity.py.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

# Layer of each top-level package or file, and the packages it must never import.
FORBIDDEN: dict[str, set[str]] = {
    "gpuinfra": {"gpuinfra_deploy", "gpuinfra_roles", "gpuinfra_verify", "gpuinfra_lab",
                 "gpuinfra_cli", "gpuinfra_node", "tests", "deploy", "config", "pyinfra",
                 "pyinfra_cli"},
    # Runs on the nodes beside the library (gpuinfra_deploy/nodecode.py packs both): Python's
    # standard library and gpuinfra only.
    "gpuinfra_node": {"gpuinfra_deploy", "gpuinfra_roles", "gpuinfra_verify", "gpuinfra_lab",
                      "gpuinfra_cli", "tests", "deploy", "config", "pyinfra", "pyinfra_cli",
                      "testinfra", "yaml", "jinja2"},
    "gpuinfra_deploy": {"gpuinfra_roles", "gpuinfra_verify", "gpuinfra_lab", "gpuinfra_cli",
                        "tests", "deploy", "config"},
    "gpuinfra_roles": {"gpuinfra_verify", "gpuinfra_lab", "gpuinfra_cli", "tests", "deploy",
                       "config"},
    "deploy.py": {"gpuinfra_verify", "gpuinfra_lab", "gpuinfra_cli", "tests"},
    "config.py": {"gpuinfra_verify", "gpuinfra_lab", "gpuinfra_cli", "tests"},
    "gpuinfra_verify": {"gpuinfra_cli", "tests", "gpuinfra_lab", "gpuinfra_roles"},
    "gpuinfra_lab": {"gpuinfra_cli", "tests", "gpuinfra_verify", "gpuinfra_roles"},
    "gpuinfra_cli": {"tests"},
    "inventory": {"gpuinfra_cli", "tests", "gpuinfra_verify", "gpuinfra_roles"},
    "group_data": {"gpuinfra_cli", "tests", "gpuinfra_verify", "gpuinfra_lab",
                   "gpuinfra_roles", "gpuinfra_deploy"},
    # Benchmarks are developer tools beside the tests: the planning benchmark runs the plan
    # harness of tests/plan on recorded facts (bench/plan_scale.py); no product imports them.
    "bench": {"gpuinfra_cli"},
    # Molecule's helper scripts drive the lab and read the verify suite's results.
    "molecule": {"gpuinfra_cli", "tests", "gpuinfra_roles"},
}


# The folder of each layer that is not named after its import name: the roles are the
# ``gpuinfra_roles`` package (pyproject.toml maps it to ``roles/``).
FOLDERS = {"gpuinfra_roles": "roles"}
ROLES = REPO / FOLDERS["gpuinfra_roles"]


def _files(layer: str) -> list[Path]:
    path = REPO / FOLDERS.get(layer, layer)
    return [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


def _package_of(path: Path | None) -> list[str]:
    """The dotted package a file belongs to, as a list (for resolving relative imports)."""
    if path is None:
        return []
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if path.is_relative_to(ROLES):
        parts[0] = "gpuinfra_roles"
    return parts[:-1] if parts[-1] != "__init__" else parts[:-1]


def imported_modules(source: str, path: Path | None = None) -> list[tuple[str, int]]:
    """(dotted module, line) of every import in ``source``: relative ones resolved against
    ``path``'s package, and ``importlib.import_module("literal")`` calls."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = _package_of(path)
                base = package[:len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
                names = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
                found += [(n, node.lineno) for n in names]
            elif node.module:
                found.append((node.module, node.lineno))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" \
                and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            found.append((node.args[0].value, node.lineno))
    return found


def violations(layer: str, source: str, path: Path | None = None) -> list[str]:
    found = [f"imports {module} at line {line}"
             for module, line in imported_modules(source, path)
             if module.split(".")[0] in FORBIDDEN[layer]]
    if layer == "gpuinfra_roles" and path is not None:
        own = path.relative_to(ROLES).parts[0]
        found += [f"imports the sibling role {module} at line {line} (share code through "
                  "gpuinfra_deploy/, never through another role)"
                  for module, line in imported_modules(source, path)
                  if module.startswith("gpuinfra_roles.")
                  and module.split(".")[1] != own]
    return found


CASES = [(layer, path) for layer in FORBIDDEN for path in _files(layer)]


@pytest.mark.parametrize(("layer", "path"), CASES,
                         ids=[str(p.relative_to(REPO)) for _, p in CASES])
def test_layer_imports_only_downwards(layer, path):
    assert violations(layer, path.read_text(), path) == []


def test_every_layer_has_files():
    for layer in FORBIDDEN:
        assert _files(layer), layer


def test_roles_top_level_holds_only_roles():
    """roles/ holds role folders (each with the four files of a role and its templates/
    folder), its __init__.py and README.md: nothing else."""
    top = sorted(p.name for p in ROLES.iterdir()
                 if p.name != "__pycache__")
    loose = [n for n in top if not (ROLES / n).is_dir()
             and n not in ("__init__.py", "README.md")]
    assert loose == []
    for folder in ROLES.iterdir():
        if folder.is_dir() and folder.name != "__pycache__":
            missing = [f for f in ("__init__.py", "defaults.py", "deploy.py", "README.md")
                       if not (folder / f).is_file()]
            missing += [] if (folder / "templates").is_dir() else ["templates/"]
            assert missing == [], folder.name


SLURM = ROLES / "slurm" / "__init__.py"
SHARED = REPO / "gpuinfra_deploy" / "ops" / "apt.py"


def test_layer_check_can_fail():
    assert violations("gpuinfra_roles", "from gpuinfra_cli.gate import require_valid\n")
    assert violations("deploy.py", "import gpuinfra_cli.main\n")
    assert violations("gpuinfra", "from gpuinfra_deploy.run.site import Site\n")
    assert violations("gpuinfra_verify", "from tests.conftest import REPO\n")
    assert not violations("gpuinfra_roles", "from gpuinfra.spec import NodeSpec\n", SLURM)
    # a sibling role, absolute or relative; its own modules are fine
    assert violations("gpuinfra_roles", "from gpuinfra_roles.munge import MungeKeyState\n",
                      SLURM)
    assert violations("gpuinfra_roles", "from ..munge import MungeKeyState\n", SLURM)
    assert not violations("gpuinfra_roles", "from .operations import checked_config\n", SLURM)
    assert not violations("gpuinfra_roles",
                          "from gpuinfra_roles.slurm.operations import checked_config\n", SLURM)
    # shared code importing a role, directly or dynamically
    assert violations("gpuinfra_deploy", "from gpuinfra_roles.slurm import slurm\n", SHARED)
    assert violations("gpuinfra_deploy",
                      "import importlib\nimportlib.import_module('gpuinfra_roles.slurm')\n",
                      SHARED)
    assert violations("molecule", "from gpuinfra_roles.slurm import slurm\n")
