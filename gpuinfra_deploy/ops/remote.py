"""What the roles' execution-time callbacks (``FunctionCommand``) use to act on a host.

A callback runs when pyinfra executes the operation, not when it plans it: it is how a role
moves a secret between hosts through this machine's memory only (a kubeadm bootstrap token),
or reads what a package installed by this very run prints. Commands run without printing
their input or output. A file goes up as a command's standard input, written by that command
under umask 0077 straight into its target path (mode 0600 from its first byte): the MUNGE
key's standard (roles/munge), which every planned upload of a run also follows
(gpuinfra_deploy/pyinfra_patches/uploads.py replaces pyinfra's transfer, which under sudo
stages the file in /tmp where other users can read it).
"""

from __future__ import annotations

from typing import Any

from pyinfra.api import StringCommand

from gpuinfra.errors import GpuinfraError


def sudo_args(target: Any) -> dict[str, Any]:
    """``{"_sudo": True}`` when the run (or the host's data) uses sudo."""
    sudo = target.data.get("_sudo", target.state.config.SUDO)
    return {"_sudo": True} if sudo else {}


def run(target: Any, command: StringCommand, what: str, stdin: str | None = None) -> str:
    """``command``'s stdout on ``target`` (neither it nor ``stdin`` is printed); GpuinfraError
    naming ``what`` and the host when it fails (its stderr joined, which must not hold
    secrets)."""
    extra = {"_stdin": stdin} if stdin is not None else {}
    ok, output = target.run_shell_command(command, print_output=False, print_input=False,
                                          **extra, **sudo_args(target))
    if not ok:
        raise GpuinfraError(f"{what} failed on {target.name}: {output.stderr.strip()}")
    return output.stdout


def write_command(path: str) -> StringCommand:
    """The command that writes its standard input to ``path`` (0600, created by root under
    umask 0077; the parent directory must exist)."""
    return StringCommand("umask", "0077", "&&", "cat", ">", path)


def put_text(target: Any, text: str, path: str, what: str) -> None:
    """``text`` written to ``path`` on ``target`` (mode 0600) from this machine's memory, as a
    command's standard input."""
    run(target, write_command(path), f"writing {what} to {path}", stdin=text)
