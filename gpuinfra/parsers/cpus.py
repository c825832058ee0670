"""A node's processors and memory, as Slurm's node definition needs them.

- ``lscpu -p=CPU,CORE,SOCKET,NODE``: ``#`` comment lines, then one line per online logical
  CPU, e.g. ``97,1,0,0`` (CPU 97 is a thread of core 1 on socket 0, NUMA node 0). The NODE
  column is empty on machines without NUMA information.
- ``/proc/meminfo``: ``MemTotal:       24684092 kB``.

Slurm numbers cores by *logical core index*: core 0 is the first core of the first socket,
core 1 the second core of that socket, and so on over the sockets (gres.conf(5), ``Cores``).
:meth:`CpuTopology.core_index` gives that index for a logical CPU, so a GPU's CPU affinity from
``nvidia-smi topo -m`` (a CPU list) becomes ``Cores=`` in gres.conf.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

LSCPU_COMMAND = "lscpu -p=CPU,CORE,SOCKET,NODE"
LSCPU = "lscpu -p"
MEMINFO = "/proc/meminfo"


@dataclass(frozen=True)
class LogicalCpu:
    cpu: int
    core: int
    socket: int
    node: int | None = None


@dataclass(frozen=True)
class CpuTopology:
    """The node's online logical CPUs with their core and socket."""

    cpus: tuple[LogicalCpu, ...]

    @property
    def cpu_count(self) -> int:
        return len(self.cpus)

    @property
    def sockets(self) -> int:
        return len({c.socket for c in self.cpus})

    @property
    def cores(self) -> int:
        """Physical cores over all sockets."""
        return len({(c.socket, c.core) for c in self.cpus})

    @property
    def cores_per_socket(self) -> int:
        return self.cores // self.sockets

    @property
    def threads_per_core(self) -> int:
        return self.cpu_count // self.cores

    @property
    def uniform(self) -> bool:
        """Every socket has the same cores and every core the same threads (Slurm's model)."""
        per_socket = {s: len({c.core for c in self.cpus if c.socket == s})
                      for s in {c.socket for c in self.cpus}}
        per_core: dict[tuple[int, int], int] = {}
        for c in self.cpus:
            per_core[(c.socket, c.core)] = per_core.get((c.socket, c.core), 0) + 1
        return len(set(per_socket.values())) == 1 and len(set(per_core.values())) == 1

    def core_index(self, cpu: int) -> int | None:
        """Slurm's logical core index of logical CPU ``cpu``; None when the node lacks it."""
        order = sorted({(c.socket, c.core) for c in self.cpus})
        found = next((c for c in self.cpus if c.cpu == cpu), None)
        return None if found is None else order.index((found.socket, found.core))

    def to_json(self) -> dict[str, Any]:
        return {"cpus": [[c.cpu, c.core, c.socket, c.node] for c in self.cpus],
                "sockets": self.sockets, "cores_per_socket": self.cores_per_socket,
                "threads_per_core": self.threads_per_core}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CpuTopology:
        return cls(tuple(LogicalCpu(*row) for row in data["cpus"]))


def parse_lscpu(text: str) -> CpuTopology:
    """Read ``lscpu -p=CPU,CORE,SOCKET,NODE`` output."""
    cpus = []
    for no, line in enumerate(clean_lines(text, LSCPU), 1):
        if line.startswith("#") or not line.strip():
            continue
        fields = line.strip().split(",")
        if len(fields) < 3 or not all(f.isdigit() for f in fields[:3]):
            raise ParseError(LSCPU, f"expected CPU,CORE,SOCKET[,NODE], got {line.strip()!r}", no)
        node = int(fields[3]) if len(fields) > 3 and fields[3].isdigit() else None
        cpus.append(LogicalCpu(int(fields[0]), int(fields[1]), int(fields[2]), node))
    if not cpus:
        raise ParseError(LSCPU, "no CPU lines")
    if len({c.cpu for c in cpus}) != len(cpus):
        raise ParseError(LSCPU, "a CPU is listed twice")
    return CpuTopology(tuple(cpus))


def parse_meminfo_mb(text: str) -> int:
    """MemTotal in MiB, as ``slurmd -C`` reports RealMemory (kB // 1024)."""
    for no, line in enumerate(clean_lines(text, MEMINFO), 1):
        if line.startswith("MemTotal:"):
            words = line.split()
            if len(words) == 3 and words[1].isdigit() and words[2] == "kB":
                return int(words[1]) // 1024
            raise ParseError(MEMINFO, f"unreadable MemTotal line {line.strip()!r}", no)
    raise ParseError(MEMINFO, "no MemTotal line")


def parse_cpu_list(text: str) -> set[int]:
    """A Linux CPU list (``0-47,96-143``) as a set; raises ValueError when malformed."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            low, high = part.split("-", 1)
            if not (low.isdigit() and high.isdigit()) or int(low) > int(high):
                raise ValueError(f"bad CPU range {part!r}")
            out.update(range(int(low), int(high) + 1))
        elif part.isdigit():
            out.add(int(part))
        else:
            raise ValueError(f"bad CPU list entry {part!r}")
    return out


def format_ranges(numbers: set[int] | list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2,5`` (Slurm's and Linux's list syntax)."""
    ordered = sorted(set(numbers))
    parts, start = [], None
    for i, n in enumerate(ordered):
        if start is None:
            start = n
        if i + 1 == len(ordered) or ordered[i + 1] != n + 1:
            parts.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ",".join(parts)
