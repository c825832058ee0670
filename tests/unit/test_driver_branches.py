"""Driver branches: which are known, which the roles install per distribution and where from."""

from __future__ import annotations

from gpuinfra.knowledge import drivers


def test_branches_beyond_580_are_known():
    # Fixed: the table stopped at 580; NVIDIA has published 590, 595 and 610 since.
    for branch in ("590", "595", "610"):
        assert branch in drivers.KNOWN_BRANCHES
    assert drivers.DEFAULT_BRANCH == "535"
    assert drivers.KNOWN_BRANCHES == tuple(sorted(drivers.KNOWN_BRANCHES, key=int))


def test_installable_branches_and_where_from():
    for distro in drivers.SUPPORTED_OS:
        assert drivers.SUPPORTED_BRANCHES[distro] == ("535", "550", "570", "580")
    assert drivers.branch_source("debian-12", "535") == "archive"
    assert drivers.branch_source("debian-12", "570") == "cuda-repo"
    assert drivers.branch_source("ubuntu-24.04", "580") == "archive"
    assert drivers.branch_source("ubuntu-24.04", "590") is None
