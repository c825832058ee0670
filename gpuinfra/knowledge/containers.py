"""Where the job container runtimes come from: release packages pinned by version, and what is
known of their checksums.

Sources (read 2026-11, not reachable from this project's machines: no download was checked):
- Enroot: https://github.com/NVIDIA/enroot/releases, assets ``enroot_<v>-1_amd64.deb`` and
  ``enroot+caps_<v>-1_amd64.deb`` (the +caps package gives the enroot binaries the file
  capabilities unprivileged imports need); NVIDIA's README installs both with ``apt install``.
- Pyxis: https://github.com/NVIDIA/pyxis, a SPANK plugin built from its source tag
  (``archive/refs/tags/v<v>.tar.gz``) with ``make`` against Slurm's headers (``libslurm-dev``);
  NVIDIA publishes no binary package. ``make install prefix=/usr/local`` puts the plugin at
  ``/usr/local/lib/slurm/spank_pyxis.so``.
- Apptainer: https://github.com/apptainer/apptainer/releases, asset
  ``apptainer_<v>_amd64.deb``.

Checksums: none is recorded here, because none could be verified from this project (GitHub is
not reachable, and a value copied from a third party is not a verification). The site gives the
SHA-256 of each file it deploys (``job_containers_*_sha256``): the spec gate refuses a runtime
without them, and the download is refused when the file differs.
"""

from __future__ import annotations

ENROOT_DEFAULT_VERSION = "3.5.0"
PYXIS_DEFAULT_VERSION = "0.20.0"
APPTAINER_DEFAULT_VERSION = "1.3.6"

ENROOT_PACKAGES = ("enroot", "enroot+caps")


def enroot_url(package: str, version: str) -> str:
    """The release asset of an Enroot package (``enroot`` or ``enroot+caps``)."""
    return (f"https://github.com/NVIDIA/enroot/releases/download/v{version}/"
            f"{package}_{version}-1_amd64.deb")


def enroot_deb_version(version: str) -> str:
    """The Debian version the Enroot packages carry (``dpkg -l``): ``<v>-1``."""
    return f"{version}-1"


def pyxis_url(version: str) -> str:
    return f"https://github.com/NVIDIA/pyxis/archive/refs/tags/v{version}.tar.gz"


def apptainer_url(version: str) -> str:
    return (f"https://github.com/apptainer/apptainer/releases/download/v{version}/"
            f"apptainer_{version}_amd64.deb")
