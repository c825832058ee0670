"""Every file pyinfra uploads over SSH goes through a private path: its standard input.

pyinfra 3.10's ``SSHConnector.put_file`` (connectors/ssh.py), under ``--sudo`` (also
``_doas``, ``_dzdo``, ``_su_user``), sends the file by SFTP as the SSH user to
``/tmp/pyinfra-<sha1(dest)>`` (``Host.get_temp_filename``: the name is predictable from the
destination alone), created with the SSH user's umask (0644 on Debian and Ubuntu), then runs
``cp`` as root and ``rm``. Any local user can read that copy while it exists, or create the
name first (a symlink, a file of their own) and own what root copies into place. Without sudo
the file is written straight to its destination, created 0644 before pyinfra's ``chmod``.
Every ``files.put``, ``files.template``, ``FileUploadCommand`` (gpuinfra's checked files, the
apt proxy file with credentials, root-run boot scripts, /etc/hosts' block) went that way.

:func:`put_file` replaces it for every SSH upload, with or without sudo, with the MUNGE key's
standard (roles/munge): the file goes as the standard input of one command, base64
lines (binary-safe: pyinfra's stdin writer appends a newline to any line without one), never
in the command line, so never in pyinfra's printed command. That command, run as the
operation's user (root under sudo), sets ``umask 077``, decodes into a directory made by
``mktemp -d`` (0700, a random name, owned by that user), copies it onto the destination with
``cp`` as pyinfra does (an existing file keeps its inode, owner and mode; a new one is created
0600: the operation's ``mode``/``user`` arguments then apply as before), and removes the
directory, also when the copy failed. No other user can read the content or choose a name on
its way. Remote needs: ``mktemp``, ``base64``, ``cp`` (coreutils).

Installed by config.py and by :meth:`gpuinfra_deploy.run.role.Role.apply` (another project's
deploy has no config.py). README.md here lists the patch and its tests.
"""

from __future__ import annotations

import base64
from typing import Any

from pyinfra.api import QuoteString, StringCommand
from pyinfra.api.util import get_file_io
from pyinfra.connectors.ssh import SSHConnector

_INSTALLED: dict[str, Any] = {}

# $1 is the destination. The directory goes whatever happens after it was made.
SCRIPT = ('umask 077 && stage="$(mktemp -d)" && { base64 -d > "$stage/upload" && '
          'cp "$stage/upload" "$1"; rc=$?; rm -rf "$stage"; exit $rc; }')


def upload_command(remote_filename: str) -> StringCommand:
    """The command that writes its standard input (base64) to ``remote_filename``."""
    return StringCommand("sh", "-c", QuoteString(SCRIPT), "gpuinfra-upload",
                         QuoteString(remote_filename))


def stdin_lines(filename_or_io: Any) -> list[str]:
    """The content of a local file name or a file object, as base64 lines."""
    with get_file_io(filename_or_io) as file_io:
        if hasattr(file_io, "seek"):
            file_io.seek(0)  # a retried upload reads the same object again
        data = file_io.read()
    if isinstance(data, str):
        data = data.encode()
    return base64.encodebytes(data).decode().splitlines(keepends=True)


def put_file(self: SSHConnector, filename_or_io: Any, remote_filename: str,
             remote_temp_filename: str | None = None, print_output: bool = False,
             print_input: bool = False, **arguments: Any) -> bool:
    """pyinfra's ``SSHConnector.put_file`` through the standard input of one command (see the
    module docstring); ``remote_temp_filename`` is not used: no name is chosen in advance."""
    del remote_temp_filename
    arguments.pop("_stdin", None)
    status, output = self.run_shell_command(
        upload_command(remote_filename), print_output=print_output, print_input=print_input,
        _stdin=stdin_lines(filename_or_io), **arguments)
    if not status:
        stderr = "\n".join(output.stderr_lines) if output is not None else ""
        raise OSError(f"gpuinfra: upload to {remote_filename} on {self.host.name} failed: "
                      f"{stderr.strip() or 'no error output'}; the host needs mktemp, base64 "
                      "and cp (coreutils), room in its temporary directory and the "
                      "destination's folder")
    return True


def install() -> None:
    """Route every SSH upload through :func:`put_file` (idempotent)."""
    if _INSTALLED:
        return
    _INSTALLED["put_file"] = SSHConnector.put_file
    SSHConnector.put_file = put_file  # type: ignore[method-assign]


def uninstall() -> None:
    """Undo :func:`install` (tests)."""
    if _INSTALLED:
        SSHConnector.put_file = _INSTALLED.pop("put_file")  # type: ignore[method-assign]
