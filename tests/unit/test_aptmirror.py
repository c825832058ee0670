"""Mirror rewriting of apt sources: official URLs only, both formats, idempotent."""

from __future__ import annotations

from gpuinfra.apt.mirror import mirror_for, point_at_mirror

DEBIAN_ONE_LINE = """\
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://security.debian.org/debian-security bookworm-security main
# deb http://deb.debian.org/debian bookworm-backports main
deb [signed-by=/usr/share/keyrings/x.gpg] https://packages.cloud.google.com/apt cloud-sdk main
"""

UBUNTU_DEB822 = """\
Types: deb
URIs: http://de.archive.ubuntu.com/ubuntu/
Suites: noble noble-updates
Components: main restricted

Types: deb
URIs: http://security.ubuntu.com/ubuntu/
Suites: noble-security
Components: main restricted
"""


def test_debian_one_line_sources():
    out = point_at_mirror(DEBIAN_ONE_LINE, "debian", "http://mirror.site/debian/")
    assert "deb http://mirror.site/debian bookworm main\n" in out
    assert "deb http://mirror.site/debian-security bookworm-security main\n" in out
    assert "# deb http://mirror.site/debian bookworm-backports main" in out
    assert "https://packages.cloud.google.com/apt cloud-sdk main" in out  # untouched
    assert "deb.debian.org" not in out and "security.debian.org" not in out


def test_ubuntu_deb822_sources():
    out = point_at_mirror(UBUNTU_DEB822, "ubuntu", "http://mirror.site/ubuntu")
    assert out.count("URIs: http://mirror.site/ubuntu\n") == 2
    assert "archive.ubuntu.com" not in out


def test_idempotent_and_other_distributions_untouched():
    once = point_at_mirror(DEBIAN_ONE_LINE, "debian", "http://mirror.site/debian")
    assert point_at_mirror(once, "debian", "http://mirror.site/debian") == once
    assert point_at_mirror(DEBIAN_ONE_LINE, "ubuntu", "http://m/ubuntu") == DEBIAN_ONE_LINE


def test_mirror_choice():
    assert mirror_for({"debian": "http://a", "default": "http://b"}, "debian") == "http://a"
    assert mirror_for({"default": "http://b"}, "ubuntu") == "http://b"
    assert mirror_for({}, "debian") is None

