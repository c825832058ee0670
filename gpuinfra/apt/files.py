"""The apt files gpuinfra writes, as data: one-line source lists, apt_preferences(5) stanzas
and apt.conf(5) settings, each format rendered by its one shared template
(gpuinfra_deploy/templates/apt/), whichever role writes it and wherever.

Values that end up in a file are validated first (URLs, apt.conf values): a bad value raises
GpuinfraError naming it, instead of landing on a host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.rules import clip, url_problem
from gpuinfra.text import FileText

# The shared templates of the three formats (templates/README.md).
LIST_TEMPLATE = "apt/list.j2"
PREFERENCES_TEMPLATE = "apt/preferences.j2"
CONF_TEMPLATE = "apt/conf.j2"


def check_url(value: str, what: str) -> str:
    """An http(s) URL without a trailing slash, or GpuinfraError (the spec's URL rule)."""
    problem = url_problem(value)
    if problem:
        raise GpuinfraError(f"{what} {clip(value)} is not an http(s) URL: {problem}")
    return value.rstrip("/")


# ----------------------------------------------------------------------------- source lists

def source_list(keyring: str, uri: str, suite: str, components: Sequence[str] = ()) -> FileText:
    """A list file of one line, rendered by :data:`LIST_TEMPLATE`:
    ``deb [signed-by=KEYRING] URI SUITE COMPONENT...`` (a flat repository: suite ``/``, no
    component). The caller has checked ``uri``."""
    return FileText(LIST_TEMPLATE, {"keyring": keyring, "uri": uri, "suite": suite,
                                    "components": list(components)})


def flat_repo_list(url: str, keyring: str) -> FileText:
    """A list file for a flat repository such as NVIDIA's CUDA repo (``deb [...] URL /``)."""
    return source_list(keyring, f"{check_url(url, 'repository URL')}/", "/")


# ----------------------------------------------------------------------------- preferences

def preferences(why: str, stanzas: Sequence[tuple[str, str, int]]) -> FileText:
    """apt_preferences(5) stanzas, rendered by :data:`PREFERENCES_TEMPLATE`: the managed-by
    header, ``why`` as a comment line, then each ``(package, pin, priority)`` as a
    ``Package:``/``Pin:``/``Pin-Priority:`` stanza, one blank line between them."""
    return FileText(PREFERENCES_TEMPLATE, {"why": why, "stanzas": [
        {"package": package, "pin": pin, "priority": priority}
        for package, pin, priority in stanzas]})


def apt_preferences(pins: Mapping[str, str], why: str) -> FileText:
    """apt_preferences(5) stanzas holding each subject at its exact version (priority 1001).

    A priority above 1000 makes apt install (or downgrade to) that version and never move off
    it: unattended upgrades included.
    """
    if not pins:
        raise GpuinfraError("no packages to pin")
    return preferences(why, [(subject, f"version {version}", 1001)
                             for subject, version in pins.items()])


def origin_preference(url: str, priority: int = 100) -> FileText:
    """An apt pin lowering everything served from ``url``'s host to ``priority``.

    For NVIDIA's CUDA repository: it also carries driver packages newer than the
    distribution's, which would otherwise replace them on the next upgrade.
    """
    host = urlsplit(check_url(url, "repository URL")).hostname
    return preferences("Take only what is asked for by name from this repository.",
                       [("*", f"origin {host}", priority)])


# ----------------------------------------------------------------------------- apt.conf

def apt_conf(settings: Sequence[tuple[str, str | int]], about: str = "") -> FileText:
    """apt.conf(5) settings, rendered by :data:`CONF_TEMPLATE`: the managed-by header,
    ``about`` as comment lines, then ``Name "value";`` per setting.

    A value with a quote or a line break is refused: apt.conf has no escape for them, so it
    would end the value and add directives (which run as root)."""
    out = []
    for name, value in settings:
        text = str(value)
        if '"' in text or "\n" in text or "\r" in text:
            raise GpuinfraError(f"apt setting {name}: {clip(text)} has a quote or a line break")
        out.append((name, text))
    return FileText(CONF_TEMPLATE, {"about": about.strip().splitlines(), "settings": out})


# The proxy file can hold credentials (http://user:password@proxy:3128): root only, and apt's
# download methods, which run as _apt, get the setting from apt itself, not from the file.
APT_PROXY_MODE = "640"


def apt_proxy_conf(url: str) -> FileText:
    """/etc/apt/apt.conf.d/95gpuinfra-proxy: apt's HTTP and HTTPS proxy.

    The value lands between quotes in apt's configuration syntax, so it is checked with the
    one URL rule first: a quote, a semicolon or a newline in it would add apt directives
    (which run as root on every node)."""
    problem = url_problem(url, need_port=True)
    if problem:
        raise GpuinfraError(f"apt proxy {clip(url)}: {problem}")
    return apt_conf([("Acquire::http::Proxy", url), ("Acquire::https::Proxy", url)])
