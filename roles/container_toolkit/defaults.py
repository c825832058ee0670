"""Data keys of the `container_toolkit` role: default and rule of each (override in group_data).

Also read from the cluster spec: ``nvidia_repo_mirror`` (a mirror of NVIDIA's
libnvidia-container repository for offline sites; it replaces the URL, same layout). Checked by
the spec gate before any host is touched.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean, choice, debian_version, list_of

KNOBS = (
    # On by default: a GPU site runs containers (Slurm with pyxis/enroot, Kubernetes, podman
    # with CDI). Sites that cannot reach NVIDIA's repository nor mirror it turn it off.
    Knob("container_toolkit_enabled", True, boolean(), "the NVIDIA container toolkit"),
    # Exact version of the four toolkit packages (nvidia-container-toolkit, -base,
    # libnvidia-container-tools, libnvidia-container1), pinned and held together.
    Knob("container_toolkit_version", "1.17.8-1", debian_version(),
         "the exact toolkit package version"),
    # Runtimes to configure with `nvidia-ctk runtime configure`: "containerd", "docker".
    # Each must be installed (and, for containerd, have its config.toml) beforehand.
    Knob("container_toolkit_runtimes", ["containerd"], list_of(choice("containerd", "docker")),
         "runtimes to give the nvidia runtime"),
    # Make nvidia the default runtime (--set-as-default); otherwise Kubernetes pods select it
    # with a RuntimeClass whose handler is "nvidia".
    Knob("container_toolkit_set_default", False, boolean(), "nvidia as the default runtime"),
    # Write the CDI spec /etc/cdi/nvidia.yaml (podman --device nvidia.com/gpu=all, CDI mode).
    Knob("container_toolkit_cdi", True, boolean(), "the CDI spec /etc/cdi/nvidia.yaml"),
)

DEFAULTS = defaults(KNOBS)
