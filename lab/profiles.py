"""The lab's one table of profiles: each profile's name, the spec its worker gets, and the
builder of the hardware its `nvidia-smi` stand-in replays.

Everything that names a lab profile reads it from here: `gpuinfra lab up` (which workers get
which hardware), inventory/lab.py (each worker's spec), the hardware builder (the committed
folders under lab/hardware/) and the broken-nvlink scenario (which host must fail).

Regenerate the hardware folders after changing a builder (lab/replay.py) or this table::

    .venv/bin/python -m lab.profiles
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.replay import (
    HARDWARE,
    Profile,
    a100_pcie_bridge_missing,
    h100_pcie_bridged,
    h100_sxm_nvswitch,
)

HEAD_NAME = "lab-head"
MAX_WORKERS = 16


@dataclass(frozen=True)
class LabProfile:
    """One kind of lab worker.

    spec: the worker's spec keys in inventory/lab.py (what the site says the node is).
    build: the builder of its replayed hardware (what the node shows).
    broken: the spec and the hardware disagree on purpose; verification must fail there.
    expected_failures: systemd units that fail on this kind of lab host by design, with why
      (`gpuinfra lab reboot` and the verify suite accept these, and only these).
    """

    name: str
    spec: Mapping[str, Any]
    build: Callable[[], Profile]
    broken: bool = False
    expected_failures: Mapping[str, str] = field(default_factory=dict)


# A lab worker is a container on this machine's kernel, which has no NVIDIA module: the units
# that need the module fail at every boot. On a real node each of these is a real failure.
NO_NVIDIA_MODULE = {
    "nvidia-persistenced.service": "the container's kernel (this machine's) has no NVIDIA "
                                   "module, so there is no GPU to keep initialised",
    "systemd-modules-load.service": "it cannot load the NVIDIA modules the driver packages "
                                    "list in /etc/modules-load.d: no such module in this "
                                    "kernel",
}


PROFILES: dict[str, LabProfile] = {p.name: p for p in (
    LabProfile("8x-h100-sxm-nvswitch",
               {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
                "gpu_topology": "nvswitch-all-to-all"}, h100_sxm_nvswitch,
               expected_failures=NO_NVIDIA_MODULE),
    LabProfile("2x-h100-pcie-bridged",
               {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"},
               h100_pcie_bridged, expected_failures=NO_NVIDIA_MODULE),
    # Spec: NVLink-bridged pairs; hardware: PCIe only, P2P "NS" (the bridge is missing).
    LabProfile("2x-a100-pcie-bridge-missing",
               {"gpu_model": "A100-PCIE-40GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"},
               a100_pcie_bridge_missing, broken=True, expected_failures=NO_NVIDIA_MODULE),
)}

# Healthy workers take these profiles in turn; `lab up --broken` adds one broken worker.
WORKER_PROFILES = tuple(name for name, p in PROFILES.items() if not p.broken)
BROKEN_PROFILE = next(name for name, p in PROFILES.items() if p.broken)


@dataclass(frozen=True)
class HostPlan:
    """One lab host as `lab up` means to run it."""

    name: str
    groups: tuple[str, ...]
    profile: str | None = None

    @property
    def spec(self) -> Mapping[str, Any]:
        return PROFILES[self.profile].spec if self.profile else {}


def plan_hosts(workers: int = 2, broken: bool = False) -> list[HostPlan]:
    """The head, ``workers`` healthy workers (profiles cycled), and the broken one if asked."""
    hosts = [HostPlan(HEAD_NAME, ("head",))]
    for i in range(1, workers + 1):
        profile = WORKER_PROFILES[(i - 1) % len(WORKER_PROFILES)]
        hosts.append(HostPlan(f"lab-worker{i}", ("workers",), profile))
    if broken:
        hosts.append(HostPlan(f"lab-worker{workers + 1}", ("workers",), BROKEN_PROFILE))
    return hosts


def expected_failures(profile: str | None) -> Mapping[str, str]:
    """The units a lab host of ``profile`` (None: the head) fails by design, with why."""
    return PROFILES[profile].expected_failures if profile else {}


def broken_host(workers: int = 2) -> str:
    """The name `lab up --broken` gives the broken worker."""
    return plan_hosts(workers, broken=True)[-1].name


def build(name: str) -> dict[str, str]:
    """Every file of profile ``name``'s hardware folder: {filename: text}."""
    profile = PROFILES[name]
    built = profile.build()
    if built.name != name:
        raise ValueError(f"lab/profiles.py: {name}'s builder makes {built.name!r}")
    return built.render(profile.spec["gpu_model"])


def write_all(root: Path = HARDWARE) -> None:
    """(Re)write every profile's hardware folder under ``root``, removing stale files."""
    for name in PROFILES:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        files = build(name)
        for stale in {p.name for p in folder.iterdir()} - set(files):
            (folder / stale).unlink()
        for filename, text in files.items():
            (folder / filename).write_bytes(text.encode("utf-8"))


if __name__ == "__main__":
    write_all()
    sys.stdout.write(f"wrote {', '.join(PROFILES)} under {HARDWARE}\n")
