"""The lab's one table of profiles: each profile's name, the spec its host gets, and what the
host is made of: for a container worker, the builder of the hardware its `nvidia-smi` stand-in
replays; for a QEMU guest (a virtual machine with Debian's own kernel), its emulated machine.

Everything that names a lab profile reads it from here: `gpuinfra lab up` (which workers get
which hardware, which guests run which machine), inventory/lab.py (each host's spec), the
hardware builder (the committed folders under gpuinfra_lab/hardware/) and the broken scenarios
(which host must fail). A new kind of guest is one more entry here (gpuinfra_lab/qemu.py builds any
machine).

Regenerate the hardware folders after changing a builder (gpuinfra_lab/replay.py) or this table::

    .venv/bin/python -m gpuinfra_lab.profiles
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuinfra_lab.replay import (
    HARDWARE,
    Profile,
    a100_pcie_bridge_missing,
    a100_sxm_mig_balanced,
    a100_sxm_mig_gpu1_differs,
    h100_pcie_bridged,
    h100_sxm_nvswitch,
)

HEAD_NAME = "lab-head"
# `lab up --backup`: Slurm's backup controller (the 'slurm_backup' group), sharing a folder of
# this machine with the head as slurmctld's StateSaveLocation (group_data/lab.py).
BACKUP_NAME = "lab-head2"
SHARED_STATE = "/srv/slurm/state"
# `lab up --login`: a Slurm login node (client commands and MUNGE, no slurmd).
LOGIN_NAME = "lab-login1"
MAX_WORKERS = 16
# `lab up --fleet N`: light workers for the benchmarks at fleet size (gpuinfra_lab/fleet.py),
# named lab-fleetN, at .100+N of the lab's /24 (the workers keep .11-.26).
FLEET_PREFIX = "lab-fleet"
MAX_FLEET = 120
MAX_GUESTS = 4  # per guest profile: each guest is an emulated machine (TCG) on two cores


@dataclass(frozen=True)
class GuestMachine:
    """The emulated machine of a guest profile (gpuinfra_lab/qemu.py adds the base: q35, the IOMMU,
    the
    disk, the SSH port forward).

    devices: QEMU arguments that lay out its PCI devices (the stand-in hardware).
    memory_mib, cpus: its size.
    segment: a private virtual segment (a name): each guest of the profile gets a second
        virtio NIC joined to the others' over a socket on 127.0.0.1 (the first guest listens,
        the second connects: two guests at most) with a static address from ``segment_subnet``
        (guest N: host N of the subnet).
    """

    devices: tuple[str, ...] = ()
    memory_mib: int = 1024
    cpus: int = 2
    segment: str | None = None
    segment_subnet: str = "10.77.0.0/24"


@dataclass(frozen=True)
class LabProfile:
    """One kind of lab host besides the head.

    spec: the host's spec keys in inventory/lab.py (what the site says the node is).
    build: a container worker: the builder of its replayed hardware (what the node shows).
    machine: a QEMU guest: its emulated machine (guest profiles have no ``build``).
    broken: the spec and the hardware disagree on purpose; verification must fail there.
    broken_of: a broken guest profile: the healthy profile whose machine it shares, so
        `lab up --broken` gives a running guest the broken spec without rebooting it.
    groups, host_prefix: the inventory groups of its hosts, named <host_prefix>1..N.
    expected_failures: systemd units that fail on this kind of lab host by design, with why
      (`gpuinfra lab reboot` and the verify suite accept these, and only these).
    """

    name: str
    spec: Mapping[str, Any]
    build: Callable[[], Profile] | None = None
    broken: bool = False
    machine: GuestMachine | None = None
    broken_of: str | None = None
    groups: tuple[str, ...] = ("workers",)
    host_prefix: str = "lab-worker"
    expected_failures: Mapping[str, str] = field(default_factory=dict)
    # Replayed hardware the unit tests read (tests/unit/test_lab_mig_replay.py); `lab up`
    # never starts it (neither a default worker nor the --broken one).
    replay_only: bool = False
    # Spec keys that differ on a release (`lab up --os`): what that release's archive can
    # deploy where the default spec asks for what it cannot.
    on_release: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def is_guest(self) -> bool:
        return self.machine is not None

    def spec_on(self, os_name: str | None) -> dict[str, Any]:
        """The host's spec keys on the release ``os_name`` (None: the default spec)."""
        return {**self.spec, **self.on_release.get(os_name or "", {})}


# A lab worker is a container on this machine's kernel, which has no NVIDIA module: the units
# that need the module fail at every boot. On a real node each of these is a real failure.
NO_NVIDIA_MODULE = {
    "nvidia-persistenced.service": "the container's kernel (this machine's) has no NVIDIA "
                                   "module, so there is no GPU to keep initialised",
    "systemd-modules-load.service": "it cannot load the NVIDIA modules the driver packages "
                                    "list in /etc/modules-load.d: no such module in this "
                                    "kernel",
}


# The hypervisor guest's stand-in "GPUs". THESE ARE NOT GPUs: emulated PCI devices with drivers
# of their own in Debian's kernel, laid out so the VFIO role meets what real cards meet.
# QEMU numbers the buses: root ports at 00:04.0-00:06.0 give buses 01-03, the bridge bus 04.
STANDIN_GPU = "1af4:1044"  # virtio-rng, modern (what a real site names 10de:xxxx)
STANDIN_AUDIO = "8086:293e"  # ICH9 HD audio: the "audio function" beside two stand-in GPUs
HV_MACHINE = GuestMachine(devices=(
    # "GPU" 0 (0000:01:00.0) and "GPU" 1 (0000:02:00.0): each behind a PCIe root port of its
    # own (QEMU's root ports have ACS), each alone in its IOMMU group. Same model; GPU 1 stays
    # with the host, so the role binds by address (driverctl), not by ID.
    "-device", "pcie-root-port,id=rp1,chassis=1,slot=1,bus=pcie.0,addr=0x4",
    "-device", "virtio-rng-pci,bus=rp1,disable-legacy=on",
    "-device", "pcie-root-port,id=rp2,chassis=2,slot=2,bus=pcie.0,addr=0x5",
    "-device", "virtio-rng-pci,bus=rp2,disable-legacy=on",
    # Behind a PCIe-to-PCI bridge (0000:03:00.0, no ACS: conventional PCI) the pair "GPU" 2
    # and 3 (0000:04:01.0, 0000:04:02.0) shares one IOMMU group with the bridge and an audio
    # device (0000:04:03.0), as a card's functions or cards behind a switch without ACS do.
    "-device", "pcie-root-port,id=rp3,chassis=3,slot=3,bus=pcie.0,addr=0x6",
    "-device", "pcie-pci-bridge,id=br1,bus=rp3",
    "-device", "virtio-rng-pci,bus=br1,addr=0x1,disable-legacy=on",
    "-device", "virtio-rng-pci,bus=br1,addr=0x2,disable-legacy=on",
    "-audiodev", "none,id=snd0",
    "-device", "ich9-intel-hda,bus=br1,addr=0x3",
))
# The segment NIC's place on the guest's root bus (gpuinfra_lab/qemu.py puts it there), hence its
# name: systemd's predictable name for bus 0, slot 0x10. The Soft-RoCE device is made on it.
SEGMENT_SLOT = 0x10
SEGMENT_NETDEV = f"enp0s{SEGMENT_SLOT}"
# Two guests on a private segment with Soft-RoCE (rdma_rxe) on it: real verbs devices and
# traffic, emulated speed. rxe derives its rate from the netdev's speed, which QEMU's
# virtio-net leaves unknown: 1000 Mb/s assumed, width 1X SDR, 2.5 Gb/s (gpuinfra/knowledge/
# nics.py). GID index 1: RoCE v2 over the IPv4 address (0 is the IPv6 link-local one).
RDMA_SPEC = {
    "soft_roce": True,
    "rdma_nics": [{"name": "rxe0", "netdev": SEGMENT_NETDEV, "rate_gbps": 2.5,
                   "gid_index": 1}],
}
RDMA_MACHINE = GuestMachine(memory_mib=1024, cpus=1, segment="rdma")

# Healthy: GPU 0 to one VM; the NVLink-"bridged" pair and the audio device of their group to
# another (the audio device by ID, the GPUs by address); GPU 1 stays the host's.
HV_SPEC = {
    "vfio_devices": ["0000:01:00.0", "0000:04:01.0", "0000:04:02.0", STANDIN_AUDIO],
    "vms": [
        {"name": "lab-vm1", "devices": ["0000:01:00.0"], "vcpus": 1, "memory_mib": 1024},
        {"name": "lab-vm2", "devices": ["0000:04:01.0", "0000:04:02.0", "0000:04:03.0"],
         "vcpus": 2, "memory_mib": 2048},
    ],
    "vfio_nvlink": [{"gpus": ["0000:04:01.0", "0000:04:02.0"], "fabric": "bridge"}],
}
# Broken: the pair without the audio device of its IOMMU group (left to the host's driver).
HV_SPEC_GROUP_SPLIT = {
    "vfio_devices": ["0000:01:00.0", "0000:04:01.0", "0000:04:02.0"],
    "vms": [
        {"name": "lab-vm1", "devices": ["0000:01:00.0"], "vcpus": 1, "memory_mib": 1024},
        {"name": "lab-vm2", "devices": ["0000:04:01.0", "0000:04:02.0"], "vcpus": 2,
         "memory_mib": 2048},
    ],
    "vfio_nvlink": [{"gpus": ["0000:04:01.0", "0000:04:02.0"], "fabric": "bridge"}],
}


# The MIG profiles' spec: all-balanced on both GPUs (a mixed layout: mig_strategy "mixed" in
# group_data/lab.py).
MIG_SPEC = {"gpu_model": "A100-SXM4-80GB", "gpu_count": 2, "gpu_topology": "pcie-only",
            "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 1, "2g.20gb": 1,
                                                          "1g.10gb": 2}}}


PROFILES: dict[str, LabProfile] = {p.name: p for p in (
    LabProfile("8x-h100-sxm-nvswitch",
               {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
                "gpu_topology": "nvswitch-all-to-all"}, h100_sxm_nvswitch,
               expected_failures=NO_NVIDIA_MODULE),
    LabProfile("2x-h100-pcie-bridged",
               {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs",
                # MPS: the daemon runs for real without a GPU (roles/gpu_sharing/README.md)
                "gpu_sharing": {"mode": "mps", "clients": 4, "thread_percentage": 50,
                                "pinned_mem_limit": "8G"}},
               h100_pcie_bridged, expected_failures=NO_NVIDIA_MODULE,
               # Debian 13 builds the MPS daemon (nvidia-cuda-mps) for its 550 driver only,
               # none for the 535 branch (nvidia-graphics-drivers-tesla-535 has no such binary:
               # trixie non-free Packages, 2026-12-07), and the roles refuse MPS there on 535:
               # on trixie this worker shares its GPUs by time-slicing (Slurm's shard GRES).
               on_release={"debian-13": {"gpu_sharing": {"mode": "time-slicing",
                                                         "replicas": 4}}}),
    # Spec: NVLink-bridged pairs; hardware: PCIe only, P2P "NS" (the bridge is missing).
    LabProfile("2x-a100-pcie-bridge-missing",
               {"gpu_model": "A100-PCIE-40GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"},
               a100_pcie_bridge_missing, broken=True, expected_failures=NO_NVIDIA_MODULE),
    # MIG nodes, replayed from the DGX A100 `-L` capture (not among the default workers: a MIG
    # node's slurmd needs NVML, AutoDetect=nvml, which a container without a GPU cannot give).
    # The verify suite's MIG checks pass on the first and fail on GPU 1 of the second
    # (tests/unit/test_lab_mig_replay.py).
    LabProfile("2x-a100-sxm4-mig-balanced", MIG_SPEC, a100_sxm_mig_balanced,
               expected_failures=NO_NVIDIA_MODULE, replay_only=True),
    LabProfile("2x-a100-sxm4-mig-gpu1-differs", MIG_SPEC, a100_sxm_mig_gpu1_differs,
               broken=True, expected_failures=NO_NVIDIA_MODULE, replay_only=True),
    # QEMU guests (`lab up --vm NAME[=N]`).
    LabProfile("hv-standins", HV_SPEC, machine=HV_MACHINE, groups=("hypervisors",),
               host_prefix="lab-hv"),
    # Spec: the pair passed through without the device of its IOMMU group; the VFIO role
    # must refuse it and the verify suite must name the group.
    LabProfile("hv-standins-group-split", HV_SPEC_GROUP_SPLIT, machine=HV_MACHINE,
               broken=True, broken_of="hv-standins", groups=("hypervisors",),
               host_prefix="lab-hv"),
    # Two RDMA workers (`lab up --vm rdma-soft-roce=2`) on one segment, Soft-RoCE between them.
    LabProfile("rdma-soft-roce", RDMA_SPEC, machine=RDMA_MACHINE, host_prefix="lab-rdma"),
)}

# Healthy workers take these profiles in turn; `lab up --broken` adds one broken worker.
WORKER_PROFILES = tuple(name for name, p in PROFILES.items()
                        if not p.broken and not p.is_guest and not p.replay_only)
BROKEN_PROFILE = next(name for name, p in PROFILES.items()
                      if p.broken and not p.is_guest and not p.replay_only)
REPLAY_ONLY = tuple(name for name, p in PROFILES.items() if p.replay_only)
# Guests `lab up --vm` may start, and the broken variant `--broken` gives each of them.
GUEST_PROFILES = tuple(name for name, p in PROFILES.items() if p.is_guest and not p.broken)
BROKEN_GUESTS = {p.broken_of: name for name, p in PROFILES.items() if p.broken_of}


@dataclass(frozen=True)
class HostPlan:
    """One lab host as `lab up` means to run it."""

    name: str
    groups: tuple[str, ...]
    profile: str | None = None
    # The controllers of a lab with a backup controller mount one folder of this machine at
    # SHARED_STATE (gpuinfra_lab/podman.py).
    shared_state: bool = False

    @property
    def spec(self) -> Mapping[str, Any]:
        return PROFILES[self.profile].spec if self.profile else {}

    @property
    def machine(self) -> GuestMachine | None:
        """The emulated machine of a QEMU guest; None for a container."""
        return PROFILES[self.profile].machine if self.profile else None


def guest_number(name: str) -> int:
    """N of a guest named ``lab-hvN`` / ``lab-rdmaN``."""
    digits = name[len(name.rstrip("0123456789")):]
    return int(digits) if digits else 1


def guest_mgmt_address(name: str) -> str:
    """The address a guest's management NIC gets from QEMU's user-mode network: its DHCP
    server starts at ``10.0.2.(14+N)`` for guest N (qemu_command's ``dhcpstart``; guest 1 keeps
    QEMU's default 10.0.2.15), so no two guests share one."""
    return f"10.0.2.{14 + guest_number(name)}"


def guest_node_address(profile: LabProfile, name: str) -> str:
    """A guest's cluster address (node_address): on its private segment, host N of the
    segment's subnet for guest N (qemu.segment_places); without one, its management address."""
    import ipaddress

    machine = profile.machine
    if machine is not None and machine.segment:
        return str(ipaddress.ip_network(machine.segment_subnet)[guest_number(name)])
    return guest_mgmt_address(name)


def host_address(subnet: str, name: str) -> str:
    """A container's fixed address (head .10, lab-workerN .10+N): restarts keep ssh_config
    valid, and inventory/lab.py lists it before the lab is up."""
    import ipaddress

    if name == HEAD_NAME:
        offset = 10
    elif name == BACKUP_NAME:
        offset = 9
    elif name == LOGIN_NAME:
        offset = 8
    elif name.startswith(FLEET_PREFIX):
        offset = 100 + int(name.removeprefix(FLEET_PREFIX))
    else:
        offset = 10 + int(name.removeprefix("lab-worker"))
    return str(ipaddress.ip_network(subnet)[offset])


def plan_hosts(workers: int = 2, broken: bool = False,
               guests: Mapping[str, int] | None = None, fleet: int = 0,
               backup: bool = False, login: bool = False) -> list[HostPlan]:
    """The head (and with ``backup`` Slurm's backup controller, the two sharing slurmctld's
    state folder; with ``login`` a Slurm login node), ``workers`` healthy workers (profiles
    cycled), the broken one if asked,
    ``guests`` (guest profile -> how many; with ``broken``, each in its broken variant when
    the profile has one) and ``fleet`` light workers (lab-fleetN: the healthy profiles cycled,
    from the fleet image, gpuinfra_lab/fleet.py)."""
    hosts = [HostPlan(HEAD_NAME, ("head",), shared_state=backup)]
    if backup:
        hosts.append(HostPlan(BACKUP_NAME, ("slurm_backup",), shared_state=True))
    if login:
        hosts.append(HostPlan(LOGIN_NAME, ("login",)))
    for i in range(1, workers + 1):
        profile = WORKER_PROFILES[(i - 1) % len(WORKER_PROFILES)]
        hosts.append(HostPlan(f"lab-worker{i}", ("workers",), profile))
    for i in range(1, fleet + 1):
        profile = WORKER_PROFILES[(i - 1) % len(WORKER_PROFILES)]
        hosts.append(HostPlan(f"{FLEET_PREFIX}{i}", ("workers",), profile))
    if broken:
        hosts.append(HostPlan(f"lab-worker{workers + 1}", ("workers",), BROKEN_PROFILE))
    for name, count in (guests or {}).items():
        chosen = PROFILES[BROKEN_GUESTS.get(name, name) if broken else name]
        hosts += [HostPlan(f"{chosen.host_prefix}{i}", chosen.groups, chosen.name)
                  for i in range(1, count + 1)]
    return hosts


def guest_problem(name: str, count: int) -> str | None:
    """What is wrong with asking `lab up` for ``count`` guests of profile ``name``."""
    if name not in GUEST_PROFILES:
        return f"unknown guest profile {name!r} (known: {', '.join(GUEST_PROFILES)})"
    machine = PROFILES[name].machine
    limit = 2 if machine is not None and machine.segment else MAX_GUESTS
    if not 1 <= count <= limit:
        return f"{name}: between 1 and {limit} guests"
    return None


def expected_failures(profile: str | None) -> Mapping[str, str]:
    """The units a lab host of ``profile`` (None: the head) fails by design, with why."""
    return PROFILES[profile].expected_failures if profile else {}


def broken_host(workers: int = 2) -> str:
    """The name `lab up --broken` gives the broken worker."""
    return plan_hosts(workers, broken=True)[-1].name


def build(name: str) -> dict[str, str]:
    """Every file of profile ``name``'s hardware folder: {filename: text}."""
    profile = PROFILES[name]
    if profile.build is None:
        raise ValueError(f"gpuinfra_lab/profiles.py: {name} is a guest profile: "
                         "no replayed hardware")
    built = profile.build()
    if built.name != name:
        raise ValueError(f"gpuinfra_lab/profiles.py: {name}'s builder makes {built.name!r}")
    if built.base is not None and PROFILES[built.base].build().gpus != built.gpus:
        raise ValueError(f"gpuinfra_lab/profiles.py: {name}'s GPUs differ from those of its "
                         f"base {built.base}, whose gpus.json it answers from")
    return built.render(profile.spec["gpu_model"])


def replayed() -> list[str]:
    """The profiles with replayed hardware (container workers)."""
    return [name for name, p in PROFILES.items() if p.build is not None]


def write_all(root: Path = HARDWARE) -> None:
    """(Re)write every profile's hardware folder under ``root``, removing stale files."""
    for name in replayed():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        files = build(name)
        for stale in {p.name for p in folder.iterdir()} - set(files):
            (folder / stale).unlink()
        for filename, text in files.items():
            (folder / filename).write_bytes(text.encode("utf-8"))


if __name__ == "__main__":
    write_all()
    sys.stdout.write(f"wrote {', '.join(replayed())} under {HARDWARE}\n")


def lab_fabric(workers: Sequence[str]) -> dict[str, list[str]]:
    """The lab's fabric (fabric_switches, group_data/lab.py): the container workers alternate
    between two leaf switches (lab-worker1 and every odd one on leaf1, the even ones on leaf2,
    the fleet's likewise), each kind of QEMU guest on a leaf of its own, one spine above every
    leaf. A 2-node job asking for one leaf (--switches=1) then waits in the default lab, whose
    two workers are on different leaves (gpuinfra_lab/topology_placement.py)."""
    leaves: dict[str, list[str]] = {}
    for name in workers:
        prefix = name.rstrip("0123456789")
        if prefix in ("lab-worker", FLEET_PREFIX):
            leaf = "leaf1" if guest_number(name) % 2 else "leaf2"
        else:
            leaf = f"leaf-{prefix.removeprefix('lab-')}"
        leaves.setdefault(leaf, []).append(name)
    return {**leaves, "spine": list(leaves)} if leaves else {}
