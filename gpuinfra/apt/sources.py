"""Enable archive components (Debian's non-free, Ubuntu's restricted...) in apt source files.

Both formats apt reads are handled, and nothing already there is lost:
- one-line ``/etc/apt/sources.list``: ``deb [options] URI SUITE COMPONENT...``;
- deb822 ``*.sources`` stanzas: ``Types:``, ``URIs:``, ``Suites:``, ``Components:``.

Only entries of the distribution release itself are touched: a suite equal to the codename or
``<codename>-<pocket>`` (``bookworm``, ``bookworm-updates``, ``bookworm-security``) whose
components include ``main``. Third-party repositories (``cloud-sdk-bookworm main``,
``nodistro main``) are left alone. A component already enabled for the same type, URI and suite
on another line (Ubuntu's default sources.list spreads ``multiverse`` over lines of its own)
counts as enabled, so apt never sees it twice. The functions return the text unchanged when
nothing is missing, so a converged host gets no write.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_TYPES = ("deb", "deb-src")

Key = tuple[str, str, str]  # (type, URI without trailing slash, suite)


@dataclass
class _Entry:
    """One one-line entry: where it is and what it says."""

    line: int
    code: str
    comment: str
    newline: str
    kind: str
    uri: str
    suite: str
    components: list[str]

    @property
    def key(self) -> Key:
        return (self.kind, self.uri.rstrip("/"), self.suite)


def _is_release_suite(suite: str, codename: str) -> bool:
    return suite == codename or suite.startswith(f"{codename}-")


def _parse_one_line(index: int, line: str) -> _Entry | None:
    body, newline = (line[:-1], "\n") if line.endswith("\n") else (line, "")
    code, hash_, comment = body.partition("#")
    tokens = code.split()
    if not tokens or tokens[0] not in _TYPES:
        return None
    rest = tokens[1:]
    if rest and rest[0].startswith("["):  # options: [arch=amd64 signed-by=...]
        while rest and not rest[0].endswith("]"):
            rest = rest[1:]
        rest = rest[1:]
    if len(rest) < 3:
        return None
    return _Entry(index, code, hash_ + comment, newline, tokens[0], rest[0], rest[1], rest[2:])


def enable_one_line(text: str, codename: str, wanted: Sequence[str]) -> str:
    """``text`` (sources.list format) with ``wanted`` added to the release's entries."""
    lines = text.splitlines(keepends=True)
    entries = [e for i, line in enumerate(lines) if (e := _parse_one_line(i, line))]
    have: dict[Key, set[str]] = defaultdict(set)
    for entry in entries:
        have[entry.key].update(entry.components)
    for entry in entries:
        if not _is_release_suite(entry.suite, codename) or "main" not in entry.components:
            continue
        missing = [c for c in wanted if c not in have[entry.key]]
        if not missing:
            continue
        have[entry.key].update(missing)
        tail = f" {entry.comment}" if entry.comment else ""
        lines[entry.line] = f"{entry.code.rstrip()} {' '.join(missing)}{tail}{entry.newline}"
    return "".join(lines)


def _stanzas(lines: list[str]) -> list[list[int]]:
    """Line indices of each deb822 stanza (blank lines separate them)."""
    stanzas: list[list[int]] = [[]]
    for index, line in enumerate(lines):
        if line.strip():
            stanzas[-1].append(index)
        elif stanzas[-1]:
            stanzas.append([])
    return [s for s in stanzas if s]


def _field(lines: list[str], stanza: list[int], name: str) -> tuple[list[int], list[str]] | None:
    """(line indices, words) of field ``name`` in ``stanza``, continuation lines included."""
    for pos, index in enumerate(stanza):
        line = lines[index]
        if line.startswith("#") or line[:1].isspace():
            continue
        key, colon, value = line.partition(":")
        if colon and key.strip().lower() == name.lower():
            indices, words = [index], value.split()
            for more in stanza[pos + 1:]:
                if not lines[more][:1].isspace():
                    break
                indices.append(more)
                words += lines[more].split()
            return indices, words
    return None


def _keys(types: Iterable[str], uris: Iterable[str], suites: Iterable[str]) -> list[Key]:
    return [(t, u.rstrip("/"), s) for t in types for u in uris for s in suites]


def enable_deb822(text: str, codename: str, wanted: Sequence[str]) -> str:
    """``text`` (deb822 ``.sources`` format) with ``wanted`` added to the release's stanzas."""
    lines = text.splitlines(keepends=True)
    parsed = []
    have: dict[Key, set[str]] = defaultdict(set)
    for stanza in _stanzas(lines):
        types, uris, suites, components = (
            _field(lines, stanza, n) for n in ("Types", "URIs", "Suites", "Components"))
        if not (types and uris and suites and components):
            continue
        keys = _keys(types[1], uris[1], suites[1])
        for key in keys:
            have[key].update(components[1])
        parsed.append((suites[1], components, keys))
    for suites, (indices, components), keys in parsed:
        if "main" not in components or not any(_is_release_suite(s, codename) for s in suites):
            continue
        missing = [c for c in wanted if not all(c in have[k] for k in keys)]
        if not missing:
            continue
        for key in keys:
            have[key].update(missing)
        last = lines[indices[-1]]
        newline = "\n" if last.endswith("\n") else ""
        lines[indices[-1]] = last.rstrip("\n").rstrip() + " " + " ".join(missing) + newline
    return "".join(lines)


def enable_components(path: str, text: str, codename: str, wanted: Sequence[str]) -> str:
    """Dispatch on the file name: ``*.sources`` is deb822, anything else one-line."""
    if path.endswith(".sources"):
        return enable_deb822(text, codename, wanted)
    return enable_one_line(text, codename, wanted)
