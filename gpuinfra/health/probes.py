"""The commands of one reading of a node: name -> command, chosen by the node's expectation.

One table for every reader of a node: the health check (gpuinfra_roles/health), the verify
suite (gpuinfra_verify/test_gpu.py, one SSH round trip for all of them) and the GPU metrics
collector (its queries are gpuinfra.monitoring.gpumetrics.QUERIES, run by the same
:mod:`gpuinfra.health.collect`). A command is an argv list, or a shell string for the few that
read several files at once (``sh -c``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuinfra.migplan import STATE_COMMAND as MIG_STATE_COMMAND
from gpuinfra.monitoring.gpumetrics import QUERIES
from gpuinfra.rdma_verdicts import PORTS_COMMAND

Command = tuple[str, ...] | str

# Asked of every GPU node: the GPU list (index, UUID, name, bus id, persistence mode).
GPU_QUERY_FIELDS = ("index", "uuid", "name", "pci.bus_id", "persistence_mode")
GPUS: Command = ("nvidia-smi", f"--query-gpu={','.join(GPU_QUERY_FIELDS)}",
                 "--format=csv,noheader")
# Ampere and later remap rows instead of retiring pages: the GPU metrics collector's own query
# (gpuinfra.monitoring.gpumetrics.QUERIES); earlier GPUs fail it (no verdict from it there,
# never a failure).
_REMAP_QUERY = next(q for q in QUERIES if q.name == "remapped_rows")
REMAP_FIELDS = _REMAP_QUERY.fields
REMAPPED: Command = tuple(_REMAP_QUERY.command())
TOPOLOGY: dict[str, Command] = {
    "topo": ("nvidia-smi", "topo", "-m"),
    "p2p-r": ("nvidia-smi", "topo", "-p2p", "r"),
    "p2p-w": ("nvidia-smi", "topo", "-p2p", "w"),
    "nvlink": ("nvidia-smi", "nvlink", "--status"),
}
FABRIC: Command = ("nvidia-smi", "-q")
# This boot's kernel log, message text only; dmesg where the journal has no kernel messages.
KERNEL_LOG: Command = ("sh", "-c", "journalctl -k -b -o cat --no-pager -q 2>/dev/null "
                       "| grep -e NVRM -e 'fallen off' || dmesg 2>/dev/null "
                       "| grep -e NVRM -e 'fallen off' || true")
SERVICE_STATE = "systemctl is-active {units}; true"
# DCGM's diagnostic where DCGM is installed (level 1: the quick one, seconds; dcgmi(1)).
DCGM_ABSENT = "gpuinfra: dcgmi is not installed"
DCGM_DIAG = f"command -v dcgmi >/dev/null || {{ echo '{DCGM_ABSENT}'; exit 0; }}; " \
            "dcgmi diag -r {level}"


# The prolog's and epilog's reading: quick (no topology, no -q): the GPUs, remapping, XIDs.
JOB_PROBES: dict[str, Command] = {"gpus": GPUS, "remapped": REMAPPED, "kernel-log": KERNEL_LOG}


def probes(expect: Any) -> dict[str, Command]:
    """The commands a reading runs for ``expect`` (a gpuinfra.health.expectation
    .Expectation): nothing a check of this node does not judge."""
    out: dict[str, Command] = {}
    if expect.gpus is not None:
        out["gpus"] = GPUS
        out["remapped"] = REMAPPED
        out["kernel-log"] = KERNEL_LOG
        if expect.gpus.pairs_checked:
            out.update(TOPOLOGY)
        if expect.gpus.fabric:
            out["fabric"] = FABRIC
        if expect.mig is not None:
            out["mig"] = MIG_STATE_COMMAND
    if expect.nics:
        out["ib-ports"] = PORTS_COMMAND
    if expect.gpus is not None and expect.dcgm_diag_level:
        out["dcgm"] = DCGM_DIAG.format(level=expect.dcgm_diag_level)
    if expect.services:
        out["services"] = SERVICE_STATE.format(units=" ".join(expect.services))
    return out


def describe(commands: Mapping[str, Command]) -> dict[str, str]:
    """Each command as one line (for --json output and the docs)."""
    return {name: command if isinstance(command, str) else " ".join(command)
            for name, command in commands.items()}
