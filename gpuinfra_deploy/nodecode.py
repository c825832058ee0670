"""The code the roles ship to a node for programs that run there (the health check, the GPU
metrics collector): the ``gpuinfra`` library and ``gpuinfra_node`` (its runner), as one zip
Python imports from (zipimport). The nodes run the very rules the deploy judged with. And
the few source files a pod runs as they are (:func:`sources`: the health taint controller).
"""

from __future__ import annotations

import io
import zipfile
from functools import lru_cache
from pathlib import Path

import gpuinfra

ROOT = Path(gpuinfra.__file__).resolve().parents[1]
PACKAGES = ("gpuinfra", "gpuinfra_node")
ZIP_NAME = "gpuinfra.zip"
# The entries carry this date: the same sources give the same bytes on every deploy (a second
# deploy changes nothing).
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


@lru_cache(maxsize=1)
def node_zip() -> bytes:
    """:data:`PACKAGES` as a zip, byte for byte the same for the same sources (sorted entries,
    a fixed date and mode)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as packed:
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py")):
                info = zipfile.ZipInfo(path.relative_to(ROOT).as_posix(), ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                packed.writestr(info, path.read_bytes())
    return out.getvalue()


@lru_cache(maxsize=32)
def shipped(path: Path) -> bytes:
    """The bytes of a program file a role ships as it is (the health check's program.py, the
    GPU collector), read once per process: every host uploads the same file, and a
    10,000-host plan held a copy per host (hundreds of MiB)."""
    return Path(path).read_bytes()


def sources(paths: tuple[str, ...]) -> dict[str, str]:
    """The text of each of ``paths`` (relative to the repository: ``gpuinfra/health/taint.py``),
    for code a role ships as it is (the health taint controller's ConfigMap)."""
    return {path: (ROOT / path).read_text() for path in paths}
