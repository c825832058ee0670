"""The files gpuinfra writes, as data: which template renders each, and what it is given.

The library decides what a file says (:class:`FileText`: a template's name and the typed
values it renders); the deploy layer renders it (gpuinfra_deploy/templates: one engine, the
site's own templates first). So the library stays pure and each file's wording lives in one
template an operator can read and override.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Block(str):
    """A value that may span lines (a whole section built from data), inserted as it is.
    Every other value refuses a line break: it would add lines to the file."""


@dataclass(frozen=True)
class FileText:
    """A file's text as data: ``template`` (``systemd/unit.j2``,
    ``slurm/etc/slurm/slurm.conf.j2``: see templates/README.md) rendered with ``context``."""

    template: str
    context: Mapping[str, Any] = field(default_factory=dict)
