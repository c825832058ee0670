"""Shared test helpers: where the real captured outputs live, the roles deploy.py runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The project's copy of shared/fixtures/real (verbatim). CI also has ../shared beside the clone;
# tests/unit/test_fixture_copy.py checks the copy still matches it when it is there.
REAL = REPO / "tests" / "fixtures" / "real"
# The product's Python packages as folders: every gpuinfra* package and the roles (roles/,
# installed as gpuinfra_roles).
PRODUCT_FOLDERS = sorted([*REPO.glob("gpuinfra*/"), REPO / "roles"])
SHARED_REAL = REPO.parent / "shared" / "fixtures" / "real"


def deploy_roles(deploy: Path = REPO / "deploy.py") -> list[str]:
    """The roles deploy.py runs, in its order: the names in its ``ROLES`` list (read, not run:
    running it takes a pyinfra host)."""
    for node in ast.parse(deploy.read_text()).body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["ROLES"]:
            return [item.value for each in ast.walk(node.value)
                    if isinstance(each, ast.comprehension) and isinstance(each.iter, ast.Tuple)
                    for item in each.iter.elts if isinstance(item, ast.Constant)]
    raise AssertionError(f"{deploy} has no ROLES list")


def real_files(folder: str) -> list[Path]:
    """Every captured output in ``tests/fixtures/real/<folder>``, sorted."""
    return sorted(p for p in (REAL / folder).iterdir() if p.is_file())


@pytest.fixture
def real() -> Path:
    return REAL
