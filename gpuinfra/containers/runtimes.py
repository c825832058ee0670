"""Container runtime configuration: does it know the nvidia runtime? Which driver made a CDI spec?

What `nvidia-ctk runtime configure` writes (docs/hardware-reference.md 2) [ctk-src-cfg]:
- containerd: a ``runtimes.nvidia`` table under the CRI plugin, ``io.containerd.grpc.v1.cri``
  for config version 2 (containerd 1.x), ``io.containerd.cri.v1.runtime`` for version 3
  (containerd 2.x), with ``BinaryName = "/usr/bin/nvidia-container-runtime"``; toolkit 1.18+
  writes it to the drop-in ``/etc/containerd/conf.d/99-nvidia.toml`` instead;
- Docker: ``"runtimes": {"nvidia": {...}}`` in ``/etc/docker/daemon.json``.
"""

from __future__ import annotations

import json
import re

from gpuinfra.errors import GpuinfraError

RUNTIMES = ("containerd", "docker")

# Files whose text tells whether a runtime knows the nvidia runtime (drop-ins included).
CONFIG_PATHS: dict[str, tuple[str, ...]] = {
    "containerd": ("/etc/containerd/config.toml", "/etc/containerd/conf.d/*.toml"),
    "docker": ("/etc/docker/daemon.json",),
}

# The systemd unit to restart after the configuration changed.
SERVICES: dict[str, str] = {"containerd": "containerd", "docker": "docker"}

NVIDIA_RUNTIME_BINARY = "/usr/bin/nvidia-container-runtime"

_Q = r"""["']?"""
_CONTAINERD_TABLE = re.compile(
    r"^\s*\[\s*plugins\." + _Q + r"io\.containerd\.(?:grpc\.v1\.cri|cri\.v1\.runtime)" + _Q
    + r"\.containerd\.runtimes\." + _Q + r"nvidia" + _Q + r"\s*\]", re.MULTILINE)
_LIBCUDA = re.compile(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)")
_LIBNVML = re.compile(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)")


def check_runtime(runtime: str) -> str:
    if runtime not in RUNTIMES:
        raise GpuinfraError(f"unknown container runtime {runtime!r}: use one of "
                            f"{', '.join(RUNTIMES)}")
    return runtime


def has_nvidia_runtime(runtime: str, text: str) -> bool:
    """Whether the configuration ``text`` of ``runtime`` defines the ``nvidia`` runtime.

    containerd: the runtimes.nvidia table (not commented out) and the nvidia runtime binary.
    Docker: a ``runtimes.nvidia`` entry in valid JSON (invalid or empty JSON: False).
    """
    check_runtime(runtime)
    if runtime == "containerd":
        return bool(_CONTAINERD_TABLE.search(text)) and NVIDIA_RUNTIME_BINARY in text
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return False
    runtimes = data.get("runtimes") if isinstance(data, dict) else None
    return isinstance(runtimes, dict) and "nvidia" in runtimes


def cdi_driver_version(text: str) -> str | None:
    """The driver version a CDI spec was generated for (from its libcuda/libnvidia-ml paths)."""
    match = _LIBCUDA.search(text) or _LIBNVML.search(text)
    return match.group(1) if match else None
