"""Templates of the roles: templates/<role>/<target path>.j2, rendered to text at plan time.

Rendering here (not with files.template) lets a role check the text before it is installed
(the slurm role has Slurm itself judge a staged copy) and tests render exactly the same text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
_ENV = Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined,
                   trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def render(role: str, target: str, **context: Any) -> str:
    """``templates/<role><target>.j2`` rendered with ``context`` (unknown names raise)."""
    return _ENV.get_template(f"{role}{target}.j2").render(**context)
