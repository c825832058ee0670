"""systemd drop-ins that make a daemon come back by itself after a reboot.

A daemon that starts before what it needs is ready fails at boot and stays failed: slurmctld
with accounting exits ("we have no TRES from it") when slurmdbd is not answering yet and no
state was saved (a first boot, or a shutdown cut short), slurmdbd when MariaDB is still
starting. Each managed daemon gets a drop-in with its boot order (``After=``/``Wants=`` on
what it needs) and a bounded restart policy: restarted on failure every :data:`RESTART_SEC`
seconds, at most :data:`START_LIMIT_BURST` starts in :data:`START_LIMIT_INTERVAL_S` seconds;
after that the unit stays failed, visibly (``systemctl --failed``), instead of looping forever.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER

DROPIN_NAME = "gpuinfra-boot.conf"
RESTART_SEC = 10
START_LIMIT_INTERVAL_S = 600
START_LIMIT_BURST = 30

_UNIT = re.compile(r"[A-Za-z0-9@_.:-]{1,200}\.(service|target|socket|mount)")


def dropin_path(unit: str) -> str:
    """Where the boot drop-in of ``unit`` (``slurmctld.service``) goes."""
    return f"/etc/systemd/system/{_checked(unit)}.d/{DROPIN_NAME}"


def boot_dropin(why: str, after: Sequence[str] = (), wants: Sequence[str] = ()) -> str:
    """The drop-in text: ``After=``/``Wants=`` on the units named, and the bounded restart.

    ``why`` is one comment line saying what the daemon needs at boot."""
    for unit in (*after, *wants):
        _checked(unit)
    lines = [HEADER, "[Unit]\n", f"# {why.strip()}\n"]
    if after:
        lines.append(f"After={' '.join(after)}\n")
    if wants:
        lines.append(f"Wants={' '.join(wants)}\n")
    lines += [f"StartLimitIntervalSec={START_LIMIT_INTERVAL_S}\n",
              f"StartLimitBurst={START_LIMIT_BURST}\n",
              "\n[Service]\n",
              "# Restarted when it fails (a dependency not ready yet), a bounded number of\n"
              "# times.\n",
              "Restart=on-failure\n",
              f"RestartSec={RESTART_SEC}\n"]
    return "".join(lines)


def _checked(unit: str) -> str:
    if not isinstance(unit, str) or not _UNIT.fullmatch(unit):
        raise GpuinfraError(f"not a systemd unit name: {unit!r}")
    return unit
