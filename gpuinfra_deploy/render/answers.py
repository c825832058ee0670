"""The facts a render answers each host with: recorded on the site (``--facts``, written by
``--record-facts``), or those of a fresh host of a named distribution (``--os``: the layers in
gpuinfra_deploy/assumed_facts/, plus the PCI functions the host's spec names)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
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
    """Facts of a fresh host assumed from its spec: the PCI functions its ``vfio_devices``
    name (an NVIDIA GPU and its audio function, one IOMMU group per card), so a hypervisor's
    files render without the host."""
    devices = [d for d in data.get("vfio_devices") or () if isinstance(d, str)
               and _PCI_ADDRESS.match(d)]
    if not devices:
        return {}
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
    return {"gpuinfra_deploy.facts.pci.PciFunctions": {"functions": functions}}


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
