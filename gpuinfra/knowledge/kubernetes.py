"""Kubernetes releases, add-ons and images the roles deploy, with where each value comes from.

Sources (keys as in docs/hardware-reference.md 6 and its references):
- pkgs.k8s.io: one apt repository per minor, ``https://pkgs.k8s.io/core:/stable:/v1.35/deb/``;
  kubeadm, kubelet and kubectl are published there as ``<version>-1.1`` [k8s-install]; the
  legacy apt.kubernetes.io is gone [k8s-legacy]. Upgrading to the next minor means moving the
  repository line first [k8s-upgrade].
- kubeadm's pause image per minor (``PauseVersion`` in cmd/kubeadm/app/constants/constants.go):
  3.10 from 1.31 to 1.33, 3.10.1 in 1.35 (v1.35.8 constants; containerd 2.2 has the same
  default). The verify suite compares containerd's sandbox image with
  ``kubeadm config images list`` on every real node.
- kubeadm limits (the same constants.go): a service subnet of at most 2^20 addresses (/12 for
  IPv4) and at least 10; a pod subnet of at least 14 addresses; the node mask at most 16 bits
  longer than the pod subnet's.
- containerd recommended per Kubernetes minor (containerd's RELEASES.md "Kubernetes support":
  1.33 -> 2.1.0+, 2.0.4+, 1.7.24+, 1.6.36+; 1.34 -> 2.1.3+, 2.0.6+, 1.7.28+, 1.6.39+;
  1.35 -> 2.2.0+, 2.1.5+, 1.7.28+, and 1.35 is the
  last minor that still supports containerd 1.x). Kubernetes 1.35 also removed cgroup v1
  support from the kubelet. Hence the supported range stops at 1.35: the distributions'
  containerd is 1.x (Debian 12: 1.6.20, Ubuntu 22.04/24.04: 1.7.x).
- kubeadm config API v1beta4 (1.31+; v1beta3 deprecated) [kubeadm-v1beta3]; kubelet
  ``cgroupDriver: systemd`` to match containerd's ``SystemdCgroup = true`` [k8s-cgroup].
- Flannel v0.26.7 with flannel-cni-plugin v1.6.2-flannel1, the pair flannel's own v0.26.7
  release ships (tag v0.26.7: Documentation/kube-flannel.yml and chart/kube-flannel/values.yaml;
  v1.7.1-flannel1 first ships with v0.27.0, commit 27f6ec8b; knowledge audit 9735030 row 73),
  manifest layout of Documentation/kube-flannel.yml [flannel]: namespace
  kube-flannel, ``net-conf.json`` "Network" = the pod CIDR, vxlan backend, one /24 per node
  (SubnetLen 24), IPv4.
- NVIDIA device plugin v0.17.1 (deployments/static/nvidia-device-plugin.yml at that version);
  config file format v1 (api/config/v1), GFD in the same image since v0.15.0 (its CHANGELOG),
  MPS sharing since v0.15.0 [dp-readme] [dp-sharing]; the Helm chart's MPS control daemon and
  its root ``/run/nvidia/mps`` (deployments/helm/nvidia-device-plugin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuinfra.errors import GpuinfraError
from gpuinfra.text import FileText

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
KUBELET_API = "kubelet.config.k8s.io/v1beta1"
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
DEFAULT_IMAGE_REPOSITORY = "registry.k8s.io"
# Where kubeadm and containerd pull the control-plane and pause images (a mirror keeps names).
IMAGE_REPOSITORY = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9._-]+)*")
API_SERVER_PORT = 6443

PKGS_URL = "https://pkgs.k8s.io"
PACKAGE_REVISION = "1.1"  # pkgs.k8s.io names its builds <version>-1.1
PACKAGES = ("kubelet", "kubeadm", "kubectl")
KEYRING = "/etc/apt/keyrings/kubernetes-apt-keyring.gpg"
LIST_FILE = "/etc/apt/sources.list.d/kubernetes.list"

# kubeadm's limits on the networks (constants.go).
MAX_SERVICE_SUBNET_BITS = 20  # /12 for IPv4
MIN_SERVICE_ADDRESSES = 10
MIN_POD_ADDRESSES = 14
NODE_MASK_MAX_DIFF = 16


@dataclass(frozen=True)
class KubernetesRelease:
    """One supported minor: kubeadm's pause image version, and containerd's recommended floor
    per containerd series (a series missing here is not recommended for this minor)."""

    minor: str
    pause: str
    containerd_floor: dict[str, str]


RELEASES: dict[str, KubernetesRelease] = {r.minor: r for r in (
    KubernetesRelease("1.33", "3.10", {"1.6": "1.6.36", "1.7": "1.7.24", "2.0": "2.0.4",
                                       "2.1": "2.1.0"}),
    # containerd RELEASES.md "Kubernetes support" table, row "| 1.34 | 2.1.3+, 2.0.6+, 1.7.28+,
    # 1.6.39+ | v1 |" (knowledge audit 9735030 row 71; the row was missing when first read).
    KubernetesRelease("1.34", "3.10.1", {"1.6": "1.6.39", "1.7": "1.7.28", "2.0": "2.0.6",
                                         "2.1": "2.1.3"}),
    KubernetesRelease("1.35", "3.10.1", {"1.7": "1.7.28", "2.1": "2.1.5", "2.2": "2.2.0"}),
)}
SUPPORTED_MINORS = tuple(RELEASES)
DEFAULT_VERSION = "1.35.8"

_VERSION = re.compile(r"1\.([0-9]{1,2})\.([0-9]{1,3})")


def minor_of(version: str) -> str:
    """``1.35`` of ``1.35.8``; GpuinfraError for anything but MAJOR.MINOR.PATCH."""
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise GpuinfraError(f"{version!r} is not a Kubernetes version such as "
                            f"{DEFAULT_VERSION!r}")
    return version.rsplit(".", 1)[0]


def release(version: str) -> KubernetesRelease:
    """The supported release of ``version``; GpuinfraError naming the supported minors."""
    minor = minor_of(version)
    if minor not in RELEASES:
        raise GpuinfraError(f"Kubernetes {minor} is not supported (supported minors: "
                            f"{', '.join(SUPPORTED_MINORS)})")
    return RELEASES[minor]


def package_version(version: str) -> str:
    """The pkgs.k8s.io package version of Kubernetes ``version`` (``1.35.8-1.1``)."""
    minor_of(version)
    return f"{version}-{PACKAGE_REVISION}"


def pause_image(version: str, repository: str = DEFAULT_IMAGE_REPOSITORY) -> str:
    """The sandbox (pause) image kubeadm uses for ``version``, in ``repository``."""
    return f"{repository}/pause:{release(version).pause}"


def repository_line(version: str, base_url: str | None = None) -> FileText:
    """The apt list file of ``version``'s minor on pkgs.k8s.io, or on a mirror of its layout
    (its one line: template apt/list.j2)."""
    # Imported here: gpuinfra.apt.files reads the spec's rules, and gpuinfra.spec this module.
    from gpuinfra.apt.files import source_list

    base = (base_url or PKGS_URL).rstrip("/")
    return source_list(KEYRING, f"{base}/core:/stable:/v{minor_of(version)}/deb/", "/")


def repository_key_url(version: str, base_url: str | None = None) -> str:
    base = (base_url or PKGS_URL).rstrip("/")
    return f"{base}/core:/stable:/v{minor_of(version)}/deb/Release.key"


def containerd_recommended(version: str, containerd_version: str) -> str | None:
    """Why ``containerd_version`` is not containerd's recommendation for Kubernetes
    ``version`` (None when it is). Versions as ``1.6.20`` (a Debian revision is ignored)."""
    floors = release(version).containerd_floor
    match = re.match(r"(?:[0-9]+:)?([0-9]+)\.([0-9]+)\.([0-9]+)", containerd_version or "")
    if not match:
        return f"containerd version {containerd_version!r} unknown"
    series = f"{match[1]}.{match[2]}"
    if series not in floors:
        return (f"containerd {series} is not among containerd's recommendations for "
                f"Kubernetes {minor_of(version)} ({', '.join(f'{v}+' for v in floors.values())})")
    have = tuple(int(x) for x in match.groups())
    need = tuple(int(x) for x in floors[series].split("."))
    if have < need:
        return (f"containerd {'.'.join(map(str, have))} is older than the {floors[series]}+ "
                f"containerd recommends for Kubernetes {minor_of(version)}")
    return None


# ---------------------------------------------------------------------------- CNI

@dataclass(frozen=True)
class Cni:
    """A CNI the kubernetes role deploys: its pinned images and what pod CIDR it can use."""

    name: str
    version: str
    images: dict[str, str]
    ipv4_only: bool
    subnet_len: int  # the per-node subnet it allocates (Flannel: /24 IPv4)


CNIS: dict[str, Cni] = {
    "flannel": Cni("flannel", "v0.26.7",
                   {"flannel": "ghcr.io/flannel-io/flannel:v0.26.7",
                    # flannel tag v0.26.7, Documentation/kube-flannel.yml (module docstring)
                    "cni-plugin": "ghcr.io/flannel-io/flannel-cni-plugin:v1.6.2-flannel1"},
                   ipv4_only=True, subnet_len=24),
}
DEFAULT_CNI = "flannel"

# ---------------------------------------------------------------------------- NVIDIA device plugin

DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin"
DEFAULT_DEVICE_PLUGIN_VERSION = "v0.17.1"
# v0.15.0 brought MPS sharing and GFD into one image; the config file format v1 is older.
DEVICE_PLUGIN_VERSION = re.compile(r"v0\.(1[5-9]|[2-9][0-9])\.[0-9]{1,3}")
MPS_ROOT = "/run/nvidia/mps"

# node-problem-detector, which runs the node health check as its custom plugin
# (gpuinfra.kubernetes.manifests.health_objects). v0.8.20 is promoted to registry.k8s.io
# (kubernetes/k8s.io
# registry.k8s.io/images/k8s-staging-npd/images.yaml: sha256:52f0618e9bc2cea60b7aa9d9c962a0b8
# 4dace6ef3cff62d1e1a29c92ba1c4177); its image (Dockerfile: debian-base bookworm with
# util-linux) has /usr/bin/nsenter.
NODE_PROBLEM_DETECTOR_IMAGE = "registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.20"

# The controller that taints the nodes whose health condition is True
# (gpuinfra.kubernetes.manifests.health_taint_objects, gpuinfra_node/taint_controller.py) is
# Python's
# standard library, in Docker's official Python image: 3.11 (the project's floor, pyproject's
# requires-python) on Debian 12, tag 3.11.14-slim-bookworm as listed in docker-library/
# official-images library/python ("Tags: 3.11.14-slim-bookworm, 3.11-slim-bookworm"; amd64,
# arm64v8 among others). A patch tag is rebuilt by Docker for Debian updates: it pins
# Python, not every byte. Why not kubectl with a shell loop: registry.k8s.io/kubectl has no
# shell. It is kubectl on the go-runner (distroless) base (kubernetes build/server-image/
# kubectl/Dockerfile, build/common.sh KUBECTL_BASE_IMAGE); bash and jq were added by
# kubernetes/kubernetes#119592, reverted by #120219 (2023-08-28), and #120314, which would
# have brought them back, was closed. None of the images pinned above has Python either
# (node-problem-detector: debian-base with util-linux and bash; device plugin: NVIDIA
# distroless; flannel: Alpine with its network tools). With Python, the rule that runs is the
# unit-tested module itself (gpuinfra.health.taint, shipped beside the controller).
TAINT_CONTROLLER_IMAGE = "docker.io/library/python:3.11.14-slim-bookworm"

# The RDMA shared device plugin (Mellanox/k8s-rdma-shared-dev-plugin, tag v1.5.3, 2025-03-26:
# its release workflow pushes ghcr.io/<repository>:<tag> for amd64, arm64 and ppc64le, and the
# NVIDIA Network Operator's NicClusterPolicy example names this repository and version). It
# advertises <resourcePrefix>/<resourceName> (prefix "rdma" by default), each HCA shared by
# up to rdmaHcaMax pods (README "RDMA Shared Device Plugin Configurations").
RDMA_PLUGIN_IMAGE = "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"
RDMA_RESOURCE_NAME = "rdma_shared_device_a"
RDMA_RESOURCE = f"rdma/{RDMA_RESOURCE_NAME}"
RDMA_HCA_MAX = 63  # the Network Operator's example NicClusterPolicy
LABEL_RDMA = "gpuinfra.io/rdma"

# Node labels the device plugin, GFD and the kubernetes role use (docs/hardware-reference.md 6).
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
LABEL_PRODUCT = "nvidia.com/gpu.product"
TAINT_GPU = "nvidia.com/gpu"
RUNTIME_CLASS = "nvidia"
