"""Vendor apt repositories the roles add, with where each address comes from.

Each site may replace one with a mirror of the same layout (the roles' ``*_mirror`` and
``*_repo_url`` keys). Their signing keys are pinned by fingerprint in
:data:`gpuinfra.knowledge.packages.SIGNING_KEYS`; Kubernetes' pkgs.k8s.io, one repository per
minor, is with the rest of that release's facts in :mod:`gpuinfra.knowledge.kubernetes`.
A repository's list file is the shared one-line format (gpuinfra.apt.files.source_list,
template apt/list.j2).
"""

from __future__ import annotations

from gpuinfra.apt.files import check_url, source_list
from gpuinfra.text import FileText

# NVIDIA's CUDA repository per distribution release: the network repository layout
# .../compute/cuda/repos/<distro><release>/<arch> of the CUDA installation guide [cuda-ig]
# (docs/hardware-reference.md's references); flat (``deb [...] URL /``), signed by
# 3bf863cc.pub in each. The roles take from it: the driver on Debian 12 for branches after 535,
# Fabric Manager on Debian 12, DCGM (gpuinfra.knowledge.drivers says which branch comes from
# where).
CUDA_REPOS: dict[str, str] = {
    "debian-12": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64",
    "ubuntu-22.04": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64",
    "ubuntu-24.04": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64",
}

# NVIDIA's container-toolkit apt repository (docs/hardware-reference.md 2) [ctk-install], and
# where the container_toolkit role puts its key and its list.
TOOLKIT_REPO = "https://nvidia.github.io/libnvidia-container"
TOOLKIT_KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
TOOLKIT_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"


def toolkit_list(base_url: str | None = None) -> FileText:
    """The container toolkit's list file: exactly NVIDIA's line, or a mirror of it.

    ``$(ARCH)`` is literal: apt expands it.
    """
    base = check_url(base_url, "nvidia_repo_mirror") if base_url else TOOLKIT_REPO
    return source_list(TOOLKIT_KEYRING, f"{base}/stable/deb/$(ARCH)", "/")


def toolkit_key_url(base_url: str | None = None) -> str:
    """Where the toolkit repository's signing key is served (the mirror keeps the layout)."""
    base = check_url(base_url, "nvidia_repo_mirror") if base_url else TOOLKIT_REPO
    return f"{base}/gpgkey"


# NVIDIA's DOCA repository (docs/hardware-reference.md 3.1): DOCA-OFED for a release and
# distribution below it, <release>/<distribution dir>/x86_64/ (the rdma role's DISTRO names
# the directory), signed by GPG-KEY-Mellanox.pub at its root.
#
# Its full fingerprint is NOT shipped here: it could not be verified from a public source
# (checked 2026 for issue 23: NVIDIA's DOCA-Host installation pages describe package signing
# without printing the fingerprint; public material cites only the long key id,
# `apt-key adv --recv-keys A024F6F0E6D6A281`). A fingerprint copied from an unverified page
# would be trusted as NVIDIA's, so the operator still supplies it (rdma_doca_key_fingerprint,
# checked to end in that long id), and every run re-checks the installed keyring against it
# (gpuinfra.apt.keys). To pin it here: read it from NVIDIA through a second channel (support,
# a signed release note), then set DOCA_KEY_FINGERPRINT and make the knob optional.
DOCA_URL = "https://linux.mellanox.com/public/repo/doca"
DOCA_KEY_ID = "A024F6F0E6D6A281"
DOCA_KEY_FINGERPRINT: str | None = None

# Grafana's apt repository, suite "stable", component "main", signed by gpg.key at its root
# (https://grafana.com/docs/grafana/latest/setup-grafana/installation/debian/).
GRAFANA_REPO = "https://apt.grafana.com"
# Where the roles that add it (monitoring: Grafana on the head; logs: Loki and Alloy with
# logs_loki) put its key and its list: one file each, the same text from either role.
GRAFANA_KEYRING = "/usr/share/keyrings/grafana.gpg"
GRAFANA_LIST = "/etc/apt/sources.list.d/gpuinfra-grafana.list"


def grafana_apt_line(repo: str) -> FileText:
    """The list file's one line for Grafana's repository at ``repo`` (or a mirror of it)."""
    return source_list(GRAFANA_KEYRING, repo.rstrip("/"), "stable", ["main"])
