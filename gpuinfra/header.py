"""The one "managed by" line at the top of every file gpuinfra writes on a host.

One wording everywhere, so an administrator who opens any of these files reads the same
warning, and a search for it finds them all. Only the comment syntax differs by format.
"""

from __future__ import annotations

from gpuinfra.errors import GpuinfraError

MANAGED = "Managed by gpuinfra: local edits are overwritten on the next deploy."

# Comment syntax -> (before, after) the text.
_COMMENT = {
    "#": ("# ", ""),         # shell, systemd, modprobe, udev, sysctl, GRUB, apt preferences,
                             # YAML, Slurm's files
    "//": ("// ", ""),       # apt.conf
    "<!--": ("<!-- ", " -->"),  # XML (libvirt domains)
}


def header(comment: str = "#") -> str:
    """:data:`MANAGED` as one comment line (with its newline) in the syntax that starts with
    ``comment``: ``"#"``, ``"//"`` or ``"<!--"``."""
    try:
        before, after = _COMMENT[comment]
    except KeyError:
        raise GpuinfraError(f"no comment syntax {comment!r} (known: {', '.join(_COMMENT)})") \
            from None
    return f"{before}{MANAGED}{after}\n"


HEADER = header("#")
