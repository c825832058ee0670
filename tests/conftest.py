"""Shared test helpers: where the real captured outputs live."""

from __future__ import annotations

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


def real_files(folder: str) -> list[Path]:
    """Every captured output in ``tests/fixtures/real/<folder>``, sorted."""
    return sorted(p for p in (REAL / folder).iterdir() if p.is_file())


@pytest.fixture
def real() -> Path:
    return REAL
