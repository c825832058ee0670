"""The cluster spec: a typed model of what the roles need, built from pyinfra host data.

Where each value lives (pyinfra's own places, see README "Describing a site"):
- ``inventory/<site>.py``: hosts, their groups (``head``, ``workers``, ``hypervisors``) and
  per-host data (``gpu_model``, ``gpu_count``, ``gpu_topology``, ``gpu_sharing``, ``rdma_nics``);
- ``group_data/all.py``: cluster-wide values (``cluster_name``, ``schedulers``,
  ``driver_branch``, ``mig_strategy``, ``reboot_policy``, ``apt_mirror``, ``apt_proxy``,
  ``nvidia_repo_mirror``, ``offline``, ``slurm_partitions``, ``slurm_accounting``,
  ``munge_key_rotation``);
- ``group_data/<group>.py``: values shared by a group (e.g. every worker's GPU model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gpuinfra.knowledge.drivers import DEFAULT_BRANCH
from gpuinfra.knowledge.gpus import GpuModel
from gpuinfra.knowledge.topology import TopologyProfile, fabric_manager_needed

HEAD_GROUP = "head"
WORKER_GROUP = "workers"
HYPERVISOR_GROUP = "hypervisors"
ROLE_GROUPS = (HEAD_GROUP, WORKER_GROUP, HYPERVISOR_GROUP)

# What the roles deploy today. A spec asking for anything else is refused before any host is
# touched, with this reason: accepting it would deploy nothing, silently.
NOT_DEPLOYED = {
    "kubernetes": "no Kubernetes role yet: schedulers = ['kubernetes'] would deploy nothing",
    HYPERVISOR_GROUP: "no VFIO role yet: hosts in the 'hypervisors' group would get nothing "
                      "for GPU passthrough",
}

SCHEDULERS = ("slurm", "kubernetes")
MIG_STRATEGIES = ("single", "mixed")
REBOOT_POLICIES = ("never", "if-needed")
SHARING_MODES = ("none", "mig", "mps", "time-slicing")
LINK_LAYERS = ("infiniband", "ethernet")

# Host-level keys of the spec, with their defaults (None: no default, absent means "not set").
HOST_KEYS: dict[str, Any] = {
    "gpu_model": None,
    "gpu_count": None,
    "gpu_topology": None,
    "gpu_sharing": None,
    "rdma_nics": None,
    # The node's address on the cluster network (/etc/hosts, slurm.conf NodeAddr); default:
    # ssh_hostname when it is an IP.
    "node_address": None,
}

# Cluster-wide keys: must agree on every host (set them once, in group_data/all.py).
CLUSTER_KEYS: dict[str, Any] = {
    "cluster_name": "gpucluster",
    "schedulers": ["slurm"],
    "driver_branch": DEFAULT_BRANCH,
    "mig_strategy": "single",
    "reboot_policy": "never",
    "apt_mirror": None,
    "apt_proxy": None,
    "nvidia_repo_mirror": None,
    "offline": False,
    "slurm_partitions": None,
    "slurm_accounting": False,
    "munge_key_rotation": None,
    # Stop the whole deploy when more than this percent of the hosts failed: above it the
    # deploy itself is broken (data, a mirror, a pin), below it dead or sick nodes are the
    # normal state of a large cluster and the healthy ones converge.
    "max_fail_percent": 50,
}

SPEC_KEYS = (*HOST_KEYS, *CLUSTER_KEYS)


@dataclass(frozen=True)
class SpecWarning:
    """A setting that is valid but has only part of its effect today (said at validation)."""

    host: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.host}: {self.field}: {self.message}"


@dataclass(frozen=True)
class HostInput:
    """What a caller hands the validator for one host: its name, groups and merged data."""

    name: str
    groups: tuple[str, ...]
    data: Mapping[str, Any]


@dataclass(frozen=True)
class GpuSharing:
    """How a node's GPUs are shared. ``mig_layout`` holds one {profile: count} per GPU."""

    mode: str = "none"
    mig_layout: tuple[Mapping[str, int], ...] = ()
    mps_clients: int | None = None
    mps_thread_percentage: int | None = None
    mps_pinned_mem_limit: str | None = None
    replicas: int | None = None


@dataclass(frozen=True)
class RdmaNic:
    name: str
    pci: str | None = None
    ats: bool = True
    link_layer: str = "infiniband"


@dataclass(frozen=True)
class GpuSpec:
    model: GpuModel
    count: int
    topology: TopologyProfile

    @property
    def needs_fabric_manager(self) -> bool:
        return fabric_manager_needed(self.topology, self.model, self.count)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    groups: tuple[str, ...]
    gpus: GpuSpec | None = None
    sharing: GpuSharing = field(default_factory=GpuSharing)
    rdma_nics: tuple[RdmaNic, ...] = ()
    # The cluster-network address (node_address, else an IP ssh_hostname); None: unknown.
    address: str | None = None
    # Every role knob's checked value for this host (roles/<role>/defaults.py).
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_head(self) -> bool:
        return HEAD_GROUP in self.groups

    @property
    def is_worker(self) -> bool:
        return WORKER_GROUP in self.groups

    @property
    def short_name(self) -> str:
        return self.name.split(".")[0]


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    default: bool = False
    gpu: bool = False


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    schedulers: tuple[str, ...]
    driver_branch: str
    mig_strategy: str
    reboot_policy: str
    apt_mirror: Mapping[str, str]
    apt_proxy: str | None
    nvidia_repo_mirror: str | None
    offline: bool
    nodes: tuple[NodeSpec, ...]
    partitions: tuple[Partition, ...] = ()
    slurm_accounting: bool = False
    munge_key_rotation: str | None = None
    max_fail_percent: int = 50
    warnings: tuple[SpecWarning, ...] = ()

    def node(self, name: str) -> NodeSpec:
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, NodeSpec]:
        return {n.name: n for n in self.nodes}

    @property
    def workers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.is_worker)

    @property
    def head(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.is_head)

    @property
    def gpu_nodes(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.gpus is not None)
