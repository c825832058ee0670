"""The packages the wheel ships; everything else is in pyproject.toml.

The roles live in the repository's ``roles/`` (one folder per role, as an Ansible user expects
them) and install as the ``gpuinfra_roles`` package, so every installed package carries the
project's prefix. A new role folder is found here: nothing to list.

The deploy's entry files (``deploy.py``, ``config.py``) stay at the top of the repository;
the build copies them into ``gpuinfra_deploy/entry_files/`` so an installed gpuinfra deploys
a site kept outside a checkout (gpuinfra_deploy/entry.py).
"""

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROLES_FOLDER = "roles"
ENTRY_FILES = ("deploy.py", "config.py")


class BuildWithEntryFiles(build_py):
    """build_py, and the top-level entry files copied into the built gpuinfra_deploy."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib, "gpuinfra_deploy", "entry_files")
        target.mkdir(parents=True, exist_ok=True)
        for name in ENTRY_FILES:
            shutil.copyfile(Path(__file__).resolve().parent / name, target / name)

setup(
    cmdclass={"build_py": BuildWithEntryFiles},
    package_dir={"gpuinfra_roles": ROLES_FOLDER},
    packages=[
        *find_packages(include=["gpuinfra", "gpuinfra.*", "gpuinfra_*", "gpuinfra_*.*"]),
        "gpuinfra_roles",
        *(f"gpuinfra_roles.{name}" for name in find_packages(ROLES_FOLDER)),
    ],
)
