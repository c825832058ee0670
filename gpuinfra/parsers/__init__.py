"""Parsers of vendor tool output: pure functions from text to typed results, one module per
tool or format.

Every parser takes the full text a command printed. Unreadable input raises
:class:`gpuinfra.errors.ParseError` naming the command and line (a few line-oriented parsers
skip the lines they do not know instead, and say so). The hardware inspections in
:data:`PARSERS` (what `gpuinfra parse KIND` offers for support work) return a dataclass with a
``to_json()`` method giving plain JSON-able data. The others are read by the roles' facts and
the verify suite (``aptpolicy``, ``cpus``, ``kubectl``, ``pcisysfs``, ``pcitree``,
``processes``, ``proxmox``, ``slurm``, ``system``) or by a check command with its own verdict
(``nccl``: `gpuinfra nccl check`; ``perftest``: `gpuinfra perftest check`).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

# KIND (as on the command line) -> (module, function, the command whose output it reads)
PARSERS: dict[str, tuple[str, str, str]] = {
    "topo": ("gpuinfra.parsers.topo", "parse_topo", "nvidia-smi topo -m"),
    "p2p": ("gpuinfra.parsers.p2p", "parse_p2p", "nvidia-smi topo -p2p r|w|n|a|p"),
    "nvlink": ("gpuinfra.parsers.nvlink", "parse_nvlink", "nvidia-smi nvlink --status"),
    "gpus": ("gpuinfra.parsers.gpus", "parse_gpus",
             "nvidia-smi --query-gpu=... --format=csv, or nvidia-smi -L"),
    "mig": ("gpuinfra.parsers.mig", "parse_mig", "nvidia-smi mig -lgip|-lgi|-lcip|-lgipp"),
    "lspci": ("gpuinfra.parsers.lspci", "parse_lspci", "lspci [-nn] [-k]"),
    "mlxconfig": ("gpuinfra.parsers.mlxconfig", "parse_mlxconfig", "mlxconfig/mstconfig query"),
    "ibstat": ("gpuinfra.parsers.ibstat", "parse_ibstat", "ibstat"),
    "ibv": ("gpuinfra.parsers.ibv", "parse_ibv_devinfo", "ibv_devinfo"),
    "fabric": ("gpuinfra.parsers.fabric", "parse_fabric", "nvidia-smi -q (its Fabric sections)"),
}


def parser_for(kind: str) -> Callable[..., Any]:
    """The parse function for ``kind`` (a key of :data:`PARSERS`)."""
    module, func, _ = PARSERS[kind]
    return getattr(import_module(module), func)
