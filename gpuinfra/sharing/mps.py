"""CUDA MPS on a node whose spec says ``gpu_sharing = {"mode": "mps", ...}``: the control
daemon's systemd unit and the limits it applies (docs/hardware-reference.md 7.3).

One control daemon per node, for all its GPUs (one sharing mode per node): the node-wide
daemon model of Slurm's gres/mps documentation [gres-guide], rather than a per-job daemon
started by a Prolog, because the daemon must also be there for the limits to hold (set at its
start, for every server it spawns) and for the verify suite to read them back. Jobs asking
``--gres=mps:N`` get ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` = their share from Slurm itself.

- Directories: pipes in ``/run/nvidia-mps``, logs in ``/var/log/nvidia-mps``, both made by
  systemd for the unit (``RuntimeDirectory=``, ``LogsDirectory=``: root-owned, 0755, the
  runtime one created afresh at each start and removed at stop). Not MPS' default pipe
  directory ``/tmp/nvidia-mps`` [mps-env]: there any local user who makes the directory
  first owns the namespace in which the daemon, run as root, creates its pipes and in which
  every client looks for it (a ``mkdir -p`` then succeeds on their directory); ``/run`` is
  writable by root only, and a job with a private /tmp still sees it. NVIDIA's
  documentation: ``CUDA_MPS_PIPE_DIRECTORY`` "should be consistent across all MPS clients
  sharing the same MPS server, and the MPS control daemon" [mps-env]; clients set it in
  their environment [mps-client]. The node exports it to every login shell
  (:data:`CLIENT_PROFILE`, ``/etc/profile.d``); a job inherits it from the shell that
  submits it. ``CUDA_MPS_LOG_DIRECTORY`` is read by the control daemon and inherited by the
  servers it starts [mps-log]: set in the unit only.

  [mps-env]: https://docs.nvidia.com/deploy/mps/latest/appendix-environment-variables.html
  (CUDA_MPS_PIPE_DIRECTORY: default /tmp/nvidia-mps)
  [mps-client]: https://docs.nvidia.com/deploy/topics/topic_6_1_2_2.html ("Set to the same
  location as the MPS control daemon")
  [mps-log]: https://docs.nvidia.com/deploy/mps/latest/appendix-logging.html
- Limits, through the control interface after the daemon started [mps-tools] [mps-v2]:
  ``set_default_active_thread_percentage <pct>`` (SMs a server's clients may use) and
  ``set_default_device_pinned_mem_limit <dev> <size>`` per GPU (per client); both apply to
  servers started afterwards, and the daemon starts none before a client connects.
- ``clients``: MPS accepts at most 48 client contexts per device on Volta and newer
  [mps-doc]; the MPS documents cited here give no control command that lowers it, so the spec's
  value is the Kubernetes device plugin's replica count and is checked (2..48; 2..16 below
  compute capability 7.5, V100, where the plugin's MPS daemon allows 16) there; on Slurm
  nodes the per-job share is ``--gres=mps:N`` of 100 per GPU.
- Compute mode ``EXCLUSIVE_PROCESS`` on every GPU before the daemon starts, as the MPS
  documentation recommends, so only the MPS server opens the GPUs.
"""

from __future__ import annotations

import re
import shlex

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.model import GpuSharing
from gpuinfra.text import FileText
from gpuinfra.units import unit_file

UNIT_NAME = "gpuinfra-mps.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
# systemd's RuntimeDirectory=/LogsDirectory= name them relative to /run and /var/log.
RUNTIME_NAME = "nvidia-mps"
PIPE_DIRECTORY = f"/run/{RUNTIME_NAME}"
LOG_DIRECTORY = f"/var/log/{RUNTIME_NAME}"
# Where every login shell of the node learns the pipe directory (clients must use the daemon's).
CLIENT_PROFILE = "/etc/profile.d/gpuinfra-mps.sh"
CLIENT_PROFILE_TEMPLATE = "gpu_sharing/etc/profile.d/gpuinfra-mps.sh.j2"
CONTROL = "/usr/bin/nvidia-cuda-mps-control"
NVIDIA_SMI = "/usr/bin/nvidia-smi"
COMPUTE_MODE = "EXCLUSIVE_PROCESS"
DEFAULT_THREAD_PERCENTAGE = 100  # the daemon's own default [mps-tools]

_SIZE = re.compile(r"(?P<n>[0-9]{1,12})(?P<unit>[KMGT]?)B?", re.IGNORECASE)


def pinned_limit(size: str) -> str:
    """The spec's ``pinned_mem_limit`` ("8G", "512MB", "8589934592") as the control command
    takes it: an integer with ``M`` or ``G`` [mps-tools]."""
    match = _SIZE.fullmatch(size.strip())
    if not match:
        raise GpuinfraError(f"not a memory size: {size!r}")
    n, unit = int(match["n"]), match["unit"].upper()
    if unit == "T":
        return f"{n * 1024}G"
    if unit in ("G", "M"):
        return f"{n}{unit}"
    mib = -(-n // 1024) if unit == "K" else -(-n // (1024 * 1024))
    return f"{max(mib, 1)}M"


def control_commands(sharing: GpuSharing, gpu_count: int) -> list[str]:
    """The control-interface commands that apply the spec's limits (one per line of input)."""
    if sharing.mode != "mps":
        raise GpuinfraError(f"MPS limits asked for a node in mode {sharing.mode!r}")
    lines = []
    if sharing.mps_thread_percentage is not None:
        lines.append(f"set_default_active_thread_percentage {sharing.mps_thread_percentage}")
    if sharing.mps_pinned_mem_limit is not None:
        limit = pinned_limit(sharing.mps_pinned_mem_limit)
        lines += [f"set_default_device_pinned_mem_limit {dev} {limit}"
                  for dev in range(gpu_count)]
    return lines


def expected_thread_percentage(sharing: GpuSharing) -> int:
    """What ``get_default_active_thread_percentage`` must answer on the node."""
    return sharing.mps_thread_percentage or DEFAULT_THREAD_PERCENTAGE


def _control(command: str) -> str:
    return f"/bin/sh -c {shlex.quote(f'echo {command} | {CONTROL}')}"


def unit_text(sharing: GpuSharing, gpu_count: int, compute_mode: bool = True) -> FileText:
    """The control daemon's unit: compute mode first (unless ``compute_mode`` is False: no
    GPU answers, as in the lab), then the daemon, then its limits.

    Boot order and bounded restart come from the shared boot drop-in (gpuinfra.units); the
    unit itself orders the schedulers after it (``Before=``), so no job starts without MPS."""
    return unit_file({
        "Unit": [("Description", "NVIDIA CUDA MPS control daemon (all GPUs of this node)"),
                 ("Documentation", "https://docs.nvidia.com/deploy/mps/index.html"),
                 ("Before", "slurmd.service kubelet.service")],
        "Service": [
            ("Type", "forking"),
            ("RuntimeDirectory", RUNTIME_NAME),
            ("RuntimeDirectoryMode", "0755"),
            ("LogsDirectory", RUNTIME_NAME),
            ("LogsDirectoryMode", "0755"),
            ("Environment", f"CUDA_MPS_PIPE_DIRECTORY={PIPE_DIRECTORY}"),
            ("Environment", f"CUDA_MPS_LOG_DIRECTORY={LOG_DIRECTORY}"),
            ("ExecStartPre", f"{NVIDIA_SMI} -c {COMPUTE_MODE}" if compute_mode else None),
            ("ExecStart", f"{CONTROL} -d"),
            *[("ExecStartPost", _control(c)) for c in control_commands(sharing, gpu_count)],
            ("ExecStop", _control("quit")),
        ],
        "Install": [("WantedBy", "multi-user.target")],
    })


def client_profile() -> FileText:
    """``/etc/profile.d`` lines giving every login shell (and what it submits) the daemon's
    pipe directory (template :data:`CLIENT_PROFILE_TEMPLATE`)."""
    return FileText(CLIENT_PROFILE_TEMPLATE, {"unit": UNIT_NAME, "pipe_directory": PIPE_DIRECTORY})
