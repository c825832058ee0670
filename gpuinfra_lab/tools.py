"""The Prometheus command-line tools the tests run (promtool, amtool), from Debian's packages.

    .venv/bin/python -m gpuinfra_lab.tools      # `make test` runs it before pytest

Each tool comes from the Debian package that ships it (``apt-get download``), unpacked with
``dpkg-deb -x`` into ``.lab/tools/`` of this checkout: never installed, since installing
``prometheus`` would also start a Prometheus server on this machine. A tool already on PATH is
used as it is. ``apt-get update`` runs once when apt's lists do not know the package yet.
Exit 0 with each tool's path, 1 naming what failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS_DIR = REPO / ".lab" / "tools"
PACKAGES = {"promtool": "prometheus", "amtool": "prometheus-alertmanager"}


def tool_path(name: str) -> Path | None:
    """Where ``name`` is: on PATH, else unpacked under .lab/tools; None when neither."""
    found = shutil.which(name)
    if found:
        return Path(found)
    unpacked = TOOLS_DIR / "usr" / "bin" / name
    return unpacked if unpacked.is_file() else None


def _download(package: str, folder: Path) -> Path:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for attempt in (1, 2):
        run = subprocess.run(["apt-get", "download", package], cwd=folder, capture_output=True,
                             text=True, check=False, env=env)
        debs = sorted(folder.glob(f"{package}_*.deb"))
        if run.returncode == 0 and debs:
            return debs[-1]
        if attempt == 1:  # apt's lists may not know the package yet
            subprocess.run(["apt-get", "update"], capture_output=True, check=False, env=env)
    raise RuntimeError(f"apt-get download {package} failed: {run.stderr.strip()[-300:]}")


def ensure(names: tuple[str, ...] = tuple(PACKAGES)) -> dict[str, Path]:
    """Each tool's path, unpacking its package first where it is missing."""
    missing = [n for n in names if tool_path(n) is None]
    if missing and shutil.which("apt-get") is None:
        raise RuntimeError(f"{', '.join(missing)} missing and no apt-get to fetch them")
    for name in missing:
        with tempfile.TemporaryDirectory() as temp:
            deb = _download(PACKAGES[name], Path(temp))
            TOOLS_DIR.mkdir(parents=True, exist_ok=True)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(TOOLS_DIR)], check=True)
    paths = {n: tool_path(n) for n in names}
    absent = [n for n, p in paths.items() if p is None]
    if absent:
        raise RuntimeError(f"{', '.join(absent)} not found after unpacking")
    return {n: p for n, p in paths.items() if p is not None}


def main() -> int:
    try:
        paths = ensure()
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"gpuinfra tools: {exc}", file=sys.stderr)
        return 1
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
