"""The commands of one reading of a node: name -> command, chosen by the node's expectation.

One table for every reader of a node, all run by one runner on the node
(gpuinfra_node/reader.py): the health check (roles/health: :func:`probes`), the
verify suite (the health check's reading, one SSH round trip: gpuinfra_verify/conftest.py) and
the GPU metrics collector (:data:`METRICS`: gpuinfra.monitoring.gpumetrics.QUERIES, NVLink
and the kernel log, with the same commands as the health check's). A command is an argv list,
or a shell string for the few that read several files at once (``sh -c``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuinfra.health.thresholds import commands as threshold_commands
from gpuinfra.monitoring.gpumetrics import NVLINK_COMMAND, QUERIES, RESET_MARK
from gpuinfra.rdma.verdicts import PORTS_COMMAND
from gpuinfra.sharing.migplan import STATE_COMMAND as MIG_STATE_COMMAND

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
    "nvlink": tuple(NVLINK_COMMAND),
}
FABRIC: Command = ("nvidia-smi", "-q")
# This boot's kernel log, message text only; dmesg where the journal has no kernel messages.
# With the GPU resets the health program wrote there (gpuinfra.monitoring.gpumetrics.RESET_MARK).
_KERNEL_LINES = f"grep -e NVRM -e 'fallen off' -e '{RESET_MARK}'"
KERNEL_LOG: Command = ("sh", "-c", f"journalctl -k -b -o cat --no-pager -q 2>/dev/null "
                       f"| {_KERNEL_LINES} || dmesg 2>/dev/null | {_KERNEL_LINES} || true")
SERVICE_STATE = "systemctl is-active {units}; true"
# DCGM's diagnostic where DCGM is installed (level 1: the quick one, seconds; dcgmi(1)).
DCGM_ABSENT = "gpuinfra: dcgmi is not installed"
DCGM_DIAG = f"command -v dcgmi >/dev/null || {{ echo '{DCGM_ABSENT}'; exit 0; }}; " \
            "dcgmi diag -r {level}"


# The GPU metrics collector's reading (gpuinfra.monitoring.gpumetrics.metrics_text): its
# queries, the NVLink status and the kernel log (the health check's own commands for both).
METRICS: dict[str, Command] = {**{q.name: tuple(q.command()) for q in QUERIES},
                               "nvlink": TOPOLOGY["nvlink"], "kernel-log": KERNEL_LOG}

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
    if expect.gpus is not None:
        out.update(threshold_commands(expect))
    if expect.gpus is not None and expect.dcgm_diag_level:
        out["dcgm"] = DCGM_DIAG.format(level=expect.dcgm_diag_level)
    if expect.services:
        out["services"] = SERVICE_STATE.format(units=" ".join(expect.services))
    return out


def describe(commands: Mapping[str, Command]) -> dict[str, str]:
    """Each command as one line (for --json output and the docs)."""
    return {name: command if isinstance(command, str) else " ".join(command)
            for name, command in commands.items()}
