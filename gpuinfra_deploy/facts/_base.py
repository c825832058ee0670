"""What every fact module shares: the quiet command wrapper and parsing through gpuinfra's
parsers (a successful command's output the parser cannot read fails the host).
pyinfra facts about GPU hosts, read through the gpuinfra parsers.

Hardware facts (for roles such as Slurm's gres.conf or VFIO binding, and for the deploy's own
decisions) return the parser's plain data (``to_json()``), and ``{}`` when the tool is absent
(``requires_command``) or fails: no driver loaded, no GPU ("No devices were found"), a lab
stand-in refusing a query. Only the output of a *successful* command is parsed; output the
parser cannot read fails the host with the parser's message (FactProcessError), since acting on
a half-read topology would be worse.

Every command runs as ``out=$(CMD 2>/dev/null) && printf '%s\\n' "$out"; true``: a failing tool
prints nothing and the fact command itself always succeeds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyinfra.api.exceptions import FactProcessError

from gpuinfra.errors import ParseError

GPU_FIELDS = ["index", "name", "uuid", "pci.bus_id", "driver_version", "persistence_mode",
              "memory.total"]


def quiet(command: str) -> str:
    """``command``'s stdout when it succeeds, nothing when it fails; always exits 0."""
    return f'out=$({command} 2>/dev/null) && printf \'%s\\n\' "$out"; true'


def parsed(parse: Callable[..., Any], output: list[str], **kwargs: Any) -> dict[str, Any]:
    try:
        return parse("\n".join(output), **kwargs).to_json()
    except ParseError as exc:
        raise FactProcessError(str(exc)) from exc
