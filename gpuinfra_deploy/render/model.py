"""What a render is: the files each host gets (:class:`RenderedFile`), per host, with the
commands and operations they came from (:class:`Render`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RenderedFile:
    """One file a host gets: ``kind`` file (rendered in full), block (the lines the deploy
    keeps between its markers in ``path``), checked-only (staged for a check, never kept),
    command (written by a shell command) or made-on-host (a secret, never seen here)."""

    host: str
    path: str
    kind: str
    op: str
    content: bytes | None = None
    mode: str | None = None
    owner: str | None = None
    group: str | None = None
    judge: str | None = None  # the consumer that judges it on the host before it goes live
    check: str | None = None  # the check command (staged paths under ``stage``)
    stage: str | None = None
    facts: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()
    local_check: str = ""  # what was judged here: "passed: ...", "refused: ...", "not ..."
    command: str | None = None

    @property
    def sha256(self) -> str | None:
        return hashlib.sha256(self.content).hexdigest() if self.content is not None else None

    def manifest(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"path": self.path, "kind": self.kind, "operation": self.op}
        for key in ("mode", "owner", "group", "sha256", "judge", "local_check", "command"):
            value = getattr(self, key)
            if value:
                entry[key] = value
        if self.content is not None:
            entry["bytes"] = len(self.content)
        entry["facts"] = list(self.facts)
        entry["assumed_facts"] = list(self.assumed)
        return entry


@dataclass
class Render:
    files: dict[str, list[RenderedFile]] = field(default_factory=dict)
    facts_from: dict[str, str] = field(default_factory=dict)  # host -> where its facts came from
    # host -> the commands of its operations, in order (shell text; file uploads as their repr)
    commands: dict[str, list[str]] = field(default_factory=dict)
    # host -> its operations in order: (name, its commands as in ``commands``)
    ops: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)

    def written(self) -> Iterable[RenderedFile]:
        return (f for files in self.files.values() for f in files
                if f.kind in ("file", "block") and f.content is not None)
