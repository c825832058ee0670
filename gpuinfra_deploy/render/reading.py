"""The files one operation writes, read from its commands (the uploads and the commands after
each: see gpuinfra_deploy/render/__init__.py), and the files of a whole host once every
operation is read."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyinfra.api import FileUploadCommand

from gpuinfra_deploy.plan import raw_command
from gpuinfra_deploy.render.model import Render, RenderedFile

_REFUSED = re.compile(r"gpuinfra: (.+?) refused the new configuration")
_INSTALL = re.compile(r"^cp (\S+) (\S+) && chmod (\S+) \2 && mv -f \2 (\S+)$")
_SPLICE = re.compile(r"mv -f \S+ (\S+) && rm -f (\S+)$")
_CHMOD = re.compile(r"^chmod (?:-R )?(\S+) (\S+)$")
_CHOWN = re.compile(r"^(chown|chgrp) (?:-R )?(\S+) (\S+)$")
_REDIRECT = re.compile(r"(?<![0-9&>])>\s*(/[^\s;&|)]+)")
_MADE_ON_HOST = {"secret_files": "paths", "copied_file": "dest", "filled_file": "dest",
                 "copy_from_head": "copies"}


def _content(src: Any) -> bytes:
    if hasattr(src, "getvalue"):
        value = src.getvalue()
        return value if isinstance(value, bytes) else value.encode()
    return Path(src).read_bytes()


def files_of_op(host: str, op: str, commands: Sequence[Any], func: Any,
                kwargs: Mapping[str, Any]) -> list[RenderedFile]:
    """The files one operation's commands write (see the module docstring)."""
    raws = [raw_command(c) for c in commands]
    judge = next((m.group(1).replace("'\"'\"'", "'") for r in raws
                  if (m := _REFUSED.search(r))), None)
    check = next((r for r in raws if _REFUSED.search(r)), None)
    found: list[RenderedFile] = []
    for i, command in enumerate(commands):
        if not isinstance(command, FileUploadCommand):
            continue
        dest = command.dest
        data = _content(command.src)
        later = raws[i + 1:]
        stage = dest.rsplit("/", 1)[0]
        installed = next((m for r in later if (m := _INSTALL.match(r)) and m.group(1) == dest),
                         None)
        spliced = next((m for r in later if (m := _SPLICE.search(r)) and m.group(2) == dest),
                       None)
        if installed:
            found.append(RenderedFile(host, installed.group(4), "file", op, data,
                                      mode=installed.group(3), judge=judge, check=check,
                                      stage=stage))
        elif spliced:
            found.append(RenderedFile(host, spliced.group(1), "block", op, data))
        elif any(r.split()[:2] == ["rm", "-rf"] and stage in r.split() for r in later):
            found.append(RenderedFile(host, dest, "checked-only", op, data, judge=judge,
                                      check=check, stage=stage))
        else:
            entry = RenderedFile(host, dest, "file", op, data)
            for r in later:
                if (m := _CHMOD.match(r)) and m.group(2).strip("'") == dest:
                    entry.mode = m.group(1)
                elif (m := _CHOWN.match(r)) and m.group(3).strip("'") == dest:
                    who = m.group(2)
                    if m.group(1) == "chgrp":
                        entry.group = who
                    else:
                        entry.owner, _, group = who.partition(":")
                        entry.group = group or None
            found.append(entry)
    uploaded = {f.path for f in found} | {f"{f.stage}" for f in found if f.stage}
    for r in raws:
        for path in _REDIRECT.findall(r):
            path = path.strip("'\"")
            if not path.startswith("/dev/") and path not in uploaded:
                found.append(RenderedFile(host, path, "command", op, command=r))
    name = getattr(func, "__name__", "")
    if name in _MADE_ON_HOST and getattr(func, "__module__", "").startswith("gpuinfra_deploy"):
        value = kwargs.get(_MADE_ON_HOST[name])
        paths = ([value] if isinstance(value, str)
                 else [getattr(c, "dest", c) for c in value or ()])
        found += [RenderedFile(host, str(p), "made-on-host", op) for p in paths]
    return found


def _last_writes(files: list[RenderedFile]) -> list[RenderedFile]:
    """A file two operations write (the mirror's sources.list, then its components) ends as
    the last one writes it: one entry, naming every operation that wrote it."""
    last: dict[str, RenderedFile] = {}
    for f in files:
        if f.kind == "file":
            earlier = last.get(f.path)
            if earlier is not None:
                f.op = f"{earlier.op}; then {f.op}"
                f.facts = tuple(sorted({*earlier.facts, *f.facts}))
                f.assumed = tuple(sorted({*earlier.assumed, *f.assumed}))
            last[f.path] = f
    return [f for f in files if f.kind != "file" or last[f.path] is f]


def _share_dependencies(result: Render) -> None:
    """A file the run built once for every host (``Site.once``: slurm.conf) got its facts
    asked by the first host only: the same path with the same bytes shares them."""
    deps: dict[tuple[str, str | None], tuple[set[str], set[str]]] = {}
    for f in (f for files in result.files.values() for f in files):
        facts, assumed = deps.setdefault((f.path, f.sha256), (set(), set()))
        facts.update(f.facts)
        assumed.update(f.assumed)
    for f in (f for files in result.files.values() for f in files):
        facts, assumed = deps[(f.path, f.sha256)]
        f.facts, f.assumed = tuple(sorted(facts)), tuple(sorted(assumed))
