"""`apt-cache policy` on real bookworm captures (tests/fixtures/apt/INDEX.md), and the check that
a pinned version is one apt lists."""

from __future__ import annotations

import json

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.knowledge.packages import DRIVER_VERSIONS, driver_packages
from gpuinfra.parsers.aptpolicy import parse_apt_policy, pin_problems
from tests.conftest import REAL, REPO

APT = REPO / "tests" / "fixtures" / "apt"
DRIVER_SET = APT / "apt-cache-policy-bookworm-nvidia-driver-set.txt"
TESLA = APT / "apt-cache-policy-bookworm-tesla-535-and-fm.txt"
OPEN = APT / "apt-cache-policy-bookworm-nvidia-open-kernel-dkms.txt"
PLAN_LAYER = REPO / "tests" / "plan" / "facts" / "apt-debian-12.json"


def bookworm() -> dict:
    policy = parse_apt_policy(DRIVER_SET.read_text())
    policy.update(parse_apt_policy(OPEN.read_text()))
    return policy


def test_real_capture_parses():
    policy = bookworm()
    smi = policy["nvidia-smi"]
    assert (smi.installed, smi.candidate) == (None, "535.309.01-0+deb12u1")
    assert smi.versions == ("535.309.01-0+deb12u1", "535.261.03-1", "535.216.03-2~bpo12+1")
    assert policy["nvidia-persistenced"].versions == ("535.171.04-1~deb12u1",)
    assert policy["nvidia-open-kernel-dkms"].versions == ("535.261.03-1",)


def test_bookworm_carries_the_tesla_535_driver():
    """Fixed in docs/hardware-reference.md 1.3: it said nvidia-tesla-535-* is only in
    sid/trixie; bookworm non-free lists it."""
    tesla = parse_apt_policy(TESLA.read_text())
    assert tesla["nvidia-tesla-535-driver"].versions == ("535.216.03-3~deb12u1",)
    assert "nvidia-fabricmanager-535" not in tesla  # Debian carries no Fabric Manager


def test_debians_default_pins_are_all_listed():
    pinned = driver_packages("debian-12", "535", DRIVER_VERSIONS[("debian-12", "535")]).packages
    assert pin_problems(bookworm(), pinned) == []
    opened = driver_packages("debian-12", "535", DRIVER_VERSIONS[("debian-12", "535")],
                             open_modules=True).packages
    assert "nvidia-open-kernel-dkms" in opened and pin_problems(bookworm(), opened) == []


def test_the_references_version_suffix_is_not_listed():
    """Fixed in docs/hardware-reference.md 1.3: bookworm's build is 535.261.03-1, not
    535.261.03-1~deb12u1."""
    problems = pin_problems(bookworm(), {"nvidia-smi": "535.261.03-1~deb12u1"})
    assert problems == ["nvidia-smi=535.261.03-1~deb12u1: apt lists 535.309.01-0+deb12u1, "
                        "535.261.03-1, 535.216.03-2~bpo12+1 (candidate 535.309.01-0+deb12u1)"]


def test_a_package_apt_lists_nothing_of_is_left_to_apt():
    assert pin_problems(bookworm(), {"nvidia-fabricmanager-570": "570.211.01-1"}) == []
    assert pin_problems({}, {"nvidia-smi": "1-1"}) == []


def test_the_plan_layer_is_the_parsed_capture():
    layer = json.loads(PLAN_LAYER.read_text())["gpuinfra_deploy.facts.apt.AptPolicy"]["*"]
    assert layer == {name: entry.to_json() for name, entry in bookworm().items()}


def test_installed_and_held_versions():
    text = ("nvidia-smi:\n  Installed: 535.261.03-1\n  Candidate: 535.309.01-0+deb12u1\n"
            "  Version table:\n     535.309.01-0+deb12u1 500\n"
            "        500 http://security.debian.org/debian-security bookworm-security/non-free "
            "amd64 Packages\n *** 535.261.03-1 500\n"
            "        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages\n"
            "        100 /var/lib/dpkg/status\n")  # DERIVED: the capture after an install
    smi = parse_apt_policy(text)["nvidia-smi"]
    assert (smi.installed, smi.versions) == ("535.261.03-1",
                                             ("535.309.01-0+deb12u1", "535.261.03-1"))


def test_empty_output_is_no_package():
    assert parse_apt_policy("") == {}


@pytest.mark.parametrize("path", sorted(p for p in REAL.rglob("*.txt") if p.stat().st_size))
def test_other_commands_output_is_refused(path):
    with pytest.raises(ParseError):
        parse_apt_policy(path.read_text(encoding="utf-8", errors="replace"))
