"""Data keys of the `container_toolkit` role, with their defaults (override them in group_data).

Also read from the cluster spec: ``nvidia_repo_mirror`` (a mirror of NVIDIA's
libnvidia-container repository for offline sites; it replaces the URL, same layout).
"""

DEFAULTS = {
    # Off by default: the lab cannot reach NVIDIA's repository. Real sites turn it on.
    "container_toolkit_enabled": False,
    # Exact version of the four toolkit packages (nvidia-container-toolkit, -base,
    # libnvidia-container-tools, libnvidia-container1), pinned and held together.
    "container_toolkit_version": "1.17.8-1",
    # Runtimes to configure with `nvidia-ctk runtime configure`: "containerd", "docker".
    # Each must be installed (and, for containerd, have its config.toml) beforehand.
    "container_toolkit_runtimes": ["containerd"],
    # Make nvidia the default runtime (--set-as-default); otherwise Kubernetes pods select it
    # with a RuntimeClass whose handler is "nvidia".
    "container_toolkit_set_default": False,
    # Write the CDI spec /etc/cdi/nvidia.yaml (podman --device nvidia.com/gpu=all, CDI mode).
    "container_toolkit_cdi": True,
}
