"""Where the deploy and the verify suite keep what they learned of each host between runs
(the commands they sent it: gpuinfra_deploy/pyinfra_patches/fact_batch.py,
gpuinfra_verify/batch.py): one folder per inventory file under the user's cache folder,
private to the user (0700, files 0600), each file written whole and then renamed (a run cut
short leaves the last good one)."""

from __future__ import annotations

import hashlib
import json
import os
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
    """``data`` as JSON at ``path``: the folder made 0700, the file 0600, written whole to a
    temporary name and renamed over the old one."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=1)
        out.write("\n")
    temporary.replace(path)
