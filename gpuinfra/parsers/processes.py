"""GPU compute processes: `nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name
--format=csv,noheader` (:data:`COMPUTE_APPS_QUERY`).

One row per process and GPU it holds, ``<GPU or MIG UUID>, <pid>, <process name>``:
``GPU-79610d46-faa4-d4b6-c33b-5112be24ce61, 4910, /usr/bin/python`` (tests/fixtures/
compute-apps). The name is what NVML reports (usually the executable's path; it may hold
spaces or commas, so it is the rest of the line). No process: no output at all.

Read by the MIG plan (gpuinfra.sharing.migplan: never destroy an instance or switch the mode under a
process) and the driver change guard (gpuinfra.driverchange: never replace the driver under
one): one parser for both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

COMPUTE_APPS_QUERY = ("nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name "
                      "--format=csv,noheader")
SOURCE = "nvidia-smi --query-compute-apps"

_ROW = re.compile(r"^(?P<uuid>(?:GPU|MIG)-[^,\s]+),\s*(?P<pid>\d+),\s*(?P<name>.*)$")
# What some nvidia-smi versions print instead of no output when nothing runs.
_NONE = "No running processes found"


@dataclass(frozen=True)
class ComputeApp:
    """One compute process on one GPU (or MIG device): its UUID, the pid, the process name."""

    gpu_uuid: str
    pid: int
    name: str

    def __str__(self) -> str:
        return f"{self.pid} {self.name}"


def parse_compute_apps(text: str) -> list[ComputeApp]:
    """The rows of :data:`COMPUTE_APPS_QUERY` in order; ``[]`` for no output.

    Raises ParseError naming the line for anything that is not such a row: a process the
    parser cannot read must not pass as "no process"."""
    apps = []
    for no, line in enumerate(clean_lines(text, SOURCE), 1):
        line = line.strip()
        if not line or line == _NONE:
            continue
        match = _ROW.match(line)
        if not match:
            raise ParseError(SOURCE, f"expected '<GPU UUID>, <pid>, <process name>', got "
                             f"{line[:60]!r}", line=no)
        apps.append(ComputeApp(match["uuid"], int(match["pid"]),
                               match["name"].strip() or "[no name]"))
    return apps
