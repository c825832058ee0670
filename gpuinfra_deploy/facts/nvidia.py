"""Facts about the NVIDIA GPUs and their driver: nvidia-smi's GPU list, MIG state, topology,
device nodes and minors, and the container runtimes' config.
"""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from gpuinfra.containers.runtimes import CONFIG_PATHS, check_runtime
from gpuinfra.errors import ParseError
from gpuinfra.parsers.gpus import parse_gpus
from gpuinfra.parsers.system import (
    DEVICE_NODES_COMMAND,
    GPU_INFORMATION_COMMAND,
    parse_device_nodes,
    parse_gpu_minors,
)
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.sharing.migplan import STATE_COMMAND as MIG_STATE_COMMAND
from gpuinfra.sharing.migplan import split_sections
from gpuinfra_deploy.facts._base import GPU_FIELDS, parsed, quiet


class NvidiaGpus(FactBase):
    """GPUs from ``nvidia-smi --query-gpu`` (:data:`GPU_FIELDS`), ``{}`` without a driver.

    ``{"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...",
    "model": "H100-SXM5-80GB", "mig_devices": [], "pci.bus_id": "00000000:19:00.0",
    "driver_version": "535.161.08", "persistence_mode": "Enabled", "memory.total": 81559}]}``
    """

    default = dict

    def requires_command(self) -> str:
        return "nvidia-smi"

    def command(self) -> str:
        return quiet(f"nvidia-smi --query-gpu={','.join(GPU_FIELDS)} "
                     "--format=csv,noheader,nounits")

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsed(parse_gpus, output, fields=GPU_FIELDS)


class NvidiaMigState(FactBase):
    """What the MIG plan reads (gpuinfra.sharing.migplan.STATE_COMMAND), one text per part:
    ``{"list": <nvidia-smi -L>, "mode": <index, uuid, mig.mode.current, mig.mode.pending>,
    "lgi": <nvidia-smi mig -lgi>, "lci": <-lci>, "apps": <--query-compute-apps>}``; ``{}``
    without nvidia-smi. Turned into each GPU's state by gpuinfra.sharing.migplan.node_state, and
    into
    the node's compute processes by gpuinfra.sharing.migplan.compute_processes (the nvidia_driver
    role:
    no driver change under them)."""

    default = dict

    def requires_command(self) -> str:
        return "nvidia-smi"

    def command(self) -> str:
        return MIG_STATE_COMMAND

    def process(self, output: list[str]) -> dict[str, str]:
        try:
            return split_sections("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class NvidiaTopology(FactBase):
    """``nvidia-smi topo -m``: ``{"gpus", "nics", "nic_devices", "links", "cpu_affinity",
    "numa_affinity"}``; ``links["GPU0"]["GPU1"] == "NV18"``. ``{}`` without a driver."""

    default = dict

    def requires_command(self) -> str:
        return "nvidia-smi"

    def command(self) -> str:
        return quiet("nvidia-smi topo -m")

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsed(parse_topo, output)


class NvidiaDeviceNodes(FactBase):
    """/dev/nvidia* character devices as they are now:
    ``{"/dev/nvidia0": {"gid": 0, "group": "root", "mode": "0666"}}`` (``{}``: none)."""

    default = dict

    def command(self) -> str:
        return quiet(DEVICE_NODES_COMMAND)

    def process(self, output: list[str]) -> dict[str, Any]:
        try:
            return parse_device_nodes("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class NvidiaDeviceMinors(FactBase):
    """PCI bus id -> /dev/nvidia minor, from /proc/driver/nvidia/gpus/*/information
    (``{}`` when the driver is not loaded)."""

    default = dict

    def command(self) -> str:
        return quiet(GPU_INFORMATION_COMMAND)

    def process(self, output: list[str]) -> dict[str, int]:
        try:
            return parse_gpu_minors("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class ContainerRuntimeConfig(FactBase):
    """The configuration text of a container runtime (``containerd`` or ``docker``): its main
    file and drop-ins concatenated, ``""`` where there is none. Judged by
    :func:`gpuinfra.containers.runtimes.has_nvidia_runtime`."""

    default = str

    def command(self, runtime: str) -> str:
        paths = CONFIG_PATHS[check_runtime(runtime)]
        # Globs stay unquoted so the shell expands them; fixed paths are quoted. Each file is
        # read on its own: a missing drop-in must not hide the main file.
        words = " ".join(p if "*" in p else shlex.quote(p) for p in paths)
        return f'for f in {words}; do [ -f "$f" ] && cat "$f"; done; true'

    def process(self, output: list[str]) -> str:
        return "\n".join(output) + "\n"
