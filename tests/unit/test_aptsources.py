"""Enabling archive components in apt sources (gpuinfra.apt.sources): both formats, nothing lost."""

from __future__ import annotations

from gpuinfra.apt.sources import enable_components, enable_deb822, enable_one_line

DEBIAN = ["contrib", "non-free", "non-free-firmware"]


def test_lab_debootstrap_line_gets_the_components():
    text = "deb http://deb.debian.org/debian bookworm main\n"
    assert enable_one_line(text, "bookworm", DEBIAN) == (
        "deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware\n")


def test_one_line_keeps_everything_else():
    text = (
        "# the site's sources\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://mirror.example/debian bookworm main contrib  # mirror\n"
        "deb-src http://deb.debian.org/debian bookworm main\n"
        "deb http://security.debian.org/debian-security bookworm-security main non-free\n"
        "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n"
        "deb http://deb.debian.org/debian bookworm-backports contrib\n"
        "\n"
        "deb http://deb.debian.org/debian bullseye main\n"
    )
    assert enable_one_line(text, "bookworm", DEBIAN).splitlines() == [
        "# the site's sources",
        "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://mirror.example/debian bookworm main contrib non-free non-free-firmware # mirror",
        "deb-src http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware",
        "deb http://security.debian.org/debian-security bookworm-security main non-free contrib "
        "non-free-firmware",
        "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main",  # third party
        "deb http://deb.debian.org/debian bookworm-backports contrib",  # no main: not ours
        "",
        "deb http://deb.debian.org/debian bullseye main",  # another release
    ]


def test_converged_text_is_returned_unchanged():
    text = "deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware\n"
    assert enable_one_line(text, "bookworm", DEBIAN) == text


def test_a_component_on_another_line_of_the_same_suite_counts():
    """Ubuntu's default sources.list spreads multiverse over lines of its own."""
    text = ("deb http://archive.ubuntu.com/ubuntu/ jammy main restricted\n"
            "deb http://archive.ubuntu.com/ubuntu/ jammy multiverse\n"
            "deb http://security.ubuntu.com/ubuntu/ jammy-security main\n")
    assert enable_one_line(text, "jammy", ["restricted", "multiverse"]).splitlines() == [
        "deb http://archive.ubuntu.com/ubuntu/ jammy main restricted",
        "deb http://archive.ubuntu.com/ubuntu/ jammy multiverse",
        "deb http://security.ubuntu.com/ubuntu/ jammy-security main restricted multiverse",
    ]


# This machine's own Debian 12 image uses deb822, with comment lines inside the stanzas.
DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_deb822_stanzas_get_the_components_and_keep_comments():
    result = enable_deb822(DEB822, "bookworm", DEBIAN)
    assert result == DEB822.replace("Components: main\n",
                                    "Components: main contrib non-free non-free-firmware\n")
    assert enable_deb822(result, "bookworm", DEBIAN) == result


def test_deb822_leaves_third_party_and_incomplete_stanzas():
    text = ("Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\n"
            "Components: main\n\nTypes: deb\nURIs: http://x/debian\nSuites: bookworm\n")
    assert enable_deb822(text, "bookworm", DEBIAN) == text


def test_deb822_continuation_lines():
    text = "Types: deb\nURIs: http://x/ubuntu\nSuites: noble\nComponents: main\n universe\n"
    assert enable_deb822(text, "noble", ["restricted"]) == text.replace(
        " universe\n", " universe restricted\n")


def test_dispatch_on_file_name():
    line = "deb http://deb.debian.org/debian bookworm main\n"
    assert enable_components("/etc/apt/sources.list", line, "bookworm", ["non-free"]).endswith(
        "main non-free\n")
    assert enable_components("/etc/apt/sources.list.d/debian.sources", DEB822, "bookworm",
                             ["non-free"]).count("main non-free") == 2
