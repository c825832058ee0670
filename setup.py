"""The packages the wheel ships; everything else is in pyproject.toml.

The roles live in the repository's ``roles/`` (one folder per role, as an Ansible user expects
them) and install as the ``gpuinfra_roles`` package, so every installed package carries the
project's prefix. A new role folder is found here: nothing to list.
"""

from setuptools import find_packages, setup

ROLES_FOLDER = "roles"

setup(
    package_dir={"gpuinfra_roles": ROLES_FOLDER},
    packages=[
        *find_packages(include=["gpuinfra", "gpuinfra.*", "gpuinfra_*", "gpuinfra_*.*"]),
        "gpuinfra_roles",
        *(f"gpuinfra_roles.{name}" for name in find_packages(ROLES_FOLDER)),
    ],
)
