"""Small system listings the GPU roles read: loaded modules, groups, device nodes, apt holds.

- ``/proc/modules``: ``name size instances deps state offset`` per line, e.g.
  ``nvidia_uvm 1527808 0 - Live 0x0000000000000000 (POE)``; ``deps`` is ``-`` or
  ``a,b,`` (trailing comma).
- ``getent group``: ``name:x:gid:members``.
- device nodes, as printed by ``find /dev -maxdepth 1 -name 'nvidia*' -type c
  -printf '%p %G %g %m\\n'``: path, numeric gid, group name, octal mode.
- ``apt-mark showhold``: one package name per line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

DEVICE_NODES_COMMAND = (
    "find /dev -maxdepth 1 -name 'nvidia*' -type c -printf '%p %G %g %m\\n'"
)


@dataclass
class KernelModule:
    name: str
    size: int
    instances: int
    used_by: list[str] = field(default_factory=list)
    state: str = "Live"

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "instances": self.instances, "used_by": list(self.used_by),
                "state": self.state}


@dataclass
class ProcModules:
    """Modules by name, in /proc/modules order."""

    modules: dict[str, KernelModule] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"modules": {name: {"size", "instances", "used_by": [...], "state"}}}``."""
        return {"modules": {name: m.to_json() for name, m in self.modules.items()}}


def parse_proc_modules(text: str) -> ProcModules:
    """Read /proc/modules; raises ParseError for a line that is not a module entry."""
    result = ProcModules()
    for no, line in enumerate(clean_lines(text, "/proc/modules"), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) < 5 or not parts[1].isdigit() or not parts[2].isdigit():
            raise ParseError("/proc/modules", f"not a module line: {line[:60]!r}", line=no)
        deps = [] if parts[3] == "-" else [d for d in parts[3].split(",") if d]
        result.modules[parts[0]] = KernelModule(parts[0], int(parts[1]), int(parts[2]), deps,
                                                parts[4])
    return result


def parse_group_ids(text: str) -> dict[str, int]:
    """``{group name: gid}`` from ``getent group`` (or /etc/group) text."""
    groups: dict[str, int] = {}
    for no, line in enumerate(clean_lines(text, "getent group"), 1):
        if not line.strip():
            continue
        parts = line.split(":")
        if len(parts) < 3 or not parts[2].isdigit():
            raise ParseError("getent group", f"not a group line: {line[:60]!r}", line=no)
        groups[parts[0]] = int(parts[2])
    return groups


def parse_device_nodes(text: str) -> dict[str, dict[str, Any]]:
    """``{path: {"gid": int, "group": name, "mode": "0666"}}`` from :data:`DEVICE_NODES_COMMAND`."""
    nodes: dict[str, dict[str, Any]] = {}
    for no, line in enumerate(clean_lines(text), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
            raise ParseError("find /dev -name 'nvidia*'", f"not 'path gid group mode': "
                             f"{line[:60]!r}", line=no)
        nodes[parts[0]] = {"gid": int(parts[1]), "group": parts[2],
                           "mode": parts[3].rjust(4, "0")}
    return nodes


def parse_held_packages(text: str) -> list[str]:
    """Package names from ``apt-mark showhold``, sorted (``name:arch`` keeps its arch)."""
    return sorted({line.strip() for line in clean_lines(text) if line.strip()})


# /proc/driver/nvidia/gpus/<bus id>/information, each file printed after a "==> PATH <==" line
# (``tail -n +1``): "Bus Location:   0000:19:00.0" and "Device Minor:   0" per GPU.
GPU_INFORMATION_COMMAND = "tail -n +1 /proc/driver/nvidia/gpus/*/information"


def parse_gpu_minors(text: str) -> dict[str, int]:
    """PCI bus id -> /dev/nvidia minor number, from the driver's per-GPU information files."""
    minors: dict[str, int] = {}
    bus: str | None = None
    for no, line in enumerate(clean_lines(text), 1):
        if line.startswith("==> "):
            bus = None
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "Bus Location":
            bus = value.lower()
        elif key == "Device Minor":
            if bus is None or not value.isdigit():
                raise ParseError("/proc/driver/nvidia/gpus/*/information",
                                 f"Device Minor {value!r} without a Bus Location before it", no)
            minors[bus] = int(value)
    return minors


# Units that failed or are still starting (auto-restart included), one per line.
UNIT_STATES_COMMAND = ("systemctl list-units --all --plain --no-legend --no-pager "
                       "--state=failed,activating")


def parse_unit_states(text: str) -> dict[str, tuple[str, str]]:
    """``systemctl list-units --plain --no-legend`` output as {unit: (active, sub)}, e.g.
    ``{"nvidia-persistenced.service": ("failed", "failed"), "slurmctld.service":
    ("activating", "auto-restart")}``. Raises ParseError for a line that is not a unit."""
    units = {}
    for no, line in enumerate(clean_lines(text, "systemctl list-units"), 1):
        fields = line.split(None, 4)
        if not fields:
            continue
        if len(fields) < 4 or "." not in fields[0]:
            raise ParseError("systemctl list-units", f"not a unit line: {line[:60]!r}", line=no)
        units[fields[0]] = (fields[2], fields[3])
    return units


# `lsmod` prints this header above its rows; a capture without it was filtered with grep.
LSMOD_HEADER = ("Module", "Size", "Used", "by")


# The state column of /proc/modules (kernel/module/procfs.c: Live, Loading, Unloading).
PROC_MODULES_STATES = ("Live", "Loading", "Unloading")
NO_LSMOD_HEADER = ("no 'Module Size Used by' header (a grep of lsmod, or /proc/modules, which "
                   "may be one too): a module not shown may still be loaded")


class Lsmod(NamedTuple):
    """What :func:`parse_lsmod` read: the modules, and whether lsmod's header was there."""

    modules: ProcModules
    header: bool

    def to_json(self) -> dict[str, Any]:
        """``{"modules": {name: {...}}, "header": bool, "cuts": [...]}`` (a cut: no header)."""
        return {**self.modules.to_json(), "header": self.header,
                "cuts": [] if self.header else [NO_LSMOD_HEADER]}


def parse_lsmod(text: str) -> Lsmod:
    """`lsmod` rows (``name size instances [user,user,...]``), or `cat /proc/modules` rows
    (what lsmod reads, and what an operator may paste instead), and whether lsmod's header was
    there (False: filtered with grep, so a module not listed may still be loaded). Rows
    without the header are read: each row is whole on its line. Raises ParseError for a line
    that is not a module row."""
    result = ProcModules()
    header = False
    for no, line in enumerate(clean_lines(text, "lsmod"), 1):
        parts = line.split()
        if not parts:
            continue
        if tuple(parts) == LSMOD_HEADER:
            header = True
            continue
        if len(parts) >= 5 and parts[4] in PROC_MODULES_STATES and parts[1].isdigit():
            # /proc/modules: name size refcount users state address [taints]; refcount and
            # users are "-" where unknown (seen on a real H100 VM: tests/fixtures/device/)
            count = int(parts[2]) if parts[2].isdigit() else 0
            users = [u for u in parts[3].split(",") if u and u != "-"]
            result.modules[parts[0]] = KernelModule(parts[0], int(parts[1]), count, users)
            continue
        if len(parts) not in (3, 4) or not parts[1].isdigit() or not parts[2].isdigit():
            raise ParseError("lsmod", f"not a module row: {line.strip()[:60]!r}", line=no)
        users = [u for u in parts[3].split(",") if u] if len(parts) == 4 else []
        result.modules[parts[0]] = KernelModule(parts[0], int(parts[1]), int(parts[2]), users)
    return Lsmod(result, header)
