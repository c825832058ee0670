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


def when_up(service: str, command: str, wait_s: int = 60, down: str = "") -> str:
    """``command``'s stdout when it succeeds; while it fails and ``service`` is active, tried
    again each second for up to ``wait_s`` seconds (a daemon just started, after a reboot or a
    controller's takeover, answers a few seconds later: a fact read then would plan a change
    that is none); then ``down`` (nothing by default). Always exits 0."""
    give_up = f"printf '%s\\n' {down}; exit 0" if down else "exit 0"
    return (f"i=0; until out=$({command} 2>/dev/null); do "
            f"systemctl is-active -q {service} && [ $i -lt {wait_s} ] || {{ {give_up}; }}; "
            "i=$((i+1)); sleep 1; done; printf '%s\\n' \"$out\"")


def parsed(parse: Callable[..., Any], output: list[str], **kwargs: Any) -> dict[str, Any]:
    try:
        return parse("\n".join(output), **kwargs).to_json()
    except ParseError as exc:
        raise FactProcessError(str(exc)) from exc
