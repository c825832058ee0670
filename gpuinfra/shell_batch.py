"""Several read-only shell commands in one round trip, each answered byte for byte.

Both the verify suite (``gpuinfra_verify/batch.py``: testinfra's commands) and the deploy
(``gpuinfra_deploy/pyinfra_patches/fact_batch.py``: pyinfra's fact reads) send a node one
command, built here, that runs each command the way sshd would, in order, and prints each
one's exit code, stdout and stderr; :func:`parse_batch` reads them back. Pure: it builds text
and reads bytes, it runs nothing.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from collections.abc import Sequence

MARK = "gpuinfra-batch"


def batch_script(commands: Sequence[str]) -> str:
    """One shell command that runs each of ``commands`` as sshd would (the login shell's
    ``-c``; bash where the node has it, as testinfra's commands assume nothing more), in
    order, stdin from /dev/null, and prints for each: ``gpuinfra-batch <i> <exit code>``,
    then its stdout and its stderr, each in base64 on one line. The outputs go through a
    folder of mktemp's (0700, a name nobody can predict), removed at the end.

    The answers are gathered in that folder and printed at once at the end (one ``cat``):
    printed as each command ends, every answer was five small writes, and sshd sent each as
    an SSH packet of its own (about 1,400 a fleet node's fact reads), each decrypted and
    checked in Python by the controller's paramiko; whole, they go in packets of up to 32 KB."""
    lines = [
        'd=$(mktemp -d) || exit 97',
        "trap 'rm -rf \"$d\"' EXIT",
        ': >"$d/a"',
        's=$(command -v bash || echo /bin/sh)',
        'one() { "$s" -c "$1" </dev/null >"$d/o" 2>"$d/e"; r=$?; '
        f'{{ printf "{MARK} %s %s\\n" "$2" "$r"; base64 -w0 "$d/o"; echo; '
        'base64 -w0 "$d/e"; echo; } >>"$d/a"; }',
    ]
    lines += [f"one {shlex.quote(command)} {i}" for i, command in enumerate(commands)]
    lines.append('cat "$d/a"')
    return "\n".join(lines) + "\n"


class BatchUnreadable(ValueError):
    """What the node printed is not :func:`batch_script`'s answer for these commands."""


def parse_batch(text: bytes, count: int) -> list[tuple[int, bytes, bytes]]:
    """(exit code, stdout, stderr) of each command of :func:`batch_script`'s answer."""
    lines = text.split(b"\n")
    answers: list[tuple[int, bytes, bytes]] = []
    at = 0
    while len(answers) < count:
        if at + 2 >= len(lines):
            raise BatchUnreadable(f"{len(answers)} of {count} answers before the output ended")
        head = lines[at].decode("ascii", "replace").split()
        if len(head) != 3 or head[0] != MARK or head[1] != str(len(answers)):
            raise BatchUnreadable(f"answer {len(answers)}: {lines[at][:80]!r}")
        try:
            rc = int(head[2])
            out = base64.b64decode(lines[at + 1], validate=True)
            err = base64.b64decode(lines[at + 2], validate=True)
        except (ValueError, binascii.Error) as exc:
            raise BatchUnreadable(f"answer {len(answers)}: {exc}") from None
        answers.append((rc, out, err))
        at += 3
    return answers
