"""Facts about apt: held packages, and what apt would install (apt-cache policy).
"""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from gpuinfra.errors import ParseError
from gpuinfra.parsers.aptpolicy import parse_apt_policy
from gpuinfra.parsers.system import (
    parse_held_packages,
)
from gpuinfra_deploy.facts._base import quiet


class HeldPackages(FactBase):
    """Packages on hold (``apt-mark showhold``): a sorted list of names."""

    default = list

    def requires_command(self) -> str:
        return "apt-mark"

    def command(self) -> str:
        return quiet("apt-mark showhold")

    def process(self, output: list[str]) -> list[str]:
        return parse_held_packages("\n".join(output))


class AptPolicy(FactBase):
    """``apt-cache policy PKG...``: ``{"nvidia-smi": {"installed", "candidate", "versions"}}``;
    packages apt does not know are absent. ``{}`` without apt."""

    default = dict

    def requires_command(self, packages: list[str]) -> str:
        return "apt-cache"

    def command(self, packages: list[str]) -> str:
        return quiet("apt-cache policy " + " ".join(shlex.quote(p) for p in packages))

    def process(self, output: list[str]) -> dict[str, Any]:
        try:
            parsed = parse_apt_policy("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc
        return {name: entry.to_json() for name, entry in parsed.items()}
