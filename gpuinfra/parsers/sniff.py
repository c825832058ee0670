"""Which command printed a capture: one small sniffer for every capture kind the CLI reads.

A capture given to the wrong option (an ``ibstat`` file to ``--topo``) should be refused with
what it looks like, not with a parser's complaint about its third line::

    >>> looks_like("CA 'mlx5_0'\\n\\tCA type: MT4129\\n")
    'ibstat'
    >>> mismatch("topo", "CA 'mlx5_0'\\n\\tCA type: MT4129\\n")
    'this looks like `ibstat` output, not `nvidia-smi topo -m`'

Each kind has a signature: a line only its command prints (a header, a legend, a row shape).
Signatures are conservative: a capture whose kind is not recognised is no mismatch (the
parser then says what it can), and a capture that also shows the expected kind's signature is
never one (a paste of two commands). Kinds of one family (the ``lspci`` forms and the IOMMU
group listing built from them) never refuse each other. Pure: no I/O.
"""

from __future__ import annotations

import re

from gpuinfra.parsers import PARSERS, kind_of

# kind -> signature (re.MULTILINE), in the order of specificity: the first that matches is the
# best guess. Kinds of PARSERS, plus the logs of `gpuinfra nccl check` / `perftest check`.
_TOPO_CELL = r"(?:X|NV\d+|SYS|NODE|PHB|PXB|PIX)"
_P2P_CELL = r"(?:X|OK|NS|CNS|GNS|TNS|DR|U)"
SIGNATURES: dict[str, re.Pattern[str]] = {
    kind: re.compile(pattern, re.MULTILINE) for kind, pattern in {
        "nccl": r"^\s*#\s*nThread \d+ nGpus|^\s*#\s*Avg bus bandwidth|out-of-place\s+in-place",
        "perftest": r"RDMA_Write BW Test|^\s*#bytes\s+#iterations\s+BW peak",
        "ibstat": r"^CA '[^']+'\s*$|^\s+CA type:",
        "ibv": r"^hca_id:\s*\S",
        "show-gids": r"^\s*DEV\s+PORT\s+INDEX\s+GID\b",
        "mlxconfig": r"^\s*Device type:\s+\S|^\s*Configurations:\s"
                     r"|^\s+[A-Z][A-Z0-9]*(?:_[A-Za-z0-9]+)+\s{2,}\w+\(-?\d+\)\s*$",
        "fabric": r"^=+NVSMI LOG=+|^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*$",
        "nvlink": r"^\s*Link \d+: (?:<inactive>|[\d.]+ ?GB/s)"
                  r"|Unable to retrieve NVLink information",
        "p2p": rf"^\s*GPU\d+(?:\s+{_P2P_CELL})+\s*$|^\s*CNS\s*=\s*Chipset not supported",
        "topo": rf"^\s*GPU\d+\s+{_TOPO_CELL}(?:\s+{_TOPO_CELL})+(?:\s|$)"
                r"|^\s*SYS\s*=\s*Connection traversing",
        "mig": r"^\|\s+(?:GPU instance profiles|GPU instances|Compute instance profiles|"
               r"Compute instances):|^No MIG-enabled devices found"
               r"|^GPU\s+\d+ Profile ID\s+\d+ Placements?\s*:",
        "gpus": r"^GPU \d+: .+\(UUID: GPU-|^(?:index|name|uuid|pci\.bus_id)(?: \[[^\]]*\])?"
                r"(?:, [\w.]+(?: \[[^\]]*\])?)+\s*$",
        "virsh-hostdev": r"<hostdev\b|<domain\b",
        "describe-node": r"^(?:Capacity|Allocatable):\s*$",
        "gpu-pods": r"^(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\s+RESTARTS",
        "pod-runtime": r'^kind:\s*Pod\s*$|"kind":\s*"Pod"|^Runtime Class Name:\s'
                       r"|^Controlled By:\s|^\s+Restart Count:\s+\d",
        "plugin-log": r"nvidia-device-plugin\[|Retr(?:e|ie)iving plugins|^\S+ \S+ Loading NVML|"
                      r"device-plugins/nvidia|^[IWEF]\d{4} [\d:.]+\s+\d+ \w+\.go:\d+\]"
                      r"|XidCriticalError: Xid=|'nvidia\.com/[\w.-]+' device marked unhealthy"
                      r"|too old to support heal\w*checking",
        "iommu-groups": r"^IOMMU Group \d+|/sys/kernel/iommu_groups/",
        "lspci-vvv": r"^\s+(?:Capabilities:|LnkSta:|LnkCap:|ACSCtl:|ATSCtl:)",
        "lspci-nnk": r"^\s+Kernel driver in use:",
        "lspci": r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [^:\n]+: ",
        "lsmod": r"^Module\s+Size\s+Used by|^\s*\w+\s+\d+\s+\d+(?: [\w,-]+)?\s*$"
                 r"|^\w+ \d+ (?:\d+|-) \S+ (?:Live|Loading|Unloading) 0x",
        "dmesg": r"^\[\s*\d+\.\d+\]\s|^\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]"
                 r"|^\w{3} +\d+ [\d:]{8} (?:\S+ )?kernel: |\bNVRM: ",
        "cmdline": r"\A[^\n]*\b(?:BOOT_IMAGE|root|console|mitigations|intel_iommu|amd_iommu|"
                   r"iommu)=[^\n]*\s*\Z",
    }.items()
}
# Kinds whose outputs share a form: none of them refuses another's capture.
FAMILIES: dict[str, str] = {"lspci": "pci", "lspci-nnk": "pci", "lspci-vvv": "pci",
                            "iommu-groups": "pci"}
# A specific kind hides a general one that its output also matches (`nvlink --status` names
# each GPU as `nvidia-smi -L` does).
_HIDES: dict[str, tuple[str, ...]] = {"nvlink": ("gpus",), "lspci-vvv": ("lspci",),
                                      "lspci-nnk": ("lspci",), "iommu-groups": ("lspci",)}
COMMANDS: dict[str, str] = {"nccl": "all_reduce_perf (nccl-tests)", "perftest": "ib_write_bw"}


def command_of(kind: str) -> str:
    """The command whose output ``kind`` (a KIND, an alias, nccl or perftest) is."""
    if kind in COMMANDS:
        return COMMANDS[kind]
    return PARSERS[kind_of(kind)].command


def sniff(text: str) -> list[str]:
    """Every kind whose signature ``text`` shows, the most specific first."""
    found = [kind for kind, pattern in SIGNATURES.items() if pattern.search(text)]
    hidden = {h for kind in found for h in _HIDES.get(kind, ())}
    return [kind for kind in found if kind not in hidden]


def looks_like(text: str) -> str | None:
    """The kind ``text`` most likely is, or None when no signature matches."""
    found = sniff(text)
    return found[0] if found else None


def _family(kind: str) -> str:
    kind = kind_of(kind)
    return FAMILIES.get(kind, kind)


def mismatch(expected: str, text: str) -> str | None:
    """"this looks like `X` output, not `Y`" when ``text`` is recognised as another kind than
    ``expected`` and shows nothing of ``expected``'s own; None otherwise."""
    found = sniff(text)
    if not found or any(_family(kind) == _family(expected) for kind in found):
        return None
    return f"this looks like `{command_of(found[0])}` output, not `{command_of(expected)}`"


# The programs whose echoed command line may head a paste of each kind ("$ nvidia-smi topo -m",
# "root@gpu01:~# sudo ibstat"): the prompt and the command are the poster's, not the output.
_PROGRAMS: dict[str, tuple[str, ...]] = {
    **{k: ("nvidia-smi",) for k in ("topo", "p2p", "nvlink", "gpus", "mig", "fabric")},
    **{k: ("lspci",) for k in ("lspci", "lspci-vvv", "lspci-nnk")},
    "mlxconfig": ("mlxconfig", "mstconfig"), "ibstat": ("ibstat",), "ibv": ("ibv_devinfo",),
    "show-gids": ("show_gids",), "lsmod": ("lsmod", "cat"), "dmesg": ("dmesg", "journalctl"),
    "cmdline": ("cat",), "iommu-groups": ("for", "find", "ls", "shopt"),
    "describe-node": ("kubectl", "microk8s", "k3s", "oc"), "gpu-pods": ("kubectl", "oc"),
    "pod-runtime": ("kubectl", "oc"),
    "plugin-log": ("kubectl", "oc"), "virsh-hostdev": ("virsh",),
    "nccl": ("all_reduce_perf", "mpirun", "srun", "./build/all_reduce_perf"),
    "perftest": ("ib_write_bw",),
}
_ECHO = re.compile(r"^\s*(?:(?:\[[^\]\n]*\]|\S*)[$#%>]\s+)?(?:sudo\s+(?:-\S+\s+)*)?"
                   r"(?P<program>[^\s|;]+)")
_PROMPT_ONLY = re.compile(r"^\s*(?:\[[^\]\n]*\]|\S*)[$#%>]\s*$")


def without_echoed_command(text: str, kind: str) -> tuple[str, str | None]:
    """``text`` without a first line that echoes the command (a shell prompt and the kind's
    own program, or the program alone) and without a last line that is a bare prompt: each
    becomes an empty line, so line numbers stay the capture's. Returns (text, what was taken
    out or None)."""
    programs = _PROGRAMS.get(kind_of(kind), ())
    lines = text.split("\n")
    taken = []
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        match = _ECHO.match(lines[first])
        name = match["program"].rsplit("/", 1)[-1] if match else ""
        if match and programs and (name in programs or match["program"] in programs) \
                and not sniff(lines[first]):
            taken.append(f"line {first + 1}: the echoed command {lines[first].strip()[:60]!r}")
            lines[first] = ""
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), None)
    if last is not None and _PROMPT_ONLY.match(lines[last]) and not sniff(lines[last]):
        taken.append(f"line {last + 1}: a shell prompt {lines[last].strip()[:40]!r}")
        lines[last] = ""
    return "\n".join(lines), ("; ".join(taken) + ": not output, left out") if taken else None
