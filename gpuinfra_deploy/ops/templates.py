"""A role's templates: ``<role folder>/templates/<target path>.j2``, rendered to text at plan
time.

Rendering here (not with files.template) lets a role check the text before it is installed
(the slurm role has Slurm itself judge a staged copy) and tests render exactly the same text.
The templates live beside the role that writes them, so they travel with it (in the wheel too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from gpuinfra.header import HEADER


class RoleTemplates:
    """The templates of the role whose ``__init__.py`` is ``role_file``.

    ``RoleTemplates(__file__).render("/etc/slurm/slurm.conf", **context)`` renders
    ``templates/etc/slurm/slurm.conf.j2`` beside it; an unknown name in the template raises.
    Every template starts with ``{{ header }}``: the one "managed by" line (gpuinfra.header).
    """

    def __init__(self, role_file: str) -> None:
        self.folder = Path(role_file).resolve().parent / "templates"
        self._env = Environment(loader=FileSystemLoader(str(self.folder)),
                                undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                                keep_trailing_newline=True)
        self._env.globals["header"] = HEADER.rstrip("\n")  # the template ends the line

    def render(self, target: str, **context: Any) -> str:
        return self._env.get_template(f"{target.lstrip('/')}.j2").render(**context)
