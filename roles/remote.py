"""What the roles' execution-time callbacks (``FunctionCommand``) use to act on a host.

A callback runs when pyinfra executes the operation, not when it plans it: it is how a role
moves a secret between hosts through this machine's memory only (the MUNGE key, a kubeadm
bootstrap token), or reads what a package installed by this very run prints. Commands run
without printing their output (pyinfra prints a command's output only when asked to), and a
file goes up from memory, never from this machine's disk.
"""

from __future__ import annotations

from collections import defaultdict
from io import BytesIO
from typing import Any

from gevent.lock import BoundedSemaphore
from pyinfra.api import StringCommand

from gpuinfra.errors import GpuinfraError

# pyinfra keeps one SFTP client per host and runs an operation on every host at once, each in
# its own greenlet. Two callbacks reading from the same source host (every worker fetching the
# head's MUNGE key) would then drive that one SFTP client concurrently, which paramiko does not
# support: the transfers wait on each other forever (seen in the lab once the head's SFTP
# client existed before the copies). One transfer per host at a time.
_TRANSFERS: defaultdict[str, BoundedSemaphore] = defaultdict(BoundedSemaphore)


def exclusive(target: Any) -> BoundedSemaphore:
    """Hold while a callback talks to ``target`` on behalf of another host (the control plane
    making a join token for each worker): one such exchange with a host at a time."""
    return _TRANSFERS[target.name]


def get_bytes(source: Any, path: str, what: str) -> bytes:
    """The content of ``path`` on ``source``, read into memory (one transfer per host at a
    time); GpuinfraError naming ``what`` and the host when it cannot be read."""
    buffer = BytesIO()
    with exclusive(source):
        ok = source.get_file(path, buffer, **sudo_args(source))
    if not ok:
        raise GpuinfraError(f"{what}: cannot read {path} on {source.name}")
    return buffer.getvalue()


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


def put_bytes(target: Any, data: bytes, path: str, what: str) -> None:
    """``data`` uploaded to ``path`` on ``target`` from memory (one transfer per host at a
    time)."""
    with exclusive(target):
        ok = target.put_file(BytesIO(data), path, **sudo_args(target))
    if not ok:
        raise GpuinfraError(f"{what}: cannot write {path} on {target.name}")


def put_text(target: Any, text: str, path: str, what: str) -> None:
    """``text`` uploaded to ``path`` on ``target`` from memory."""
    put_bytes(target, text.encode(), path, what)
