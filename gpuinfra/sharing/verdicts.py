"""Pure judgements of GPU sharing (the verify suite's gpuinfra_verify/test_sharing.py and the node
health check, gpuinfra.health.judge), unit-tested in
tests/unit/test_verify_sharing.py on real MIG captures.

The GPUs' state is read with the deploy's own command and parser (gpuinfra.sharing.migplan), the
expected MIG devices and Slurm GRES from the same spec and rules the roles use
(gpuinfra.sharing.migconfig), so the deploy and the verdict never disagree on what was meant. Each
function returns what it finds wrong, as lines; the test adds cause and fix (:data:`ADVICE`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gpuinfra.sharing.migplan import BOOT_UNIT, GpuMigState, instance_set
from gpuinfra.sharing.mps import COMPUTE_MODE, UNIT_NAME

# (cause, fix) per kind of finding.
ADVICE = {
    "pending": ("MIG mode was switched but is pending: it takes effect only after a GPU "
                "reset or a reboot",
                "reboot the node (or `nvidia-smi -r -i N` on an idle GPU), then deploy again"),
    "mode": ("the gpu_sharing role has not run on this node since the layout changed, or "
             "gpu_sharing_enabled is False",
             "deploy (gpu_sharing role); a mode change then needs a reset or a reboot"),
    "instances": (f"the instances are not the spec's layout: after a reboot, {BOOT_UNIT} did "
                  "not re-create them (disabled or failed: `systemctl status "
                  f"{BOOT_UNIT}`), someone changed them by hand, or the GPU refused the "
                  "layout's placement",
                  f"deploy again (the role creates only the difference); read `journalctl -u "
                  f"{BOOT_UNIT}` for a placement refusal (`nvidia-smi mig -lgipp`)"),
    "boot": (f"{BOOT_UNIT} is not enabled: the instances vanish at the next reboot",
             f"deploy (gpu_sharing role), or `systemctl enable {BOOT_UNIT}`"),
    "mps": (f"the MPS control daemon is not running ({UNIT_NAME}): MPS clients run without "
            "it, unshared, or fail on EXCLUSIVE_PROCESS GPUs",
            f"`systemctl status {UNIT_NAME}` and `journalctl -u {UNIT_NAME}`; deploy again"),
    "limits": ("the daemon runs with other limits than the spec's: started by hand, or its "
               "unit changed without a restart",
               f"deploy (gpu_sharing role restarts {UNIT_NAME} when its unit changes)"),
    "compute": (f"a GPU of an MPS node is not in compute mode {COMPUTE_MODE}: other "
                "processes can open it beside the MPS server",
                f"`systemctl restart {UNIT_NAME}` (it sets the compute mode at start)"),
    "gres": ("Slurm advertises other MIG GRES than the GPUs have: slurmd started before the "
             "instances existed, or slurm.conf counts another layout",
             f"check {BOOT_UNIT} ran before slurmd; `systemctl restart slurmd`; deploy"),
}

_GRES_ITEM = re.compile(r"^(?P<name>[^:()]+):(?P<type>[^:()]+):(?P<count>\d+)(?:\(.*\))?$")


def mig_mode_findings(states: Sequence[GpuMigState],
                      layout: Sequence[Mapping[str, int]]) -> list[tuple[str, str]]:
    """(kind, line) for each GPU whose MIG mode is not the layout's: ``pending`` (switched,
    not yet in effect) or ``mode`` (not switched)."""
    found = []
    by_index = {s.index: s for s in states}
    for index, gpu_layout in enumerate(layout):
        state = by_index.get(index)
        want = bool(gpu_layout)
        if state is None:
            found.append(("mode", f"GPU {index} of the spec is missing"))
        elif state.mig_current is None:
            if want:
                found.append(("mode", f"GPU {index} reports no MIG mode ([N/A])"))
        elif state.mig_current != want:
            kind = "pending" if state.mig_pending == want else "mode"
            now = "Enabled" if state.mig_current else "Disabled"
            found.append((kind, f"GPU {index}: MIG mode {now}, the spec wants "
                                f"{'Enabled' if want else 'Disabled'}"
                                + (" (pending)" if kind == "pending" else "")))
    return found


def instance_findings(states: Sequence[GpuMigState],
                      layout: Sequence[Mapping[str, int]]) -> list[str]:
    """Each GPU whose MIG devices (`nvidia-smi -L`) are not the layout's."""
    found = []
    by_index = {s.index: s for s in states}
    for index, gpu_layout in enumerate(layout):
        state = by_index.get(index)
        have = instance_set(state) if state else {}
        if have != dict(gpu_layout):
            found.append(f"GPU {index}: MIG devices {_counts(have)}, the spec wants "
                         f"{_counts(gpu_layout)}")
    return found


def _counts(layout: Mapping[str, int]) -> str:
    return ", ".join(f"{n}x {p}" for p, n in sorted(layout.items())) or "none"


def parse_gres(text: str) -> dict[str, int]:
    """``gpu:3g.40gb:2(S:0-1),gpu:1g.10gb:4`` (sinfo %G, scontrol Gres=) as
    ``{"gpu:3g.40gb": 2, ...}``; ``(null)`` gives ``{}``."""
    out: dict[str, int] = {}
    for item in filter(None, (i.strip() for i in re.split(r",(?![^(]*\))", text))):
        match = _GRES_ITEM.match(item)
        if match:
            key = f"{match['name']}:{match['type']}"
            out[key] = out.get(key, 0) + int(match["count"])
    return out


def slurm_gres_findings(advertised: str, states: Sequence[GpuMigState]) -> list[str]:
    """Slurm's MIG GRES (sinfo %G) against the MIG devices the GPUs really have."""
    have = parse_gres(advertised)
    # Imported here: migconfig needs PyYAML, which the node health check (this module's other
    # reader, shipped with the standard library only) neither has nor needs.
    from gpuinfra.sharing.migconfig import slurm_mig_gres

    want = parse_gres(",".join(slurm_mig_gres([s.mig_devices for s in states])))
    if have == want:
        return []
    return [f"Slurm advertises {advertised or '(nothing)'}, the GPUs have "
            f"{', '.join(f'{k}:{n}' for k, n in sorted(want.items())) or 'no MIG devices'}"]


def boot_unit_findings(is_enabled: str) -> list[str]:
    """`systemctl is-enabled` of the MIG boot unit: anything but ``enabled`` is a finding."""
    state = is_enabled.strip()
    return [] if state == "enabled" else [f"{BOOT_UNIT} is {state or 'not installed'}"]


def mps_limit_findings(answered: str, expected: int) -> list[str]:
    """``get_default_active_thread_percentage``'s answer against the spec's percentage."""
    try:
        value = float(answered.strip())
    except ValueError:
        return [f"get_default_active_thread_percentage answered {answered.strip()[:80]!r}"]
    if round(value) != expected:
        return [f"default active thread percentage {value:g}, the spec says {expected}"]
    return []


def compute_mode_findings(query: str) -> list[str]:
    """GPUs (``index, compute_mode`` CSV lines) not in EXCLUSIVE_PROCESS."""
    found = []
    for line in query.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 2 and cells[1].replace(" ", "_").lower() != COMPUTE_MODE.lower():
            found.append(f"GPU {cells[0]}: compute mode {cells[1]}")
    return found

