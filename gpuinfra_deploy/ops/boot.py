"""Boot order and bounded restart for the daemons a role runs (gpuinfra.units), one mechanism
for every role: each unit's drop-in is written, and systemd reloads its units once when any
changed. Nothing is restarted: the order matters at the next boot, and the restart policy
applies to the running unit from the reload on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.units import boot_dropin, dropin_path
from gpuinfra_deploy.ops.checked import upload_source
from gpuinfra_deploy.templates import text as render_text


class BootNeeds(NamedTuple):
    """What ``unit`` needs at boot: started after ``after``, pulling in ``wants``; with
    ``ready_port``, counted as started only once it listens there (gpuinfra.units)."""

    unit: str
    why: str
    after: Sequence[str] = ()
    wants: Sequence[str] = ()
    ready_port: int | None = None

    def text(self) -> str:
        return render_text(boot_dropin(self.why, self.after, self.wants, self.ready_port))


def boot_order(needs: Sequence[BootNeeds]) -> None:
    """Each unit's boot drop-in in place; one daemon-reload when any changed."""
    changed = [files.put(name=f"{n.unit}: boot order and bounded restart (drop-in)",
                         dest=dropin_path(n.unit), src=upload_source(n.text()),
                         mode="644")
               for n in needs]
    systemd.daemon_reload(name="Reload systemd units (boot order drop-ins)",
                          _if=any_changed(*changed))
