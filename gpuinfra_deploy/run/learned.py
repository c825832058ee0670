"""Where the deploy and the verify suite keep what they learned of each host between runs
(the commands they sent it: gpuinfra_deploy/pyinfra_patches/fact_batch.py,
gpuinfra_verify/batch.py): one folder per inventory file under the user's cache folder,
private to the user (0700, files 0600), each file written whole and then renamed (a run cut
short leaves the last good one).

A learned command is run on the host at the next run, so a list is trusted only when its file
and folder are the user's own and writable by nobody else (as ssh's StrictModes asks of
authorized_keys); any other list is not run, and the run says which path and the fix."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def learned_folder(inventory: str, kind: str, override: str | None) -> Path:
    """``$override`` if set, else ``$XDG_CACHE_HOME`` (else ``~/.cache``)/gpuinfra/``kind``;
    then one folder per inventory file (its name and a digest of its resolved path)."""
    resolved = Path(inventory).resolve()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = Path((os.environ.get(override) if override else None) or cache / "gpuinfra" / kind)
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    return base / f"{resolved.stem}-{digest}"


def write_private_json(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``: the folder made 0700 (an older one of the user's own,
    made looser, is tightened), the file 0600, written whole to a temporary name and renamed
    over the old one."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = path.parent.stat()
    if folder.st_uid == os.getuid() and folder.st_mode & 0o077:
        path.parent.chmod(0o700)
    temporary = path.with_name(f"{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=1)
        out.write("\n")
    temporary.replace(path)


def file_name(host: str) -> str:
    """The file of ``host``'s list: its name made safe for a path (an inventory name may hold
    any character), and a digest of the name, so two names made alike stay apart."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in host)
    return f"{safe}-{hashlib.sha256(host.encode()).hexdigest()[:8]}.json"


def private(path: Path) -> bool:
    """``path`` is the user's own and writable by nobody else."""
    try:
        info = path.stat()
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


@dataclass
class LearnedLists:
    """The learned lists of one folder: a host's own, or (for a host never seen) the list of
    a host of the same kind, the folder read once for those."""

    folder: Path
    untrusted: dict[str, str] = field(default_factory=dict)  # path -> what to say, once
    _by_kind: dict[str, list[str]] | None = None

    def own(self, host: str) -> list[str] | None:
        """``host``'s list from its last run; None when there is none or it is not used."""
        found = self._load(self.folder / file_name(host))
        return None if found is None else found[1]

    def of_kind(self, kind: str) -> list[str]:
        """The list of a host of ``kind`` (the first by file name); [] when none."""
        if self._by_kind is None:
            self._by_kind = {}
            for path in sorted(self.folder.glob("*.json")):
                found = self._load(path)
                if found is not None:
                    self._by_kind.setdefault(found[0], found[1])
        return self._by_kind.get(kind, [])

    def save(self, host: str, kind: str, commands: list[str]) -> None:
        write_private_json(self.folder / file_name(host),
                           {"host": host, "kind": kind, "commands": commands})

    def _load(self, path: Path) -> tuple[str, list[str]] | None:
        if not path.is_file():
            return None
        loose = [str(p) for p in (path.parent, path) if not private(p)]
        if loose:
            self.untrusted.setdefault(
                loose[0], f"{loose[0]} is not yours alone (another user owns it or may write "
                "it): the commands learned in it were not run; fix: delete it (the next run "
                "learns again), or chown it to you and chmod go-w")
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("commands"), list):
            return None
        return str(data.get("kind", "")), [c for c in data["commands"] if isinstance(c, str)]
