"""Facts about the host itself: its distribution, groups, CPU layout and memory.
"""

from __future__ import annotations

import base64
import shlex
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from gpuinfra.errors import ParseError
from gpuinfra.parsers.cpus import LSCPU_COMMAND, parse_lscpu, parse_meminfo_mb
from gpuinfra.parsers.system import (
    parse_group_ids,
)
from gpuinfra.platforms import distro_key
from gpuinfra_deploy.facts._base import parsed, quiet


class GroupIds(FactBase):
    """Every group with its numeric gid (``getent group``): ``{"video": 44, ...}``."""

    default = dict

    def command(self) -> str:
        return quiet("getent group")

    def process(self, output: list[str]) -> dict[str, int]:
        try:
            return parse_group_ids("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class CpuLayout(FactBase):
    """Online logical CPUs with core and socket (``lscpu -p``): ``{"cpus": [[cpu, core,
    socket, node], ...], "sockets", "cores_per_socket", "threads_per_core"}``; ``{}`` when
    lscpu is missing or fails. :meth:`gpuinfra.parsers.cpus.CpuTopology.from_json` reads it."""

    default = dict

    def requires_command(self) -> str:
        return "lscpu"

    def command(self) -> str:
        return quiet(LSCPU_COMMAND)

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsed(parse_lscpu, output)


class MemTotalMb(FactBase):
    """MemTotal in MiB (as ``slurmd -C`` reports RealMemory); None when unreadable."""

    def command(self) -> str:
        return quiet("cat /proc/meminfo")

    def process(self, output: list[str]) -> int | None:
        try:
            return parse_meminfo_mb("\n".join(output))
        except ParseError:
            return None


def host_distro() -> str:
    """The planned host's distribution key (``debian-12``, ``ubuntu-24.04``): the key of every
    role's per-distribution table. Raises gpuinfra's UnsupportedOS for any other system."""
    from pyinfra import host
    from pyinfra.facts.server import LinuxDistribution

    return distro_key(host.get_fact(LinuxDistribution))


class SlurmJobsHere(FactBase):
    """The Slurm jobs running on this node (``squeue -w`` with the node's short hostname, read
    through the configuration slurmd fetched): job ids; [] where Slurm is absent or does not
    answer."""

    default = list

    def command(self) -> str:
        return quiet("squeue -h -w \"$(hostname -s)\" -o %i")

    def process(self, output: list[str]) -> list[str]:
        return [line.split()[0] for line in output if line.strip()]


class FileBytes(FactBase):
    """A file's exact bytes (None when it is not a file): what `gpuinfra render --diff`
    compares with the rendered file. Read base64-encoded, so no byte is lost to the line
    splitting of a fact's output."""

    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return f"if [ -f {q} ]; then echo file; base64 -w0 {q}; echo; fi; true"

    def process(self, output: list[str]) -> bytes | None:
        if not output or output[0].strip() != "file":
            return None
        return base64.b64decode("".join(line.strip() for line in output[1:]))
