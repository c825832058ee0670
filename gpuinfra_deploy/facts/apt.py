"""Facts about apt: held packages, and what apt would install (apt-cache policy).
"""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from gpuinfra.apt.keys import parse_show_keys
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


class KeyringKeys(FactBase):
    """The primary keys of the keyring ``path``, read with gpg on the node:
    ``{"gpg": bool (False: no gpg to read it), "now": the node's clock (Unix seconds),
    "keys": [{"fingerprint": "40 hex", "expires": seconds or None}, ...]}``."""

    def command(self, path: str) -> str:
        return (f"echo now:$(date +%s); if command -v gpg >/dev/null 2>&1; then "
                f"gpg --batch --with-colons --show-keys {shlex.quote(path)} 2>/dev/null; "
                "else echo gpuinfra:no-gpg; fi; true")

    def process(self, output: list[str]) -> dict[str, Any]:
        now = next((int(line[4:]) for line in output
                    if line.startswith("now:") and line[4:].isascii() and line[4:].isdigit()),
                   0)
        keys = parse_show_keys("\n".join(output))
        return {"gpg": "gpuinfra:no-gpg" not in output, "now": now,
                "keys": [{"fingerprint": k.fingerprint, "expires": k.expires} for k in keys]}
