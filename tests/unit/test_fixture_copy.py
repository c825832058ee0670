"""The copied fixtures are the shared ones, byte for byte (never edited to suit a parser)."""

from __future__ import annotations

import pytest

from tests.conftest import REAL, SHARED_REAL


def _files(root):
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.skipif(not SHARED_REAL.is_dir(), reason="shared/ is not beside this checkout")
def test_copy_matches_shared():
    shared, ours = _files(SHARED_REAL), _files(REAL)
    missing = sorted(str(p) for p in shared.keys() - ours.keys())
    changed = sorted(str(p) for p in shared.keys() & ours.keys() if shared[p] != ours[p])
    assert not missing, f"copy lacks shared fixtures (copy into tests/fixtures/real): {missing}"
    assert not changed, f"copied fixtures differ from shared/ (never edit them): {changed}"
