"""Whether a deploy may change a node's NVIDIA driver now: never under running GPU processes.

Installing other driver packages (another branch or version) while CUDA processes run swaps
the driver's libraries under them while the kernel module they run on stays loaded: it
cannot be unloaded while they hold the GPUs. Their next CUDA or NVML call into the new
libraries can fail, and every new job on the node fails with "driver/library version
mismatch" until the reboot. So the nvidia_driver role asks, on each host, before any package
changes there, :func:`driver_change_refusal`:

- the change: the pinned packages the install would change (:func:`package_changes`: each one
  not installed at its pinned version, as ``apt.packages`` decides). None: the driver stays
  as it is, whatever runs (a second deploy changes nothing and says nothing);
- the processes: ``nvidia-smi --query-compute-apps`` with the GPU of each
  (gpuinfra.sharing.migplan.compute_processes; gpuinfra.parsers.processes). None, or no driver
  loaded to answer (a first install): go;
- both: a refusal naming the host, each process (pid, name, GPU), why, and the fix (drain the
  node and let its jobs end; or the data key :data:`OVERRIDE`, which a rolling upgrade sets
  once the node is drained).

Pure: the role hands in what the host has installed (pyinfra's ``DebPackages``) and the
processes; the MIG plan keeps its own rule on the same process list (gpuinfra.sharing.migplan).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuinfra.parsers.processes import COMPUTE_APPS_QUERY, ComputeApp

# The data key that lets a run replace the driver under running processes (defaults.py).
OVERRIDE = "nvidia_driver_change_under_processes"
# A refusal names at most this many processes and package changes, then counts the rest.
NAMED = 16


@dataclass(frozen=True)
class PackageChange:
    """A pinned package the install would change: its name, the version wanted, the versions
    installed now (``()``: not installed)."""

    name: str
    wanted: str
    installed: tuple[str, ...] = ()

    def __str__(self) -> str:
        now = ", ".join(self.installed) if self.installed else "not installed"
        return f"{self.name} {self.wanted} (now: {now})"


def package_changes(pinned: Mapping[str, str],
                    installed: Mapping[str, Iterable[str]]) -> tuple[PackageChange, ...]:
    """The packages of ``pinned`` (name -> exact version) that are not installed at that
    version in ``installed`` (name -> versions installed, as dpkg lists them), in order."""
    changes = []
    for name, version in pinned.items():
        now = tuple(installed.get(name) or ())
        if version not in now:
            changes.append(PackageChange(name, version, now))
    return tuple(changes)


@dataclass(frozen=True)
class GpuProcess:
    """A compute process as a refusal names it: pid, name and the GPU it runs on."""

    pid: int
    name: str
    gpu: str  # "GPU 0 (GPU-...)", or the UUID alone where nvidia-smi -L does not list it

    def __str__(self) -> str:
        return f"pid {self.pid} {self.name} on {self.gpu}"


def gpu_processes(owned: Iterable[tuple[int | None, ComputeApp]]) -> tuple[GpuProcess, ...]:
    """The processes of gpuinfra.sharing.migplan.compute_processes, each with its GPU named."""
    return tuple(GpuProcess(app.pid, app.name,
                            f"GPU {index} ({app.gpu_uuid})" if index is not None
                            else app.gpu_uuid)
                 for index, app in owned)


def driver_change_refusal(host: str, changes: Sequence[PackageChange],
                          processes: Sequence[GpuProcess], *, override: bool = False,
                          node_name: str | None = None,
                          schedulers: Sequence[str] = ()) -> str | None:
    """Why the driver must not change on ``host`` now, or None when it may.

    None when nothing changes, when no compute process runs, or with ``override`` (the
    caller warns then). ``node_name``/``schedulers``: how the scheduler knows the node, for
    the drain command of the fix (default: ``host``; no scheduler: stop the processes)."""
    if not changes or not processes or override:
        return None
    return (f"nvidia_driver: {host}: not changing the NVIDIA driver while "
            f"{len(processes)} GPU process(es) run: {_named(processes)}. "
            f"This run would install {_named(changes)}: the new driver libraries would replace "
            "the ones these processes use while their kernel module stays loaded (it cannot "
            "be unloaded under them), so they can crash and every new job fails with "
            "'driver/library version mismatch' until the node reboots. "
            f"{_drain(node_name or host, schedulers)}, then deploy again; or set "
            f"{OVERRIDE} = True for this host to change the driver under them anyway (a "
            "rolling upgrade sets it once the node is drained). "
            f"The driver on {host} was left as it is")


def unreadable_refusal(host: str, error: Exception) -> str:
    """Why the driver must not change on ``host`` when its process list cannot be read (a
    process the parser cannot read must not pass as none)."""
    return (f"nvidia_driver: {host}: not changing the NVIDIA driver: the GPU processes running "
            f"there cannot be read ({error}). Look at `{COMPUTE_APPS_QUERY}` on the host; set "
            f"{OVERRIDE} = True for this host to change the driver without knowing them. "
            f"The driver on {host} was left as it is")


def _named(items: Sequence[object]) -> str:
    shown = "; ".join(map(str, items[:NAMED]))
    rest = len(items) - NAMED
    return f"{shown}; and {rest} more" if rest > 0 else shown


def _drain(node: str, schedulers: Sequence[str]) -> str:
    steps = []
    if "slurm" in schedulers:
        steps.append(f"scontrol update nodename={node} state=drain reason=\"driver change\"")
    if "kubernetes" in schedulers:
        steps.append(f"kubectl drain {node} --ignore-daemonsets")
    if not steps:
        return "Stop those processes (or wait for them to end)"
    return f"Drain the node ({' and '.join(steps)}) and wait for its jobs to end"
