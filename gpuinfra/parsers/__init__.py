"""Parsers of vendor tool output: pure functions from text to typed results, one module per
tool or format.

Every parser takes the full text a command printed. Unreadable input raises
:class:`gpuinfra.errors.ParseError` naming the command and line (a few line-oriented parsers
skip the lines they do not know instead, and say so). :data:`PARSERS` is every capture
`gpuinfra parse KIND` offers for support work, among them every capture `gpuinfra check`
judges from a file (under the name `check` gives it; :data:`ALIASES` where the two differ):
each returns a result with a ``to_json()`` method giving plain JSON-able data. The others are
read by the roles' facts and the verify suite (``aptpolicy``, ``cpus``, ``kubectl``,
``pcisysfs``, ``pcitree``, ``processes``, ``proxmox``, ``slurm``, the rest of ``system``) or
by a check command with its own verdict (``nccl``: `gpuinfra nccl check`; ``perftest``:
`gpuinfra perftest check`).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any, NamedTuple


class Parser(NamedTuple):
    """One KIND of `gpuinfra parse`: where its parse function is, the command whose output it
    reads (the help says it), and whether it reads excerpts.

    ``excerpts``: the parser reads what people paste (grepped, elided, cut, a log's lines):
    it keeps what it knows and says the rest in the result's ``cuts``, so it does not refuse
    another command's output (that gives a result with nothing in it; a log without the lines
    it looks for is still a log). The others refuse any text that is not their command's
    output (ParseError; tests/unit/test_parsers_refuse_others.py).

    ``blank``: what a blank capture means where the command prints nothing to say something;
    for every other KIND a blank capture is not one (`gpuinfra parse` refuses it).
    """

    module: str
    function: str
    command: str
    excerpts: bool = False
    blank: str = ""


# KIND (as on the command line) -> its parser. The kinds of `gpuinfra check` (its KIND
# sub-commands and its capture options) each have one here, under check's name or an alias
# (tests/unit/test_cli_parse.py keeps the two lists together).
PARSERS: dict[str, Parser] = {
    "topo": Parser("gpuinfra.parsers.topo", "parse_topo", "nvidia-smi topo -m"),
    "p2p": Parser("gpuinfra.parsers.p2p", "parse_p2p", "nvidia-smi topo -p2p r|w|n|a|p"),
    "nvlink": Parser("gpuinfra.parsers.nvlink", "parse_nvlink", "nvidia-smi nvlink --status",
                     blank="no NVLink: nvidia-smi prints nothing for GPUs without links"),
    "gpus": Parser("gpuinfra.parsers.gpus", "parse_gpus",
                   "nvidia-smi --query-gpu=... --format=csv, or nvidia-smi -L"),
    "mig": Parser("gpuinfra.parsers.mig", "parse_mig", "nvidia-smi mig -lgip|-lgi|-lcip|-lgipp"),
    "lspci": Parser("gpuinfra.parsers.lspci", "parse_lspci", "lspci [-nn] [-k]"),
    "mlxconfig": Parser("gpuinfra.parsers.mlxconfig", "parse_mlxconfig_devices",
                        "mlxconfig/mstconfig -d DEV query, or a loop over several devices"),
    "ibstat": Parser("gpuinfra.parsers.ibstat", "parse_ibstat", "ibstat"),
    "ibv": Parser("gpuinfra.parsers.ibv", "parse_ibv_devinfo", "ibv_devinfo [-v]"),
    "fabric": Parser("gpuinfra.parsers.fabric", "parse_fabric",
                     "nvidia-smi -q (its Fabric sections)"),
    "show-gids": Parser("gpuinfra.parsers.gids", "parse_show_gids", "show_gids [DEV]"),
    "lspci-vvv": Parser("gpuinfra.parsers.pcicaps", "parse_pci_caps",
                        "lspci -vvv, whole, -s DEV or grepped (ATSCtl, ACSCtl)", True),
    "lsmod": Parser("gpuinfra.parsers.system", "parse_lsmod",
                    "lsmod (whole or grepped), or cat /proc/modules"),
    "dmesg": Parser("gpuinfra.parsers.kernellog", "parse_kernel_log",
                    "dmesg or journalctl -k, whole or grepped (IOMMU, nvidia_peermem, XIDs)",
                    True),
    "cmdline": Parser("gpuinfra.parsers.cmdline", "parse_cmdline", "cat /proc/cmdline", True),
    "iommu-groups": Parser("gpuinfra.parsers.iommu", "parse_pci_listing",
                           "the /sys/kernel/iommu_groups listing (with lspci -nns or -nnks)",
                           True),
    "lspci-nnk": Parser("gpuinfra.parsers.iommu", "parse_pci_listing",
                        "lspci -nnk (each function's driver), whole or cut", True),
    "virsh-hostdev": Parser("gpuinfra.parsers.libvirt", "parse_hostdevs",
                            "virsh dumpxml VM, whole or its <hostdev> sections", True),
    "describe-node": Parser("gpuinfra.parsers.kubectl_text", "parse_describe_node",
                            "kubectl describe node NODE", True),
    "gpu-pods": Parser("gpuinfra.parsers.kubectl_text", "parse_pods_table",
                       "kubectl get pods [-n NS|-A] [-o wide]", True),
    "pod-runtime": Parser("gpuinfra.parsers.kubectl_text", "parse_pod_specs",
                          "kubectl get pod -o yaml|json, or kubectl describe pod", True),
    "plugin-log": Parser("gpuinfra.captures.kubernetes", "parse_plugin_log",
                         "kubectl logs of the NVIDIA device plugin", True),
}
# Other names of a KIND: check's name where parse had one before (`check --ibv-devinfo`,
# `--smi-q`, `check vm-topo`: the same command's output).
ALIASES: dict[str, str] = {"ibv-devinfo": "ibv", "smi-q": "fabric", "vm-topo": "topo"}


def kind_of(name: str) -> str:
    """The KIND of :data:`PARSERS` that ``name`` (a KIND or an alias) is."""
    return ALIASES.get(name, name)


def parser_for(kind: str) -> Callable[..., Any]:
    """The parse function for ``kind`` (a key of :data:`PARSERS`, or an alias)."""
    parser = PARSERS[kind_of(kind)]
    return getattr(import_module(parser.module), parser.function)
