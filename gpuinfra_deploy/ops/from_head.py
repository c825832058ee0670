"""Files made on the head and copied to a node through this machine's memory only.

The MUNGE key's way (roles/munge), for any file: at execution time a command on the
head prints the file base64-encoded (neither printed here nor logged: ``print_output=False``),
and a command on the node reads it from its standard input under ``umask 077``, writes it beside
its target, gives it its group and mode and renames it into place. No file outside the target's
directory, no command line and no output ever carries the content; only SHA-256 digests are
read to decide (``Sha256File`` on both hosts).

The copy is planned when a digest differs, the node's file is missing or has the wrong group
or mode, or the head's file does not exist yet (it is made earlier in the same run: the copy
is a meeting of every host, gpuinfra_deploy/pyinfra_patches/schedule.py, so it starts once
the head has finished every operation before it; the head's operation that makes the file
must come first in the deploy). At execution the digests are read again and the files that
are already equal are left alone.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from collections.abc import Sequence
from typing import Any, NamedTuple

from pyinfra import host
from pyinfra.api import FunctionCommand, StringCommand, operation
from pyinfra.facts.files import File, Sha256File

from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy.ops.remote import run
from gpuinfra_deploy.pyinfra_patches.schedule import meeting


class Copy(NamedTuple):
    """One file: its path on the head, its path on the node, the node copy's group and mode
    (octal text)."""

    src: str
    dest: str
    group: str
    mode: str


def read_command(path: str) -> StringCommand:
    return StringCommand("base64", "-w0", shlex.quote(path))


def install_command(copy: Copy) -> StringCommand:
    """Standard input (base64) into ``copy.dest``: decoded under umask 077 beside it, then its
    group and mode, then renamed over it."""
    new = shlex.quote(f"{copy.dest}.gpuinfra-new")
    return StringCommand("umask", "077", "&&", "base64", "-d", ">", new, "&&", "chgrp",
                         shlex.quote(copy.group), new, "&&", "chmod", copy.mode, new, "&&",
                         "mv", "-f", new, shlex.quote(copy.dest))


def _in_place(target: Any, source: Any, copy: Copy) -> bool:
    want = source.get_fact(Sha256File, path=copy.src)
    info = target.get_fact(File, path=copy.dest)
    return want is not None and want == target.get_fact(Sha256File, path=copy.dest) and \
        bool(info) and info.get("mode") == int(copy.mode[-3:]) and \
        info.get("group") == copy.group


def _copy(state: Any, host: Any, source: Any, copies: Sequence[Copy]) -> None:  # noqa: ARG001
    """Execution time: each copy not already in place, head to node through memory.

    pyinfra passes (state, host) to callbacks whose parameters have exactly those names."""
    for copy in copies:
        if _in_place(host, source, copy):
            continue
        encoded = run(source, read_command(copy.src), f"reading {copy.src}").strip()
        try:
            base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise GpuinfraError(f"{copy.src} on {source.name} could not be read whole") from None
        if not encoded:
            raise GpuinfraError(f"{copy.src} on {source.name} is empty")
        run(host, install_command(copy), f"installing {copy.dest} (from {source.name})",
            stdin=encoded)


def files_from_head(**kwargs: Any) -> Any:
    """:func:`copy_from_head`, a meeting of every host (the head's files are made first)."""
    with meeting():
        return copy_from_head(**kwargs)


@operation()
def copy_from_head(head: Any, copies: Sequence[Copy]):
    """Each of ``copies`` on this node equal to the head's file (copied when it differs).

    + head: the pyinfra host holding the files (made there earlier in this run or before)
    + copies: what goes where, in order (:class:`Copy`); the node's directories must exist

    .. code:: python

        files_from_head(head=site.host("head1"),
                        copies=[Copy("/etc/x/nodes/gpu01/tls.key", "/etc/y/tls.key",
                                     "prometheus", "0640")])
    """
    if all(_in_place(host, head, copy) for copy in copies):
        host.noop(f"already the same as {head.name}'s: "
                  f"{', '.join(copy.dest for copy in copies)}")
        return
    yield FunctionCommand(_copy, (head, tuple(copies)), {})
