"""The facts a render answers each host with: recorded on the site (``--facts``, written by
``--record-facts``), or those of a fresh host of a named distribution (``--os``: the layers in
gpuinfra_deploy/assumed_facts/, plus the PCI functions the host's spec names)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pyinfra.api.host import Host

from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy.plan import MissingFact, answer, fact_key, fact_label, merge_facts, read_facts

ASSUMED = Path(__file__).resolve().parents[1] / "assumed_facts"

# Fresh hosts of each distribution the roles support: the fact layers answered, in order.
# hardware.json: an 8-GPU H100 SXM node on a small machine (the lab's replayed worker).
_FRESH = ("munge-fresh", "slurm-fresh", "monitoring-fresh", "vfio-fresh", "rdma-fresh",
          "hardware")
OS_LAYERS: dict[str, tuple[str, ...]] = {
    "debian-12": ("base-fresh", "debian-12", "gpu-fresh", "gpu-debian-12", *_FRESH),
    "debian-13": ("base-fresh", "debian-13", "gpu-fresh", "gpu-debian-13", *_FRESH),
    "ubuntu-22.04": ("base-fresh", "ubuntu-22.04", "gpu-fresh", "gpu-ubuntu-22.04", *_FRESH),
    "ubuntu-24.04": ("base-fresh", "ubuntu-24.04", "gpu-fresh", "gpu-ubuntu-24.04", *_FRESH),
}

# Facts saying what a file holds now: answered "absent" when the files are collected, so
# every managed file shows its whole upload; never a file's dependency.
FILE_STATE = frozenset({"files.File", "files.Directory", "files.Sha1File", "files.Sha256File",
                        "files.Md5File", "gpuinfra_deploy.ops.block.BlockDigest"})


def assumed_facts(os_name: str) -> dict[str, Any]:
    if os_name not in OS_LAYERS:
        raise GpuinfraError(f"--os {os_name}: not a distribution the roles support; give one "
                            f"of {', '.join(OS_LAYERS)}")
    return merge_facts(*(read_facts(ASSUMED / f"{name}.json") for name in OS_LAYERS[os_name]))


def recorded_facts(source: Path, hosts: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Facts per host from ``source``: a folder of ``<host>.json`` (a host without its file
    has none), or one file answering every host."""
    if source.is_file():
        facts = read_facts(source)
        return {h: facts for h in hosts}
    if not source.is_dir():
        raise GpuinfraError(f"--facts {source}: no such file or folder (give the folder "
                            "`gpuinfra render --record-facts` wrote, or one facts file)")
    return {h: read_facts(source / f"{h}.json") for h in hosts
            if (source / f"{h}.json").is_file()}


_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def spec_hardware(data: Mapping[str, Any]) -> dict[str, Any]:
    """Facts of a fresh host assumed from its spec: its GPUs (gpu_model x gpu_count, linked as
    gpu_topology says: :func:`spec_gpus`), and the PCI functions its ``vfio_devices`` name (an
    NVIDIA GPU and its audio function, one IOMMU group per card), so a hypervisor's files
    render without the host. Never another machine's GPUs (issue 45: a 4x L40S node rendered
    with the lab's 8 NVLink-linked GPUs)."""
    facts = {**spec_gpus(data), **spec_cpus(data)}
    devices = [d for d in data.get("vfio_devices") or () if isinstance(d, str)
               and _PCI_ADDRESS.match(d)]
    if not devices:
        return facts
    functions = []
    for group, address in enumerate(sorted(devices), start=100):
        audio = address[:-1] + "1"
        functions += [{"address": address, "vendor_id": "10de", "device_id": "2230",
                       "class_code": "030000", "driver": None, "iommu_group": group,
                       "driver_override": None}]
        if audio not in devices:
            functions += [{"address": audio, "vendor_id": "10de", "device_id": "1aef",
                           "class_code": "040300", "driver": None, "iommu_group": group,
                           "driver_override": None}]
    return {**facts, "gpuinfra_deploy.facts.pci.PciFunctions": {"functions": functions}}


_CPU_LAYOUT = "gpuinfra_deploy.facts.system.CpuLayout"
_MEM_TOTAL = "gpuinfra_deploy.facts.system.MemTotalMb"


def spec_cpus(data: Mapping[str, Any]) -> dict[str, Any]:
    """The CPU and memory facts of a node's spec (``node_hardware``: gpuinfra/spec/hardware.py),
    as ``lscpu`` and /proc/meminfo would give them; without it, none: the host's hardware is
    unknown (slurm.conf says so: ``CPUs=1`` with a note), never another machine's (issue 45:
    every previewed node got the lab's CPUs=2)."""
    from gpuinfra.spec import HostInput
    from gpuinfra.spec.checks import Collector
    from gpuinfra.spec.hardware import hardware_spec

    hardware = hardware_spec(HostInput("render", (), data), Collector())
    if hardware is None:
        return {_CPU_LAYOUT: {}, _MEM_TOTAL: None}
    cores = hardware.sockets * hardware.cores_per_socket
    # lscpu -p=CPU,CORE,SOCKET,NODE rows: thread t of core c is CPU c + t * cores (Linux's
    # usual numbering: the first threads of every core, then the second ones).
    cpus = [[core + thread * cores, core, core // hardware.cores_per_socket,
             core // hardware.cores_per_socket]
            for thread in range(hardware.threads_per_core) for core in range(cores)]
    return {_CPU_LAYOUT: {"cpus": cpus, "sockets": hardware.sockets,
                          "cores_per_socket": hardware.cores_per_socket,
                          "threads_per_core": hardware.threads_per_core},
            _MEM_TOTAL: hardware.memory_gb * 1024}


# nvidia-smi's memory.total of a GPU, MiB per GB of the model's size (an H100 80GB reports
# 81559 MiB: tests/fixtures/real/nvidia-smi-query-gpu).
_MIB_PER_GB = 81559 / 80


def spec_gpus(data: Mapping[str, Any]) -> dict[str, Any]:
    """The GPU facts of a node's spec (gpu_model, gpu_count, gpu_topology): that many GPUs of
    the model, NVLink-linked (``NV<n>``) on the pairs the topology profile requires with its
    link counts, ``NODE`` elsewhere; bus IDs, UUIDs and memory made up. {} without a valid
    GPU spec (the spec gate says why)."""
    from gpuinfra.knowledge.gpus import gpu_model
    from gpuinfra.knowledge.topology import PROFILES, nvlink_pairs

    model = gpu_model(str(data.get("gpu_model") or ""))
    count, profile = data.get("gpu_count"), PROFILES.get(str(data.get("gpu_topology") or ""))
    if model is None or profile is None or isinstance(count, bool) or not isinstance(count, int) \
            or not 0 < count <= 64:
        return {}
    names = [f"GPU{i}" for i in range(count)]
    links: dict[str, dict[str, str]] = {a: {b: "NODE" for b in names if b != a} for a in names}
    for pair in nvlink_pairs(profile, model, count):
        links[names[pair.a]][names[pair.b]] = links[names[pair.b]][names[pair.a]] = \
            f"NV{pair.min_links}"
    gpus = [{"index": i, "name": (model.smi_names or (model.key,))[0],
             "uuid": f"GPU-00000000-0000-0000-0000-{i:012d}", "model": model.key,
             "mig_devices": [], "pci.bus_id": f"00000000:{0x18 + i:02X}:00.0",
             "driver_version": _assumed_driver(), "persistence_mode": "Enabled",
             "memory.total": int(model.memory_gb * _MIB_PER_GB)} for i in range(count)]
    return {"gpuinfra_deploy.facts.nvidia.NvidiaGpus": {"gpus": gpus},
            "gpuinfra_deploy.facts.nvidia.NvidiaTopology": {
                "gpus": names, "nics": [], "nic_devices": {}, "links": links,
                "cpu_affinity": dict.fromkeys(names), "numa_affinity": dict.fromkeys(names)},
            "gpuinfra_deploy.facts.nvidia.NvidiaDeviceMinors": {}}



@lru_cache(maxsize=1)
def _assumed_driver() -> str:
    """The driver version the assumed GPU node reports (hardware.json, the lab's replayed
    H100): the spec's GPUs are driven by the same assumed driver."""
    gpus = read_facts(ASSUMED / "hardware.json")["gpuinfra_deploy.facts.nvidia.NvidiaGpus"]
    return str(gpus["gpus"][0]["driver_version"])


class Answers:
    """Facts of each host: recorded ones first, else the assumed set (when given); each
    answer noted as (host asked, fact, assumed?) for the files' dependencies."""

    def __init__(self, recorded: Mapping[str, Mapping[str, Any]],
                 assumed: Mapping[str, Mapping[str, Any]] | None) -> None:
        self.recorded = recorded
        self.assumed = assumed
        self.events: list[tuple[str, str, bool]] = []
        self.files_absent = False
        # (host, path) -> bytes an earlier operation of the run uploads: what a later one
        # reads there (pyinfra generates an operation's commands again when it executes)
        self.written: dict[tuple[str, str], bytes] = {}

    def get_fact(self, host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        if self.files_absent and fact_key(cls) in FILE_STATE:
            return None
        path = kwargs.get("path")
        if self.files_absent and fact_key(cls) == "files.FileContents" \
                and (host.name, path) in self.written:
            return self.written[(host.name, path)].decode(errors="replace").splitlines()
        label = fact_label(cls, args, kwargs)
        own = self.recorded.get(host.name)
        if own is not None:
            try:
                value = answer(own, [], cls, args, kwargs)
            except MissingFact:
                if self.assumed is None:
                    raise MissingFact(f"the facts recorded for {host.name} lack {label}: "
                                      "record them again (gpuinfra render INVENTORY "
                                      "--record-facts DIR), or add --os to assume the rest"
                                      ) from None
            else:
                self.events.append((host.name, label, False))
                return value
        if self.assumed is None or host.name not in self.assumed:
            raise MissingFact(f"no facts recorded for host {host.name}: give --facts DIR "
                              f"with {host.name}.json, or --os to assume a fresh host")
        try:
            value = answer(self.assumed[host.name], [], cls, args, kwargs)
        except MissingFact:
            # Not in the set: what pyinfra answers on a host without the fact's tool (a
            # fresh host has no mstconfig, no ibv_devices...).
            value = cls.default()  # type: ignore[attr-defined]
        self.events.append((host.name, label, True))
        return value

    def answerer(self) -> Callable[..., Any]:
        def get_fact(host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
            return self.get_fact(host, cls, *args, **kwargs)

        return get_fact
