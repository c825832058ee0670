"""`nvidia-smi -q`: each GPU's NVLink fabric registration (the ``Fabric`` section).

Shape (fixture nvidia-smi-q/8x-h100-80gb-hbm3-bare-metal-...; newer drivers add the last
four fields, which GB200 NVL72 nodes fill in)::

    ==============NVSMI LOG==============
    ...
    GPU 00000000:19:00.0
        Product Name                          : NVIDIA H100 80GB HBM3
        ...
        Fabric
            State                             : Completed
            Status                            : Success
            CliqueId                          : 32766
            ClusterUUID                       : 9b5d...
            Health
                Bandwidth                     : Full

GPUs are numbered in output order (nvidia-smi lists them by index). A GPU block without a
``Fabric`` section (``-q -d ECC`` and other filtered queries) has ``fabric`` None. An excerpt
without the ``NVSMI LOG`` header (a ``Fabric`` section pasted alone, ``grep -A3 -C3 Fabric``)
is read when it holds a ``Fabric`` section: each section without its ``GPU <bus id>`` line is
a GPU of unknown address, and ``cuts`` says the capture is not the whole log (issue 47). Text
that is neither raises :class:`ParseError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "nvidia-smi -q"

_HEADER = "==============NVSMI LOG=============="
_GPU_BLOCK = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
_FIELD = re.compile(r"(?P<indent> *)(?P<key>[A-Za-z][A-Za-z0-9 ()/.-]*?)\s*(?::\s*(?P<value>.*))?")
# Fabric keys as printed -> attribute names (the Health sub-section is kept whole).
_FABRIC_KEYS = {"State": "state", "Status": "status", "CliqueId": "clique_id",
                "ClusterUUID": "cluster_uuid"}


@dataclass
class GpuFabric:
    """One GPU's Fabric section: values as printed ("Completed", "N/A", ...), None if absent."""

    state: str | None = None
    status: str | None = None
    clique_id: str | None = None
    cluster_uuid: str | None = None
    health: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "status": self.status, "clique_id": self.clique_id,
                "cluster_uuid": self.cluster_uuid, "health": dict(self.health)}


@dataclass
class FabricGpu:
    """A GPU block: bus id, product name (when the query printed it), fabric (None: not shown)."""

    index: int
    bus_id: str
    name: str | None = None
    fabric: GpuFabric | None = None

    def to_json(self) -> dict[str, Any]:
        return {"bus_id": self.bus_id, "name": self.name,
                "fabric": self.fabric.to_json() if self.fabric else None}


@dataclass
class FabricReport:
    """Every GPU block of the output, keyed ``GPU<n>`` in output order."""

    gpus: dict[str, FabricGpu] = field(default_factory=dict)
    cuts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"GPU<n>": {...}}``, and ``"cuts"`` when the capture is an excerpt."""
        out: dict[str, Any] = {key: gpu.to_json() for key, gpu in self.gpus.items()}
        if self.cuts:
            out["cuts"] = list(self.cuts)
        return out


def parse_fabric(text: str) -> FabricReport:
    """Parse `nvidia-smi -q` output; returns :class:`FabricReport` (see module docstring)."""
    lines = clean_lines(text)
    report = FabricReport()
    excerpt = not any(line.strip() == _HEADER for line in lines)
    if excerpt:
        if not any(line.strip() == "Fabric" for line in lines):
            first = next((line.strip() for line in lines if line.strip()), "")
            raise ParseError(SOURCE, "no '==============NVSMI LOG==============' header and no "
                             "Fabric section: not `nvidia-smi -q` output (starts with "
                             f"{first[:60]!r})")
        report.cuts.append("no NVSMI LOG header: an excerpt of `nvidia-smi -q` (a grep, a "
                           "section pasted alone): the GPUs outside it are not judged")
    gpu: FabricGpu | None = None
    section: list[tuple[int, str]] = []  # (indent, key) of the open sub-sections
    for line in lines:
        if not line.strip():
            continue
        block = _GPU_BLOCK.fullmatch(line)
        if block:
            gpu = FabricGpu(len(report.gpus), block.group(1))
            report.gpus[f"GPU{gpu.index}"] = gpu
            section = []
            continue
        match = _FIELD.fullmatch(line)
        if excerpt and match is not None and match["key"] == "Fabric" and \
                match["value"] is None and (gpu is None or gpu.fabric is not None):
            # a Fabric section without its GPU line: a GPU of unknown address
            gpu = FabricGpu(len(report.gpus), "unknown (not in the excerpt)")
            report.gpus[f"GPU{gpu.index}"] = gpu
            section = []
        if gpu is None or match is None:
            continue  # the log header (Timestamp, Driver Version...) and unrecognised lines
        indent, key, value = len(match["indent"]), match["key"], match["value"]
        while section and section[-1][0] >= indent:
            section.pop()
        if value is None:
            section.append((indent, key))
            if key == "Fabric" and (indent == 4 or (excerpt and len(section) == 1)):
                gpu.fabric = GpuFabric()
            continue
        _record(gpu, [k for _, k in section], key, value.strip())
    if not report.gpus:
        raise ParseError(SOURCE, "the log lists no `GPU <bus id>` block")
    return report


def _record(gpu: FabricGpu, path: list[str], key: str, value: str) -> None:
    if not path and key == "Product Name":
        gpu.name = value
        return
    if not path or path[0] != "Fabric" or gpu.fabric is None:
        return
    if len(path) == 1 and key in _FABRIC_KEYS:
        setattr(gpu.fabric, _FABRIC_KEYS[key], value)
    elif len(path) == 2 and path[1] == "Health":
        gpu.fabric.health[key] = value
    # other Fabric fields (later drivers add some) are not judged, so not kept
