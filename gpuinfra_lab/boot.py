"""When a lab host has finished booting, and whether it came back whole.

A host is back when systemd finished starting (``is-system-running``: running or degraded),
no unit is still starting (an ``auto-restart`` counts: the unit has not come back yet), and
every failed unit is one its lab profile expects (gpuinfra_lab/profiles.py: the GPU-less containers'
units that need the NVIDIA kernel module). Anything else is named, unit by unit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpuinfra.errors import ParseError
from gpuinfra.parsers.system import UNIT_STATES_COMMAND, parse_unit_states

BOOT_TIMEOUT_S = 180
STATE_COMMAND = f"systemctl is-system-running; echo ---; {UNIT_STATES_COMMAND}"


@dataclass(frozen=True)
class Boot:
    """One look at a booting host: finished or not, and what it says."""

    done: bool
    state: str  # "running", "degraded (expected: a, b)", "starting", ...
    unexpected: tuple[str, ...] = ()  # "slurmctld.service failed", ...

    @property
    def whole(self) -> bool:
        return self.done and not self.unexpected


def judge(output: str, expected: Mapping[str, str]) -> Boot:
    """The host's boot from ``STATE_COMMAND``'s output and its profile's expected failures."""
    state, _, listing = output.partition("---")
    state = state.strip() or "no answer"
    try:
        units = parse_unit_states(listing)
    except ParseError as exc:
        return Boot(False, f"{state} (unreadable unit list: {exc})")
    # A service still starting or waiting to restart has not come back yet. Other units may
    # stay "activating" in a container for good (the host's /dev/vda device unit: tentative).
    starting = [f"{u} {active} ({sub})" for u, (active, sub) in units.items()
                if active == "activating" and u.endswith(".service")]
    failed = [u for u, (active, _) in units.items() if active == "failed"]
    unexpected = tuple([*(f"{u} failed" for u in failed if u not in expected), *starting])
    if state not in ("running", "degraded") or starting:
        return Boot(False, state, unexpected)
    if failed and not unexpected:
        return Boot(True, f"{state} (only the lab's expected failures: "
                          f"{', '.join(sorted(failed))})")
    return Boot(True, state, unexpected)


def wait_whole(look: Callable[[], str], expected: Mapping[str, str],
               timeout: float = BOOT_TIMEOUT_S, pause: float = 1.0) -> Boot:
    """Look until the host finished booting (every service started, failed for good, or
    still restarting at ``timeout``): the last look. A failed unit is final (systemd restarts
    only what is in auto-restart), so a broken host is reported as soon as it settled."""
    deadline = time.monotonic() + timeout
    while True:
        boot = judge(look(), expected)
        if boot.done or time.monotonic() > deadline:
            return boot
        time.sleep(pause)
