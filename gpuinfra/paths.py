"""One rule for the folders a role removes, replaces, fills or opens up on a node (issue 44).

A site gives such a path in its data (an OCI bundle the role rebuilds with ``rm -rf`` and a
rename, Enroot's per-user folders whose parents the role makes 1777, the folder VM disks are
confined to). One wrong value there is root's command on every node: ``/etc`` removed, ``/usr``
opened to every user. So every such path is judged here, by one rule, before any host is
touched: an absolute, normalised path (no ``.``, ``..`` or ``//``), not the system's own
folders nor inside them, not a folder that holds them, and not inside a folder every user may
write (there a planted symbolic link redirects root's writes). Pure: no I/O.
"""

from __future__ import annotations

import posixpath
import re

# Folders of the system itself (programs, libraries, configuration, kernel interfaces, users'
# homes, logs, package databases, daemons' sockets): nothing of a role's data goes in them.
SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/lost+found", "/proc", "/root", "/sbin", "/snap", "/sys", "/usr",
    "/var/backups", "/var/log", "/var/mail", "/var/spool/cron", "/var/spool/mail",
    "/var/lib/apt", "/var/lib/dpkg", "/var/lib/systemd", "/var/lib/mysql", "/var/lib/munge",
    "/var/lib/slurm", "/var/lib/ucf", "/var/cache/apt", "/var/cache/debconf",
    "/run/dbus", "/run/munge", "/run/sshd", "/run/systemd", "/run/udev", "/run/user",
)
# Folders every user may write (sticky, mode 1777): root builds nothing there.
WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/var/crash")
# Folders that hold the system's own: the path may be below them, never one of them.
SYSTEM_PARENTS = ("/", "/var", "/var/lib", "/var/cache", "/var/spool", "/run", "/srv", "/opt",
                  "/mnt", "/media", "/data", "/scratch")

_SAFE = re.compile(r"(/[A-Za-z0-9._+-]+)+")
# enroot.conf's per-user part, allowed in the last part of its paths only.
PER_USER = "$(id -u)"


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def path_problem(value: object, per_user: bool = False) -> str | None:
    """Why ``value`` cannot be a folder a role removes, replaces, fills or opens up (None: it
    can). ``per_user``: its last part may hold ``$(id -u)`` (enroot.conf)."""
    if not isinstance(value, str):
        return "must be a string (an absolute path)"
    plain = value
    if per_user and PER_USER in value:
        head, _, last = value.rpartition("/")
        if PER_USER in head:
            return f"{PER_USER} only in the last part of the path"
        plain = f"{head}/{last.replace(PER_USER, 'uid')}"
    if not _SAFE.fullmatch(plain):
        return "not an absolute path of letters, digits and '._+-' (no spaces, no trailing '/')"
    if posixpath.normpath(plain) != plain:
        return "not a normalised path ('.' or '..' in it)"
    for tree in WORLD_WRITABLE:
        if _within(plain, tree):
            return (f"inside {tree}, which every user may write: a link planted there would "
                    "redirect root's writes")
    for tree in SYSTEM_TREES:
        if _within(plain, tree):
            return f"inside the system folder {tree}"
    if plain in SYSTEM_PARENTS:
        return f"{plain} holds the system's own folders: give a folder of its own below it"
    return None


def opened_parent_problem(value: object, per_user: bool = False) -> str | None:
    """:func:`path_problem` of ``value`` and of its parent, the folder the role opens to every
    user (mode 1777) to make the per-user folders in it."""
    problem = path_problem(value, per_user)
    if problem is not None or not isinstance(value, str):
        return problem
    parent = posixpath.dirname(value)
    problem = path_problem(parent)
    if problem is not None:
        return f"its parent {parent}, which the role makes writable by every user, is {problem}" \
            if not problem.startswith(parent) else f"its parent {problem} (the role makes it " \
            "writable by every user)"
    return None
