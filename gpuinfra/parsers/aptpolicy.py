"""`apt-cache policy PKG...`: the versions a host's apt lists, read before a pinned install.

Shape (fixture tests/fixtures/apt/apt-cache-policy-bookworm-nvidia-driver-set.txt)::

    nvidia-smi:
      Installed: (none)
      Candidate: 535.309.01-0+deb12u1
      Version table:
         535.309.01-0+deb12u1 500
            500 http://security.debian.org/debian-security bookworm-security/non-free ...
     *** 535.261.03-1 500
            500 http://deb.debian.org/debian bookworm/non-free amd64 Packages

A package apt does not know prints no block (its "Unable to locate" note goes to stderr).

Why: the archive moves (Ubuntu's noble-updates stopped listing the real 535-server build, see
gpuinfra.knowledge.packages); a pin that no longer resolves would fail halfway through a
deploy. :func:`pin_problems` says, before any change, which pinned versions the host's apt
does not list and what it lists instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "apt-cache policy"

_PACKAGE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]*)(?::[a-z0-9]+)?:$")
_FIELD = re.compile(r"^\s+(?P<key>Installed|Candidate): (?P<value>\S+)$")
_VERSION = re.compile(r"^\s+(?:\*\*\* )?(?P<version>\S+) (?P<priority>-?\d+)$")
_ORIGIN = re.compile(r"^\s+-?\d+ \S")


@dataclass(frozen=True)
class PackagePolicy:
    """One package: installed and candidate versions (None for "(none)"), listed versions."""

    installed: str | None
    candidate: str | None
    versions: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"installed": self.installed, "candidate": self.candidate,
                "versions": list(self.versions)}


def parse_apt_policy(text: str) -> dict[str, PackagePolicy]:
    """Package name -> :class:`PackagePolicy`; ParseError for text that is not this output."""
    result: dict[str, PackagePolicy] = {}
    name: str | None = None
    fields: dict[str, str | None] = {}
    versions: list[str] = []

    def close() -> None:
        if name is not None:
            result[name] = PackagePolicy(fields.get("Installed"), fields.get("Candidate"),
                                         tuple(versions))

    for lineno, line in enumerate(clean_lines(text), start=1):
        if not line.strip() or line.strip() == "Version table:":
            continue
        if (package := _PACKAGE.match(line)) is not None:
            close()
            name, fields, versions = package["name"], {}, []
        elif name is not None and (field := _FIELD.match(line)) is not None:
            fields[field["key"]] = None if field["value"] == "(none)" else field["value"]
        elif name is not None and _ORIGIN.match(line):
            continue
        elif name is not None and (version := _VERSION.match(line)) is not None:
            versions.append(version["version"])
        else:
            raise ParseError(SOURCE, f"unexpected line {line.strip()[:60]!r}", lineno)
    close()
    return result


def pin_problems(policy: Mapping[str, Any], pinned: Mapping[str, str]) -> list[str]:
    """For each ``name -> version`` apt lists other versions of but not this one: what it lists.

    ``policy`` is :func:`parse_apt_policy`'s result or its JSON. A package apt lists no version
    of is not judged (its archive component is enabled later in the run, or the lists are not
    fetched yet): apt itself will then name it.
    """
    problems = []
    for name, version in pinned.items():
        entry = policy.get(name)
        data = entry.to_json() if isinstance(entry, PackagePolicy) else entry
        if not data or not data.get("versions"):
            continue
        if version not in data["versions"]:
            problems.append(f"{name}={version}: apt lists {', '.join(data['versions'])} "
                            f"(candidate {data.get('candidate') or 'none'})")
    return problems
