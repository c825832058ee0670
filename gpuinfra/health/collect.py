"""What one command of a reading gave (:class:`Output`), and the limits its runner keeps.

The runner itself is the health check's (roles/health/program.py: every command at
once, in threads, each with a timeout); the library stays pure. A command that is missing,
fails or hangs is an :class:`Output` with ``ok`` False and the reason, never an exception: the
judge says "cannot read X" for it, and the other commands still count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# Every command of a reading must end well inside Slurm's 60 s limit on HealthCheckProgram
# (slurm.conf(5): "killed if it does not terminate normally within 60 seconds").
TIMEOUT_S = 20.0
# The environment of a program Slurm starts has no search path (prolog_epilog.html: "these
# programs do not have a search path set"): the reading sets its own.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Output:
    """What one command gave: ``ok`` (exit 0), its exit status, stdout, and why it failed."""

    ok: bool
    rc: int | None = 0
    text: str = ""
    error: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Output:
        return cls(bool(raw.get("ok")), raw.get("rc"), str(raw.get("text", "")),
                   str(raw.get("error", "")), float(raw.get("seconds", 0.0)))
