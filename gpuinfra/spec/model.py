"""The cluster spec: a typed model of what the roles need, built from pyinfra host data.

Where each value lives (pyinfra's own places, see docs/spec.md):
- ``inventory/<site>.py``: hosts, their groups (``head``, ``workers``, ``hypervisors``) and
  per-host data (``gpu_model``, ``gpu_count``, ``gpu_topology``, ``gpu_sharing``, ``rdma_nics``,
  ``soft_roce`` (lab only);
  on hypervisors ``vfio_devices``, ``vms``, ``vfio_nvlink``);
- ``group_data/all.py``: cluster-wide values (``cluster_name``, ``schedulers``,
  ``driver_branch``, ``mig_strategy``, ``reboot_policy``, ``apt_mirror``, ``apt_proxy``,
  ``nvidia_repo_mirror``, ``offline``, ``slurm_partitions``, ``slurm_accounting``,
  ``munge_key_rotation``, the ``kubernetes_*`` keys, ``scheduler_sharing``, ``rdma_stack``);
- ``group_data/<group>.py``: values shared by a group (e.g. every worker's GPU model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.knowledge.drivers import DEFAULT_BRANCH
from gpuinfra.knowledge.gpus import GpuModel
from gpuinfra.knowledge.topology import TopologyProfile, fabric_manager_needed

HEAD_GROUP = "head"
WORKER_GROUP = "workers"
HYPERVISOR_GROUP = "hypervisors"
# Slurm's backup controllers: a second (third...) SlurmctldHost, in inventory order after the
# head, sharing its StateSaveLocation (slurm_state_save_location; gpuinfra/spec/controllers.py).
BACKUP_GROUP = "slurm_backup"
# Debian's slurmctld keeps its state here (the slurm role's default): each host's own disk.
DEFAULT_STATE_DIR = "/var/lib/slurm/slurmctld"
# Slurm's login nodes: users' own hosts, with Slurm's client commands (sbatch, srun, squeue)
# and MUNGE, the head's slurm.conf, and no slurmd: they run no job themselves.
LOGIN_GROUP = "login"
# Kubernetes control planes beside the head (kubeadm's stacked etcd on each): with the head,
# an odd number, behind kubernetes_control_plane_endpoint (gpuinfra/spec/kubernetes.py).
CONTROL_PLANE_GROUP = "kubernetes_control_plane"
ROLE_GROUPS = (HEAD_GROUP, WORKER_GROUP, HYPERVISOR_GROUP, BACKUP_GROUP, LOGIN_GROUP,
               CONTROL_PLANE_GROUP)
# Groups whose hosts are in one scheduler alone, whatever the site runs besides, each a host of
# its own (gpuinfra/spec/controllers.py).
ONE_SCHEDULER_GROUPS = {BACKUP_GROUP: "slurm", LOGIN_GROUP: "slurm",
                        CONTROL_PLANE_GROUP: "kubernetes"}

# What the roles deploy today. A spec asking for anything else is refused before any host is
# touched, with this reason: accepting it would deploy nothing, silently.
NOT_DEPLOYED = {
}

SCHEDULERS = ("slurm", "kubernetes")
# How a worker in both schedulers is shared: "drain" = it runs slurmd and the kubelet, and the
# operator drains it in one (scontrol ... state=drain / kubectl cordon+drain) before the other
# schedules on its GPUs. None: a worker in both is refused.
SCHEDULER_SHARING = ("drain",)
MIG_STRATEGIES = ("single", "mixed")
REBOOT_POLICIES = ("never", "if-needed")
SHARING_MODES = ("none", "mig", "mps", "time-slicing")
LINK_LAYERS = ("infiniband", "ethernet")
RDMA_STACKS = ("inbox", "doca-ofed")
# How passed-through GPUs are joined by NVLink: a bridge (or direct links) between the GPUs of
# a group, or an NVSwitch board whose GPUs all reach each other through the switches.
NVLINK_FABRICS = ("bridge", "nvswitch")

# Host-level keys of the spec, with their defaults (None: no default, absent means "not set").
HOST_KEYS: dict[str, Any] = {
    "gpu_model": None,
    "gpu_count": None,
    "gpu_topology": None,
    "gpu_sharing": None,
    "rdma_nics": None,
    # Lab only: the node's rdma_nics are Soft-RoCE (rdma_rxe) devices on its netdevs, made by
    # the rdma role at boot; a real site never sets it.
    "soft_roce": None,
    # The node's address on the cluster network (/etc/hosts, slurm.conf NodeAddr); default:
    # ssh_hostname when it is an IP.
    "node_address": None,
    # Hypervisors (VFIO passthrough): the devices given to VMs (PCI addresses or vendor:device
    # IDs), the VMs with their devices, and which passed-through GPUs NVLink joins.
    "vfio_devices": None,
    "vms": None,
    "vfio_nvlink": None,
    # The schedulers this node belongs to (a subset of the site's schedulers); default: all.
    "node_schedulers": None,
    # The node's CPUs and memory (gpuinfra/spec/hardware.py): what a preview without the
    # node's facts writes into slurm.conf; the node's own facts win at deploy.
    "node_hardware": None,
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
    "kubernetes_version": k8s.DEFAULT_VERSION,
    "kubernetes_pod_cidr": "10.244.0.0/16",
    "kubernetes_service_cidr": "10.96.0.0/12",
    "kubernetes_cni": k8s.DEFAULT_CNI,
    "kubernetes_device_plugin_version": k8s.DEFAULT_DEVICE_PLUGIN_VERSION,
    "kubernetes_image_repository": k8s.DEFAULT_IMAGE_REPOSITORY,
    # The API server's address for every node and client: a VIP or load balancer the site
    # provides, in front of every control plane ('host' or 'host:port'); None: the head's
    # address. Required with kubernetes_control_plane hosts.
    "kubernetes_control_plane_endpoint": None,
    "scheduler_sharing": None,
    # The RDMA stack on hosts with rdma_nics: "inbox" (the distribution's rdma-core) or
    # "doca-ofed" (NVIDIA's DOCA-OFED, pinned by roles/rdma/defaults.py). Never both.
    "rdma_stack": "inbox",
    # Stop the whole deploy when more than this percent of the hosts failed: above it the
    # deploy itself is broken (data, a mirror, a pin), below it dead or sick nodes are the
    # normal state of a large cluster and the healthy ones converge.
    "max_fail_percent": 50,
    # The fabric's switches for Slurm's topology/tree (gpuinfra/spec/fabric.py): switch ->
    # the nodes cabled to it (a leaf) or the switches under it. None: no topology.conf.
    "fabric_switches": None,
    # NVLink-domain racks (GB200 NVL72) for Slurm's topology/block (gpuinfra/spec/blocks.py):
    # block -> its nodes. None: none. Never with fabric_switches (one TopologyPlugin).
    "fabric_blocks": None,
}

SPEC_KEYS = (*HOST_KEYS, *CLUSTER_KEYS)

# pyinfra's SSH connector keys (pyinfra 3.10, pyinfra/connectors/ssh.py connector_data_meta; a
# test holds the list to it): the "ssh_" prefix is theirs, and a key with it that is none of
# these is a typo (ssh_hostnme would connect to the host's inventory name instead).
PYINFRA_SSH_KEYS = (
    "ssh_allow_agent", "ssh_config_file", "ssh_connect_retries", "ssh_connect_retry_max_delay",
    "ssh_connect_retry_min_delay", "ssh_file_transfer_protocol", "ssh_forward_agent",
    "ssh_hostname", "ssh_key", "ssh_key_password", "ssh_known_hosts_file",
    "ssh_look_for_keys", "ssh_paramiko_connect_kwargs", "ssh_password", "ssh_port",
    "ssh_strict_host_key_checking", "ssh_user",
)


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
    # Time-slicing on Kubernetes: a pod asking for more than one shared GPU is refused at
    # admission (the device plugin's failRequestsGreaterThanOne): two replicas of one GPU give
    # it no more compute than one (hardware-reference.md, NVIDIA k8s-device-plugin README).
    fail_requests_greater_than_one: bool = True


@dataclass(frozen=True)
class RdmaNic:
    """One RDMA NIC of a node.

    name: the verbs device (``mlx5_0``; ``rxe0`` for Soft-RoCE). pci: its PCI address,
    ``DDDD:BB:SS.F`` lower case (None: Soft-RoCE, or not given). ats: ATS wanted in firmware.
    link_layer: "infiniband" or "ethernet". rate_gbps: the port's expected rate (None: not
    checked). model: a key of gpuinfra.knowledge.nics (None: not said). gid_index: RoCE GID
    index NCCL uses (NCCL_IB_GID_INDEX; None: NCCL's own choice). netdev: the network
    interface (RoCE; required for Soft-RoCE, whose device is made on it).
    """

    name: str
    pci: str | None = None
    ats: bool = True
    link_layer: str = "infiniband"
    rate_gbps: float | None = None
    model: str | None = None
    gid_index: int | None = None
    netdev: str | None = None


@dataclass(frozen=True)
class VmSpec:
    """A virtual machine on a hypervisor and the PCI devices (whole cards) it gets.

    vmid: its Proxmox VE id (``qm``); disk: its disk image (libvirt), None for none.
    """

    name: str
    devices: tuple[str, ...]
    vcpus: int = 4
    memory_mib: int = 16384
    vmid: int | None = None
    disk: str | None = None


@dataclass(frozen=True)
class NvlinkGroup:
    """Passed-through GPUs joined by NVLink (``fabric``: "bridge" or "nvswitch")."""

    gpus: tuple[str, ...]
    fabric: str = "bridge"


@dataclass(frozen=True)
class VfioSpec:
    """What a hypervisor passes through: devices by PCI address (``addresses``) and by
    vendor:device ID (``ids``), its VMs, and the NVLink groups among its GPUs."""

    addresses: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    vms: tuple[VmSpec, ...] = ()
    nvlink: tuple[NvlinkGroup, ...] = ()


@dataclass(frozen=True)
class GpuSpec:
    model: GpuModel
    count: int
    topology: TopologyProfile

    @property
    def needs_fabric_manager(self) -> bool:
        return fabric_manager_needed(self.topology, self.model, self.count)


@dataclass(frozen=True)
class HardwareSpec:
    """A node's CPUs and memory as the spec gives them (``node_hardware``)."""

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_gb: int

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


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
    # Hypervisors: what goes to VMs (None on other hosts).
    vfio: VfioSpec | None = None
    # The schedulers this node belongs to (node_schedulers; default: the site's).
    schedulers: tuple[str, ...] = ()
    # Lab only: rdma_nics are Soft-RoCE devices (see HOST_KEYS).
    soft_roce: bool = False
    # Its CPUs and memory as the spec gives them (node_hardware; None: not given).
    hardware: HardwareSpec | None = None

    @property
    def is_head(self) -> bool:
        return HEAD_GROUP in self.groups

    @property
    def is_worker(self) -> bool:
        return WORKER_GROUP in self.groups

    @property
    def is_hypervisor(self) -> bool:
        return HYPERVISOR_GROUP in self.groups

    @property
    def is_backup_controller(self) -> bool:
        """A Slurm backup controller (slurmctld in standby, sharing the head's state)."""
        return BACKUP_GROUP in self.groups

    @property
    def is_login(self) -> bool:
        """A Slurm login node (client commands, no slurmd)."""
        return LOGIN_GROUP in self.groups

    @property
    def is_extra_control_plane(self) -> bool:
        """A Kubernetes control plane joined beside the head's (kubeadm join --control-plane)."""
        return CONTROL_PLANE_GROUP in self.groups

    @property
    def is_controller(self) -> bool:
        """slurmctld runs here: the head, or a backup controller."""
        return self.is_head or self.is_backup_controller

    @property
    def short_name(self) -> str:
        return self.name.split(".")[0]


@dataclass(frozen=True)
class Partition:
    """A Slurm partition (``slurm_partitions``; its settings: gpuinfra/spec/partitions.py).

    ``gpu``: the site said every node of the partition has GPUs (checked at validation).
    ``settings``: (Slurm key, value) pairs as written on its ``PartitionName=`` line;
    ``def_mem_per_gpu``/``def_cpu_per_gpu``: the partition's own per-GPU defaults (None:
    the site's, else computed from its nodes; 0: left out)."""

    name: str
    nodes: tuple[str, ...]
    default: bool = False
    gpu: bool = False
    settings: tuple[tuple[str, str], ...] = ()
    def_mem_per_gpu: int | None = None
    def_cpu_per_gpu: int | None = None

    def setting(self, key: str, default: str | None = None) -> str | None:
        return dict(self.settings).get(key, default)


@dataclass(frozen=True)
class Switch:
    """One switch: its name and children, nodes (inventory names: a leaf) or switches."""

    name: str
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return bool(self.nodes)


@dataclass(frozen=True)
class Fabric:
    """The checked tree: switches in the site's order, and each Slurm node's leaf."""

    switches: tuple[Switch, ...]

    @property
    def leaf_of(self) -> dict[str, str]:
        return {node: s.name for s in self.switches for node in s.nodes}

    @property
    def roots(self) -> tuple[str, ...]:
        children = {c for s in self.switches for c in s.switches}
        return tuple(s.name for s in self.switches if s.name not in children)


@dataclass(frozen=True)
class NvlinkBlock:
    """One NVLink block (``fabric_blocks``): its name and its Slurm nodes (inventory names)."""

    name: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class KubernetesSpec:
    """The Kubernetes cluster: pinned version (``1.35.8``), networks, CNI, device plugin."""

    version: str = k8s.DEFAULT_VERSION
    pod_cidr: str = "10.244.0.0/16"
    service_cidr: str = "10.96.0.0/12"
    cni: str = k8s.DEFAULT_CNI
    device_plugin_version: str = k8s.DEFAULT_DEVICE_PLUGIN_VERSION
    image_repository: str = k8s.DEFAULT_IMAGE_REPOSITORY
    # kubernetes_control_plane_endpoint ('host' or 'host:port'); None: the head's address.
    endpoint: str | None = None

    @property
    def minor(self) -> str:
        return k8s.minor_of(self.version)

    @property
    def pause_image(self) -> str:
        """The sandbox image containerd must use (kubeadm's, from the image repository)."""
        return k8s.pause_image(self.version, self.image_repository)


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
    kubernetes: KubernetesSpec = field(default_factory=KubernetesSpec)
    scheduler_sharing: str | None = None
    max_fail_percent: int = 50
    rdma_stack: str = "inbox"
    fabric: Fabric | None = None
    # NVLink blocks for topology/block (gpuinfra/spec/blocks.py); None: not given.
    blocks: tuple[NvlinkBlock, ...] | None = None
    warnings: tuple[SpecWarning, ...] = ()

    def node(self, name: str) -> NodeSpec:
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, NodeSpec]:
        return {n.name: n for n in self.nodes}

    # The selections below are cached per spec (it is frozen): every host's plan asks for
    # them (the head for MUNGE, Slurm, monitoring; ``site.head_up`` per operation), and a scan
    # of every node per ask made planning N hosts quadratic (10,000 workers: 1.6x the time
    # per host of 1,000).
    @cached_property
    def workers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.is_worker)

    @cached_property
    def head(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.is_head)

    @cached_property
    def backup_controllers(self) -> tuple[NodeSpec, ...]:
        """Slurm's backup controllers, in inventory order (each a later SlurmctldHost)."""
        return tuple(n for n in self.nodes if n.is_backup_controller)

    @cached_property
    def control_planes(self) -> tuple[NodeSpec, ...]:
        """Kubernetes control planes: the head (kubeadm init), then the others in inventory
        order (each joined with --control-plane); etcd runs on each."""
        return tuple(n for n in self.nodes if "kubernetes" in n.schedulers and n.is_head) + \
            tuple(n for n in self.nodes if n.is_extra_control_plane)

    @cached_property
    def gpu_nodes(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.gpus is not None)

    @cached_property
    def _members(self) -> dict[str, tuple[NodeSpec, ...]]:
        found: dict[str, list[NodeSpec]] = {}
        for n in self.nodes:
            for scheduler in n.schedulers:
                found.setdefault(scheduler, []).append(n)
        return {scheduler: tuple(nodes) for scheduler, nodes in found.items()}

    def members(self, scheduler: str) -> tuple[NodeSpec, ...]:
        """The nodes ``scheduler`` runs on (head and workers), per their node_schedulers."""
        return self._members.get(scheduler, ())

    @cached_property
    def _workers_of(self) -> dict[str, tuple[NodeSpec, ...]]:
        return {scheduler: tuple(n for n in nodes if n.is_worker)
                for scheduler, nodes in self._members.items()}

    def workers_of(self, scheduler: str) -> tuple[NodeSpec, ...]:
        """The workers ``scheduler`` schedules on."""
        return self._workers_of.get(scheduler, ())
