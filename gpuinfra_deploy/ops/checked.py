"""Configuration files that go live only after the tool that reads them accepted them.

The pattern of every role that writes a daemon's configuration (slurm.conf by ``slurmd -G``,
a Prometheus config by ``promtool``, a libvirt domain by ``virt-xml-validate``...): the new
files are staged in a private directory beside the live ones, the consumer judges the staged
set, and only then is each changed file moved into place with an atomic rename. A refusal
fails the host with the tool's own message and touches nothing live, so the handlers
(``_if=op.did_change``: restart, reload) never run and the daemon keeps its configuration.

How a staged file gets there: as the standard input of one command run as root (with
``--sudo`` too) under ``umask 077``, decoded in a ``mktemp -d`` directory (0700, a random name)
and copied into the stage, 0600 (gpuinfra_deploy/pyinfra_patches/uploads.py, which every SSH
upload of a run takes). pyinfra's own transfer under ``--sudo`` would first write it as the SSH
user to ``/tmp/pyinfra-<sha1(dest)>``, a predictable name readable by every local user: the
stage directory's 0700 alone does not make the path private.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from functools import lru_cache
from io import BytesIO

from pyinfra import host
from pyinfra.api import FileUploadCommand, StringCommand, operation
from pyinfra.facts.files import Sha256File

from gpuinfra.text import FileText
from gpuinfra_deploy.templates import Rendered, text


def digest(text: str) -> str:
    return _encoded(text)[1]


@lru_cache(maxsize=256)
def _encoded(text: str) -> tuple[bytes, str]:
    """(bytes, sha256) of ``text``, once per text: a cluster-wide file (slurm.conf has a line
    per node) is the same object on every host, so a 10,000-host plan hashes and encodes it
    once (a str's hash is cached in the object), not once per host. Every upload of a role
    goes through here (:func:`upload_source`): the texts every host gets stay among the
    last 256 asked while a host's own are soon forgotten."""
    data = text.encode()
    return data, hashlib.sha256(data).hexdigest()


def upload_source(text: str) -> BytesIO:
    """A file object over ``text``'s shared bytes for one host's upload: CPython's BytesIO
    shares its initial bytes until written, so each host's plan holds a small object instead
    of its own copy of the file (per-host copies made planning quadratic in memory; a
    StringIO also holds 4 bytes per character). The roles' ``files.put`` take their text
    through it (pyinfra reads a StringIO source as its UTF-8 bytes: the same upload)."""
    return BytesIO(_encoded(text)[0])


def check_script(command: str, tool: str, stage: str, fail_pattern: str | None = None) -> str:
    """Shell: run ``command`` (already quoted: it reads the staged files) and exit 1 with its
    output and gpuinfra's refusal ("gpuinfra: <tool> refused the new configuration") when it
    fails, or when its output matches ``fail_pattern`` (an ERE, for tools that report some
    errors with exit 0)."""
    message = (f"gpuinfra: {tool} refused the new configuration (checked on the files staged "
               f"in {stage}); nothing was installed and the running service keeps its current "
               "configuration. Fix the site data and deploy again.")
    failed = "[ $rc -ne 0 ]"
    shown = "printf '%s\\n' \"$out\""
    if fail_pattern:
        pattern = shlex.quote(fail_pattern)
        failed += f" || printf '%s\\n' \"$out\" | grep -qE {pattern}"
        shown += f" | grep -E {pattern}"
    return (f"out=$({command} 2>&1); rc=$?; if {failed}; then {shown} >&2; "
            f"echo {shlex.quote(message)} >&2; exit 1; fi")


def overrides_named(check: str, texts: list[str]) -> str:
    """``check``, and when it refuses a file that came from one of the site's own templates,
    the line naming that template (the consumer refused what the override made)."""
    named = sorted({t.about for t in texts if isinstance(t, Rendered) and t.override})
    if not named:
        return check
    message = (f"gpuinfra: the refused files came from {', '.join(named)}: fix it (the "
               "message above is the consumer's), or remove it to use gpuinfra's own, and "
               "deploy again.")
    # A subshell: the check ends with its own `exit 1`, which must not end the script before
    # the line naming the template is said.
    return f"( {check} ) || {{ echo {shlex.quote(message)} >&2; exit 1; }}"


@operation()
def checked_files(files: Mapping[str, str | FileText], stage: str, check: str,
                  mode: str = "0644"):
    """``files`` in place, after ``check`` accepted the staged set.

    + files: live path -> content, or the library's :class:`~gpuinfra.text.FileText` (rendered
      here); all in one directory: the staged copies keep the names
    + stage: the staging directory beside the live files (created 0700, root only); each file
      reaches it through the private upload of the module docstring, so a secret can go
      through it
    + check: shell command judging the staged copies (see :func:`check_script`)
    + mode: the live files' mode

    .. code:: python

        checked_files(files={"/etc/slurm/slurm.conf": text}, stage=STAGE,
                      check=check_script(f"slurmd -G -f {STAGE}/slurm.conf", "Slurm", STAGE))
    """
    files = {path: text(body) if isinstance(body, FileText) else body
             for path, body in files.items()}
    changed = [path for path, body in files.items()
               if host.get_fact(Sha256File, path=path) != digest(body)]
    if not changed:
        host.noop(f"already in place: {', '.join(sorted(files))}")
        return
    yield StringCommand("install", "-d", "-m", "0700", stage)
    for path, body in files.items():
        yield FileUploadCommand(upload_source(body), f"{stage}/{path.rsplit('/', 1)[1]}")
    yield StringCommand(overrides_named(check, list(files.values())))
    for path in changed:
        staged = f"{stage}/{path.rsplit('/', 1)[1]}"
        temp = f"{path}.gpuinfra-new"
        yield StringCommand("cp", staged, temp, "&&", "chmod", mode, temp, "&&",
                            "mv", "-f", temp, path)
