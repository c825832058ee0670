"""Value rules: what a spec key or a role knob may hold, said the way an operator reads it.

A :class:`Rule` answers one question about a value, "what is wrong with it?" (None when
nothing is), and says what is allowed. The spec validator and every role's ``defaults.py``
(its knobs) use the same rules, so a value is judged once, before any host is touched, with
the same words wherever it appears. Strings are matched whole (``fullmatch``: a trailing
newline is never accepted), never trusted to be of the right type, and never echoed whole.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuinfra.errors import clip

Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Rule:
    """``check(value)`` is the problem with ``value`` (None: fine); ``allowed`` says what is."""

    allowed: str
    check: Check

    def problem(self, value: Any) -> str | None:
        return self.check(value)


def _text(pattern: str, what: str) -> Check:
    compiled = re.compile(pattern)

    def check(value: Any) -> str | None:
        if not isinstance(value, str):
            return f"must be a string ({what})"
        if not compiled.fullmatch(value):
            return f"not {what}"
        return None

    return check


def text(pattern: str, allowed: str, what: str | None = None) -> Rule:
    """A string matching ``pattern`` as a whole."""
    return Rule(allowed, _text(pattern, what or allowed))


def boolean() -> Rule:
    def check(value: Any) -> str | None:
        return None if isinstance(value, bool) else "must be True or False"

    return Rule("True or False", check)


def integer(minimum: int, maximum: int) -> Rule:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            hint = " (write it without quotes)" if isinstance(value, str) and value.isdigit() \
                else ""
            return f"must be an integer{hint}"
        if not minimum <= value <= maximum:
            return "out of range"
        return None

    return Rule(f"an integer from {minimum} to {maximum}", check)


def choice(*values: Any) -> Rule:
    def check(value: Any) -> str | None:
        try:
            return None if value in values else "not one of the choices"
        except TypeError:  # an unhashable value compared with strings
            return "not one of the choices"

    return Rule(", ".join(repr(v) for v in values), check)


def optional(rule: Rule) -> Rule:
    """None, or a value ``rule`` accepts."""
    return Rule(f"None, or {rule.allowed}", lambda v: None if v is None else rule.check(v))


def either(first: Rule, second: Rule) -> Rule:
    """A value ``first`` or ``second`` accepts (the first rule's problem is reported)."""

    def check(value: Any) -> str | None:
        if first.check(value) is None or second.check(value) is None:
            return None
        return second.check(value) if isinstance(value, (list, tuple)) else first.check(value)

    return Rule(f"{first.allowed}, or {second.allowed}", check)


def list_of(item: Rule, allowed: str | None = None, non_empty: bool = False) -> Rule:
    def check(value: Any) -> str | None:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            return "must be a list"
        if non_empty and not value:
            return "must not be empty"
        for index, element in enumerate(value):
            problem = item.check(element)
            if problem:
                return f"item {index}: {problem}"
        return None

    return Rule(allowed or f"a list of {item.allowed}", check)


def mapping_of(key: Rule, value: Rule, allowed: str | None = None) -> Rule:
    def check(mapping: Any) -> str | None:
        if not isinstance(mapping, Mapping):
            return "must be a dict"
        for k, v in mapping.items():
            problem = key.check(k)
            if problem:
                return f"key {clip(k)}: {problem}"
            problem = value.check(v)
            if problem:
                return f"value of {clip(k)}: {problem}"
        return None

    return Rule(allowed or f"a dict of {key.allowed} -> {value.allowed}", check)


# ------------------------------------------------------------------------------ names and text

def posix_name() -> Rule:
    """A user or group name, as useradd/groupadd accept it."""
    return text(r"[a-z_][a-z0-9_-]{0,31}", "a POSIX name: lower-case letter or '_' first, then "
                "lower-case letters, digits, '_' or '-' (max 32)", "a POSIX user or group name")


def octal_mode() -> Rule:
    """A file mode written as text: '0660' or '660'."""
    return text(r"0?[0-7]{3}", "an octal mode as text, e.g. '0660'", "an octal mode")


def debian_package() -> Rule:
    return text(r"[a-z0-9][a-z0-9+.-]{1,99}", "a Debian package name (e.g. 'pciutils')",
                "a package name")


def debian_version() -> Rule:
    """An exact package version as apt prints it (``535.261.03-1``, ``1:2.3-0ubuntu1``)."""
    return text(r"([0-9]+:)?[0-9][A-Za-z0-9.+~-]{0,99}",
                "an exact package version as `apt-cache policy` prints it, e.g. '535.261.03-1'",
                "a package version")


def sql_name() -> Rule:
    return text(r"[A-Za-z_][A-Za-z0-9_]{0,63}", "letters, digits and '_' (a MariaDB name)",
                "a database identifier")


# MariaDB's own schemas: the slurm role grants ALL on its database to slurmdbd's user, so one
# of these as slurm_db_name would hand that user the server's accounts and grants.
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")


def database_name() -> Rule:
    """A MariaDB database name the role may own: an identifier, not a system schema."""
    name = sql_name()

    def check(value: Any) -> str | None:
        problem = name.problem(value)
        if problem:
            return problem
        if value.lower() in SYSTEM_SCHEMAS:
            return "a MariaDB system schema: slurmdbd's user would get ALL on it"
        return None

    return Rule(f"{name.allowed}, not {', '.join(SYSTEM_SCHEMAS)}", check)


# ------------------------------------------------------------------------------ addresses

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"
_USERINFO = r"[A-Za-z0-9._~%-]+(?::[A-Za-z0-9._~%-]*)?"
_PATH = r"(?:/[A-Za-z0-9._~%+-]*)*"


def is_ip(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def host_name() -> Rule:
    """A DNS name or an IP address (an NTP server, a URL's host)."""

    def check(value: Any) -> str | None:
        if is_ip(value):
            return None
        return _text(HOSTNAME, "a host name or IP address")(value)

    return Rule("a host name (RFC 1123) or an IP address", check)


def ip_address() -> Rule:
    return Rule("an IPv4 or IPv6 address", lambda v: None if is_ip(v) else "not an IP address")


_URL = re.compile(
    rf"(?P<scheme>https?)://(?:(?P<userinfo>{_USERINFO})@)?"
    rf"(?P<host>{HOSTNAME}|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{{1,5}}))?(?P<path>{_PATH})"
)


def url_problem(value: Any, need_port: bool = False) -> str | None:
    """The problem with an http(s) URL (None: fine). The one URL rule of the project.

    Scheme http or https, a host name or IP (IPv6 in brackets), an optional port 1-65535, an
    optional path of URL-safe characters; user:password@ only where ``need_port`` (proxies).
    No query, fragment, quotes, backslashes, whitespace or control characters: the value
    ends up in apt files and command lines, where any of those would change their meaning.
    """
    if not isinstance(value, str):
        return "must be a URL string"
    match = _URL.fullmatch(value)
    if match is None:
        return "malformed URL"
    host = match["host"]
    if host.startswith("[") and not is_ip(host[1:-1]):
        return "malformed IPv6 address"
    port = match["port"]
    if port is not None and not 1 <= int(port) <= 65535:
        return "port out of range"
    if need_port and port is None:
        return "a proxy URL needs a port"
    if match["userinfo"] and not need_port:
        return "credentials do not belong in a repository URL"
    return None


def http_url(proxy: bool = False) -> Rule:
    allowed = ("http(s)://[user:password@]host:port" if proxy else
               "an http(s)://host[:port][/path] URL (no quotes, spaces, query or fragment)")
    return Rule(allowed, lambda v: url_problem(v, need_port=proxy))
