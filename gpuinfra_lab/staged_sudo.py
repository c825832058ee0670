"""Lab proof: with sudo as a non-root SSH user, no file the deploy stages is ever readable by
another user or placed at a predictable path.

    .venv/bin/python -m gpuinfra_lab.staged_sudo [inventory/lab.py]

On a converged lab (munge_sudo.py's set-up: the SSH user ``gpuinfra-deploy`` with the lab's
key and passwordless sudo on every host), each host gets two watchers:

- as ``nobody``: reads every file it can in /tmp, /var/tmp, /dev/shm and the deploy user's
  home in a tight loop, recording each file's SHA-256 and owner;
- as root, with inotify: records every name created or moved into those folders (however
  short-lived), so a predictable name (pyinfra's ``pyinfra-<sha1(dest)>``) is seen even when
  nobody cannot read it.

Then some of the files the deploy manages are made to drift (a comment line appended to the
files under /etc/systemd/system, /etc/apt/apt.conf.d and /etc/modprobe.d that carry
gpuinfra's header: boot drop-ins and apt settings, written by ``files.put`` and the checked
files), and the whole deploy runs as that user with ``--sudo``. It requires: the run
succeeded; every drifted file was written back (the uploads really ran); no name of the form
``pyinfra-<40 hex>`` appeared; nobody read no file owned by the deploy user, and no file whose
content is that of a file the deploy wrote back. Exit 0 when all hold, 1 naming each host and
path. The user and the watchers are removed at the end.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time

from gpuinfra.header import MANAGED
from gpuinfra_lab.munge_sudo import CLEANUP, REPO, SETUP, USER, _hosts, _ssh

WATCH = "/run/gpuinfra-key-watch"
READS = f"{WATCH}/seen"
NAMES = f"{WATCH}/names"
PYINFRA_TIMEOUT_S = 480
DRIFT = "# gpuinfra-lab: drift (staged_sudo.py)"
DRIFT_FOLDERS = ("/etc/systemd/system", "/etc/apt/apt.conf.d", "/etc/modprobe.d")
ROOTS = ("/tmp", "/var/tmp", "/dev/shm", f"/home/{USER}")
PREDICTABLE = re.compile(r"(?:^|/)pyinfra-[0-9a-f]{40}$")

READER = r"""
import hashlib, os, sys, time
roots = ROOTS
seen = set()
out = open(sys.argv[1], "a", buffering=1)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    with open(path, "rb") as handle:
                        owner = os.fstat(handle.fileno()).st_uid
                        digest = hashlib.sha256(handle.read(1 << 16)).hexdigest()
                except OSError:
                    continue
                if (path, digest) not in seen:
                    seen.add((path, digest))
                    out.write(f"{digest} {owner} {path}\n")
""".replace("ROOTS", repr(list(ROOTS)))

# inotify through libc (no inotify-tools in the lab image): every name created or moved into
# the roots and the folders made under them.
NAMER = r"""
import ctypes, os, struct, sys, time
libc = ctypes.CDLL("libc.so.6", use_errno=True)
IN_CREATE, IN_MOVED_TO, IN_ISDIR = 0x100, 0x80, 0x40000000
fd = libc.inotify_init()
watches = {}
def watch(path):
    wd = libc.inotify_add_watch(fd, path.encode(), IN_CREATE | IN_MOVED_TO)
    if wd >= 0:
        watches[wd] = path
for root in ROOTS:
    if os.path.isdir(root):
        watch(root)
out = open(sys.argv[1], "a", buffering=1)
os.set_blocking(fd, False)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        time.sleep(0.002)
        continue
    offset = 0
    while offset < len(data):
        wd, mask, _, size = struct.unpack_from("iIII", data, offset)
        name = data[offset + 16:offset + 16 + size].rstrip(b"\0").decode(errors="replace")
        offset += 16 + size
        path = os.path.join(watches.get(wd, "?"), name)
        out.write(path + "\n")
        if mask & IN_ISDIR:
            watch(path)
""".replace("ROOTS", repr(list(ROOTS)))


def _start_watchers(host: str) -> str | None:
    setup = _ssh(host, SETUP + f": > {NAMES}\n")
    if setup.returncode != 0:
        return f"{host}: setup failed: {setup.stderr.strip()}"
    _ssh(host, f"cat > {WATCH}/reader.py", stdin=READER)
    _ssh(host, f"cat > {WATCH}/namer.py", stdin=NAMER)
    _ssh(host, "systemd-run --quiet --unit gpuinfra-key-watch --uid=nobody "
               f"python3 {WATCH}/reader.py {READS} 900")
    _ssh(host, "systemd-run --quiet --unit gpuinfra-name-watch "
               f"python3 {WATCH}/namer.py {NAMES} 900")
    return None


def _drift(host: str) -> list[str]:
    """Append the drift line to some gpuinfra-managed live files of DRIFT_FOLDERS; their
    paths."""
    folders = " ".join(DRIFT_FOLDERS)
    # Live files only: the copies in a checked file's stage (.gpuinfra-staged/) are written
    # again only when their live file changes.
    found = _ssh(host, f"grep -rlF {_quote(MANAGED)} {folders} 2>/dev/null | "
                       "grep -v '/[.]gpuinfra-' | sort | head -6")
    paths = found.stdout.split()
    for path in paths:
        _ssh(host, f"printf '%s\\n' {_quote(DRIFT)} >> {_quote(path)}")
    return paths


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def main(argv: list[str]) -> int:
    inventory = argv[0] if argv else "inventory/lab.py"
    hosts = _hosts()
    problems: list[str] = []
    drifted: dict[str, list[str]] = {}
    try:
        for host in hosts:
            failed = _start_watchers(host)
            if failed:
                print(f"staged-sudo: {failed}")
                return 1
        time.sleep(1)  # the watchers are looping
        for host in hosts:
            drifted[host] = _drift(host)
        try:
            run = subprocess.run(
                [str(REPO / ".venv" / "bin" / "pyinfra"), "-y", "--sudo", inventory,
                 "deploy.py", "--data", f"ssh_user={USER}"],
                cwd=REPO, capture_output=True, text=True, check=False, timeout=PYINFRA_TIMEOUT_S)
            if run.returncode != 0:
                problems.append(f"the deploy as {USER} with --sudo failed (exit "
                                f"{run.returncode}):\n" + "\n".join(run.stderr.splitlines()[-15:]))
        except subprocess.TimeoutExpired:
            problems.append(f"the deploy as {USER} with --sudo did not finish in "
                            f"{PYINFRA_TIMEOUT_S} s")
        time.sleep(1)  # the watchers see the last moments
        problems += [problem for host in hosts for problem in _judge(host, drifted[host])]
    finally:
        for host in hosts:
            _ssh(host, "systemctl stop gpuinfra-name-watch 2>/dev/null; systemctl reset-failed "
                       "gpuinfra-name-watch 2>/dev/null; " + CLEANUP)
    for line in problems:
        print(f"staged-sudo: FAIL: {line}")
    if problems:
        return 1
    rewritten = sum(len(p) for p in drifted.values())
    print(f"staged-sudo: the deploy as {USER} with --sudo wrote back {rewritten} drifted "
          f"file(s) on {len(hosts)} host(s); no staged file was readable by another user or "
          "at a predictable path at any moment")
    return 0


def _judge(host: str, drifted: list[str]) -> list[str]:
    problems = []
    if not drifted:
        problems.append(f"{host}: no gpuinfra-managed file found to drift in "
                        f"{', '.join(DRIFT_FOLDERS)}: the proof exercised no upload")
    digests = {}
    for path in drifted:
        text = _ssh(host, f"cat {_quote(path)}").stdout
        if DRIFT in text:
            problems.append(f"{host}: {path} still holds the drift line: the deploy did not "
                            "write it back, so its upload was not exercised")
        digests[hashlib.sha256(text.encode()[:1 << 16]).hexdigest()] = path
    uid = _ssh(host, f"id -u {USER}").stdout.strip()
    seen = _ssh(host, f"systemctl stop gpuinfra-key-watch gpuinfra-name-watch; cat {READS}")
    reads = [line.split(" ", 2) for line in seen.stdout.splitlines() if line.count(" ") >= 2]
    for digest, owner, path in reads:
        if owner == uid and not path.startswith(f"/home/{USER}/"):  # its home: its own
            problems.append(f"{host}: user nobody read {path}, a file of the deploy user {USER}")
        elif digest in digests:
            problems.append(f"{host}: user nobody read {path}, whose content is "
                            f"{digests[digest]}'s")
    names = _ssh(host, f"cat {NAMES}").stdout.splitlines()
    problems += [f"{host}: a staged file was placed at the predictable path {name}"
                 for name in names if PREDICTABLE.search(name)]
    print(f"staged-sudo: {host}: {len(drifted)} drifted file(s); nobody read {len(reads)} "
          f"file version(s); {len(names)} name(s) created in {', '.join(ROOTS)}")
    return problems


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
