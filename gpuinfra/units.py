"""systemd units and drop-ins: every one gpuinfra writes is built here, from data.

:func:`unit_file` renders sections of ``Key=value`` lines from the one template
:data:`TEMPLATE`. Built on it: :func:`oneshot_unit` (boot-time scripts: the MIG layout, ACS
off, Soft-RoCE), the MPS daemon (gpuinfra.sharing.mps), the nvidia-persistenced drop-in
(gpuinfra.driver), the monitoring daemons' units and drop-ins (gpuinfra.monitoring.units),
and the boot drop-ins below.

Boot drop-ins: a daemon that starts before what it needs is ready fails at boot and stays
failed: slurmctld with accounting exits ("we have no TRES from it") when slurmdbd is not
answering yet and no state was saved (a first boot, or a shutdown cut short), slurmdbd when
MariaDB is still starting. Each managed daemon gets a drop-in with its boot order
(``After=``/``Wants=`` on what it needs) and a bounded restart policy: restarted on failure
every :data:`RESTART_SEC` seconds, at most :data:`START_LIMIT_BURST` starts in
:data:`START_LIMIT_INTERVAL_S` seconds; after that the unit stays failed, visibly
(``systemctl --failed``), instead of looping forever.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gpuinfra.errors import GpuinfraError
from gpuinfra.text import FileText

# Every unit and drop-in gpuinfra writes: templates/README.md, gpuinfra_deploy/templates.
TEMPLATE = "systemd/unit.j2"
DROPIN_NAME = "gpuinfra-boot.conf"
RESTART_SEC = 10
START_LIMIT_INTERVAL_S = 600
START_LIMIT_BURST = 30

_UNIT = re.compile(r"[A-Za-z0-9@_.:-]{1,200}\.(service|target|socket|mount)")


# One line of a section: ("After", "network-online.target"), ("ExecStart", "") (a drop-in's
# reset of a list), ("#", "a comment"). A value given as a sequence is joined by spaces; None or
# an empty sequence leaves the line out.
Line = tuple[str, str | int | Sequence[str] | None]


def unit_file(sections: Mapping[str, Sequence[Line]], about: str = "") -> FileText:
    """A systemd unit or drop-in, rendered by :data:`TEMPLATE`: the managed-by header,
    ``about`` as comment lines, then each ``[Section]`` of ``sections`` (``{"Unit": [...],
    "Service": [...], "Install": [...]}``) with its lines, both in the order given, one blank
    line between sections.

    A value with a newline is refused: it would add directives to the unit."""
    out = []
    for section, lines in sections.items():
        rows: list[tuple[str, str | list[str]]] = []
        for key, value in lines:
            if key == "#":
                rows.append(("#", _comment(str(value))))
                continue
            if value is None or (not isinstance(value, (str, int)) and not value):
                continue
            text = str(value) if isinstance(value, (str, int)) else " ".join(value)
            if "\n" in text or "\r" in text:
                raise GpuinfraError(f"newline in the systemd setting {key}: {text!r}")
            rows.append((key, text))
        out.append({"name": section, "lines": rows})
    return FileText(TEMPLATE, {"about": _comment(about), "sections": out})


def _comment(text: str) -> list[str]:
    """The lines of a comment (each becomes ``# line``)."""
    return text.strip().splitlines()


def oneshot_unit(description: str, script: str, after: Sequence[str] = (),
                 wants: Sequence[str] = (), before: Sequence[str] = ()) -> str:
    """A boot-time oneshot unit running ``script`` once per boot (enabled by multi-user)."""
    return unit_file({
        "Unit": [("Description", description), ("After", after), ("Wants", wants),
                 ("Before", before)],
        "Service": [("Type", "oneshot"), ("RemainAfterExit", "yes"), ("ExecStart", script)],
        "Install": [("WantedBy", "multi-user.target")],
    })


def path_unit(path: str, suffix: str) -> str:
    """The unit name systemd gives ``path`` (``systemd-escape --path PATH`` + ``.suffix``):
    '/' becomes '-', and every byte but ASCII letters, digits, ':', '_' and a '.' that does not
    start the name becomes ``\\xNN`` (systemd.unit(5), "String Escaping for Inclusion in Unit
    Names"). A netdev named ``eth-0`` is ``sys-subsystem-net-devices-eth\\x2d0.device``, not
    ``...-eth-0.device`` (which names another path, so an After= on it orders nothing)."""
    parts = [p for p in path.split("/") if p]
    text = "/".join(parts) or "/"
    if text == "/":
        return f"-.{suffix}"
    out = []
    for i, byte in enumerate(text.encode()):
        ch = chr(byte)
        if ch == "/":
            out.append("-")
        elif (ch.isascii() and ch.isalnum()) or ch in ":_" or (ch == "." and i > 0):
            out.append(ch)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out) + f".{suffix}"


def dropin_path(unit: str) -> str:
    """Where the boot drop-in of ``unit`` (``slurmctld.service``) goes."""
    return f"/etc/systemd/system/{_checked(unit)}.d/{DROPIN_NAME}"


def boot_dropin(why: str, after: Sequence[str] = (), wants: Sequence[str] = (),
                ready_port: int | None = None) -> str:
    """The drop-in text: ``After=``/``Wants=`` on the units named, and the bounded restart.

    ``why`` is one comment line saying what the daemon needs at boot. ``ready_port``: the
    daemon counts as started only once it listens on that TCP port (:func:`listening_wait`),
    so a unit ordered after it starts when it answers, not when its process exists."""
    for unit in (*after, *wants):
        _checked(unit)
    ready = [] if ready_port is None else [
        ("#", f"Started once it listens on port {ready_port}: the units ordered after it "
              "wait for that,\nnot only for its process (waited for at most "
              f"{READY_WAIT_S} s, never failing it)."),
        ("ExecStartPost", listening_wait(ready_port, READY_WAIT_S))]
    return unit_file({
        "Unit": [("#", why), ("After", after), ("Wants", wants),
                 ("StartLimitIntervalSec", START_LIMIT_INTERVAL_S),
                 ("StartLimitBurst", START_LIMIT_BURST)],
        "Service": [("#", "Restarted when it fails (a dependency not ready yet), a bounded "
                          "number of\ntimes."),
                    ("Restart", "on-failure"), ("RestartSec", RESTART_SEC), *ready],
    })


# How long a daemon's start waits for its port (boot_dropin's ready_port) at most.
READY_WAIT_S = 60


def listening_wait(port: int, seconds: int) -> str:
    """An ``ExecStartPost=`` command line: wait until something listens on TCP ``port``
    (``ss -Hltn 'sport = :PORT'`` prints a row), at most ``seconds``. systemd counts a
    ``Type=simple`` unit as started only when its ExecStartPost= ends (systemd.service(5)),
    so ``After=`` on it then means "answering". The leading ``-`` keeps a timeout from
    failing the daemon: it then counts as started, as without this line. No ``$`` or ``%``
    in it (systemd would expand them)."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise GpuinfraError(f"not a TCP port: {port!r}")
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 1:
        raise GpuinfraError(f"not a number of seconds: {seconds!r}")
    return (f"-/usr/bin/timeout {seconds} /bin/sh -c "
            f"'until ss -Hltn \"sport = :{port}\" | grep -q .; do sleep 0.2; done'")


def _checked(unit: str) -> str:
    if not isinstance(unit, str) or not _UNIT.fullmatch(unit):
        raise GpuinfraError(f"not a systemd unit name: {unit!r}")
    return unit
