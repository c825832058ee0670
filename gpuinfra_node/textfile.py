"""node_exporter's textfile collector files, written whole: what the node-side programs share
(the GPU collector, the head's Slurm node states: roles/monitoring)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file in the same folder and a rename, so
    node_exporter never reads half a file; mode 0644."""
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
