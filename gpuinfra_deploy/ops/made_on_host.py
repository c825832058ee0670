"""Secrets made on the host that uses them, and files built there from them.

A password, a private key or a hash of a password is made by a command on the host (from the
kernel's random source) and never leaves it: no command line, output, upload or file outside
its own directory carries it, and the machine running pyinfra never sees it. Its facts read
SHA-256 digests only.

- :func:`secret_files`: files made once by a command when any of them is missing, then kept
  (rotating them is deleting them and deploying again);
- :func:`copied_file`: a copy of such a file for another daemon's group, made on the host;
- :func:`filled_file`: a configuration built from data with each token replaced by a secret
  file's content (as a JSON string, which YAML reads as a double-quoted scalar), judged by its
  consumer in a private staging directory and moved into place only then.
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import Mapping, Sequence

from pyinfra import host
from pyinfra.api import FactBase, StringCommand, operation
from pyinfra.facts.files import File, Sha256File

# Run on the host by python3 -I: ``digest DEST TEMPLATE FILLS`` prints the SHA-256 of the filled
# text (or '-' when a secret file is missing) and of DEST (or '-'); ``write DEST TEMPLATE FILLS``
# prints the filled text. TEMPLATE is base64, FILLS a JSON object {token: path}.
FILLER = """
import base64, hashlib, json, sys
mode, dest, template, fills = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
text = base64.b64decode(template).decode()
missing = False
for token, path in json.loads(fills).items():
    try:
        with open(path) as handle:
            text = text.replace(token, json.dumps(handle.read().strip()))
    except OSError:
        missing = True
def digest(data):
    return hashlib.sha256(data).hexdigest()
if mode == "write":
    if missing:
        sys.exit("a secret file of " + dest + " is missing: " + fills)
    sys.stdout.write(text)
else:
    try:
        with open(dest, "rb") as handle:
            have = digest(handle.read())
    except OSError:
        have = "-"
    print("-" if missing else digest(text.encode()))
    print(have)
"""


def filler(mode: str, dest: str, template: str, fills: Mapping[str, str]) -> str:
    """The shell words that run :data:`FILLER` (no secret among them)."""
    return " ".join(shlex.quote(part) for part in (
        "python3", "-I", "-c", FILLER, mode, dest,
        base64.b64encode(template.encode()).decode(), json.dumps(dict(fills), sort_keys=True)))


class FilledDigests(FactBase):
    """``{"want": sha256 of the filled template or None (a secret file missing), "have":
    sha256 of dest or None}``."""

    def command(self, dest: str, template: str, fills_json: str) -> str:
        return filler("digest", dest, template, json.loads(fills_json))

    def process(self, output: list[str]) -> dict[str, str | None]:
        lines = [line.strip() for line in output] + ["-", "-"]
        return {"want": None if lines[0] == "-" else lines[0],
                "have": None if lines[1] == "-" else lines[1]}


@operation()
def secret_files(paths: Sequence[str], command: str, what: str, refresh: bool = False):
    """``paths`` made by ``command`` when any of them is missing; kept when all are there.

    + paths: the files ``command`` makes (each checked by its SHA-256 fact, never read)
    + command: shell, run as root, that makes all of them (under umask 077, into place)
    + what: the files' name in messages
    + refresh: make them again whatever the facts say (what they derive from is being made
      again or changed by this run: a certificate whose CA or address is new)

    .. code:: python

        secret_files(paths=[KEY, CERT], command=make_key_and_cert, what="TLS key")
    """
    missing = [path for path in paths if host.get_fact(Sha256File, path=path) is None]
    if not missing and not refresh:
        host.noop(f"{what} already on the host (kept; delete {', '.join(paths)} and deploy "
                  "again to make new ones)")
        return
    yield StringCommand(command)


def _mode_and_group_right(path: str, mode: int, group: str) -> bool:
    info = host.get_fact(File, path=path)
    return bool(info) and info.get("mode") == mode and info.get("group") == group


@operation()
def copied_file(src: str, dest: str, group: str, mode: str = "0640", refresh: bool = False):
    """``dest``: a copy of ``src`` made on the host, root:``group`` ``mode``.

    + src: the secret file (made on this host)
    + dest: the copy (its directory must exist)
    + group: the group that reads the copy
    + mode: its mode (octal text)
    + refresh: copy whatever the facts say (``src`` is being made again by this run)
    """
    same = not refresh and host.get_fact(Sha256File, path=src) is not None and \
        host.get_fact(Sha256File, path=src) == host.get_fact(Sha256File, path=dest)
    if same and _mode_and_group_right(dest, int(mode[-3:]), group):
        host.noop(f"{dest} already the same as {src}")
        return
    yield StringCommand("install", "-m", mode, "-o", "root", "-g", group, src, dest)


@operation()
def filled_file(template: str, fills: Mapping[str, str], dest: str, stage: str, check: str,
                group: str, mode: str = "0640", refresh: bool = False):
    """``dest``: ``template`` with each token of ``fills`` replaced by its file's content,
    built on the host, judged by ``check`` in ``stage``, then moved into place.

    + template: the text, with tokens where the secrets go
    + fills: token -> path of the secret file on the host
    + dest: the live file (root:``group`` ``mode``)
    + stage: a private staging directory (0700, root), beside ``dest``
    + check: shell judging ``{stage}/{name of dest}`` (see ops.checked.check_script)
    + group: the group that reads ``dest``
    + refresh: build it whatever the facts say (a secret file is being made again by this run)
    """
    digests = host.get_fact(FilledDigests, dest=dest, template=template,
                            fills_json=json.dumps(dict(fills), sort_keys=True))
    if not refresh and digests["want"] is not None and digests["want"] == digests["have"] and \
            _mode_and_group_right(dest, int(mode[-3:]), group):
        host.noop(f"{dest} already in place")
        return
    staged = f"{stage}/{dest.rsplit('/', 1)[1]}"
    temp = f"{dest}.gpuinfra-new"
    yield StringCommand("install", "-d", "-m", "0700", stage)
    yield StringCommand("umask", "077", "&&", filler("write", dest, template, fills), ">",
                        shlex.quote(staged))
    yield StringCommand(check)
    yield StringCommand("umask", "077", "&&", "cp", staged, temp, "&&", "chgrp", group, temp,
                        "&&", "chmod", mode, temp, "&&", "mv", "-f", temp, dest)
