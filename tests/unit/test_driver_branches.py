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
        expected = ("535", "550") if distro == "debian-13" else ("535", "550", "570", "580")
        assert drivers.SUPPORTED_BRANCHES[distro] == expected  # trixie: its archive's two
    assert drivers.branch_source("debian-13", "535") == "archive"
    assert drivers.branch_source("debian-13", "580") is None
    assert drivers.branch_source("debian-12", "535") == "archive"
    assert drivers.branch_source("debian-12", "570") == "cuda-repo"
    assert drivers.branch_source("ubuntu-24.04", "580") == "archive"
    assert drivers.branch_source("ubuntu-24.04", "590") is None


def test_615_and_620_are_known_branches_not_installable_ones():
    """NVIDIA published 615 and 620 documentation sets (R620 LTSB): a spec naming 620 is told
    the roles cannot install it yet, not that the branch does not exist."""
    from gpuinfra.spec import HostInput, validate

    for branch in ("615", "620"):
        assert branch in drivers.KNOWN_BRANCHES
        problems = [str(p) for p in validate([HostInput("head01", ("head",),
                                                        {"driver_branch": branch})])]
        assert any("a real branch, but the roles cannot install it" in p for p in problems)
        assert not any("unknown NVIDIA driver branch" in p for p in problems)


def test_the_end_of_life_default_is_kept_but_warned_about_with_the_supported_branch():
    """535 stays the default; it reached end of life in June 2026 (NVIDIA "Supported Drivers
    and CUDA Toolkit Versions"): validate warns and names 580, which the roles install."""
    from gpuinfra.spec import HostInput, build_cluster

    assert drivers.DEFAULT_BRANCH == "535" and drivers.END_OF_LIFE == {"535": "June 2026"}
    def site(**values):
        return [HostInput("head01", ("head",), dict(values)),
                HostInput("cpu01", ("workers",), dict(values))]

    spec = build_cluster(site())
    assert spec.driver_branch == "535"
    [warning] = [w for w in spec.warnings if w.field == "driver_branch"]
    assert "end of life in June 2026" in warning.message
    assert "driver_branch = '580'" in warning.message
    assert drivers.SUPPORTED_ALTERNATIVE in drivers.supported_branches()
    spec = build_cluster(site(driver_branch="580"))
    assert not [w for w in spec.warnings if w.field == "driver_branch"]
