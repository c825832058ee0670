"""What the roles' execution-time callbacks (``FunctionCommand``) use to act on a host.

A callback runs when pyinfra executes the operation, not when it plans it: it is how a role
moves a secret between hosts through this machine's memory only (the MUNGE key, a kubeadm
bootstrap token), or reads what a package installed by this very run prints. Commands run
without printing their output (pyinfra prints a command's output only when asked to), and a
file goes up from memory, never from this machine's disk.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

from pyinfra.api import StringCommand

from gpuinfra.errors import GpuinfraError


def sudo_args(target: Any) -> dict[str, Any]:
    """``{"_sudo": True}`` when the run (or the host's data) uses sudo."""
    sudo = target.data.get("_sudo", target.state.config.SUDO)
    return {"_sudo": True} if sudo else {}


def run(target: Any, command: StringCommand, what: str) -> str:
    """``command``'s stdout on ``target`` (never printed); GpuinfraError naming ``what`` and
    the host when it fails (its stderr joined, which must not hold secrets)."""
    ok, output = target.run_shell_command(command, print_output=False, print_input=False,
                                          **sudo_args(target))
    if not ok:
        raise GpuinfraError(f"{what} failed on {target.name}: {output.stderr.strip()}")
    return output.stdout


def put_text(target: Any, text: str, path: str, what: str) -> None:
    """``text`` uploaded to ``path`` on ``target`` from memory."""
    if not target.put_file(BytesIO(text.encode()), path, **sudo_args(target)):
        raise GpuinfraError(f"{what}: cannot write {path} on {target.name}")
