"""Each host as a node of the spec (its GPUs, sharing, RDMA NICs, VFIO, address, schedulers),
and what the nodes must be together: unique addresses, one head, Slurm workers, a worker in
one scheduler unless the site says how two share it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.platforms import node_address
from gpuinfra.spec import rdma
from gpuinfra.spec.checks import CLUSTER, WHERE_ALL, WHERE_HOST, Collector
from gpuinfra.spec.gpus import check_branch_drives, gpu_spec
from gpuinfra.spec.hardware import hardware_spec
from gpuinfra.spec.model import (
    CONTROL_PLANE_GROUP,
    HEAD_GROUP,
    ONE_SCHEDULER_GROUPS,
    WORKER_GROUP,
    HostInput,
    NodeSpec,
)
from gpuinfra.spec.sharing import gpu_sharing
from gpuinfra.spec.vfio import vfio_spec
from gpuinfra.vfio import LIBVIRT_IMAGES


def node_spec(host: HostInput, cluster: Mapping[str, Any], settings: Mapping[str, Any],
              errs: Collector) -> NodeSpec:
    """``host`` as a node of the spec, from its own keys, the checked ``cluster`` values and
    its checked knob ``settings``."""
    gpus, known = gpu_spec(host, errs)
    sharing = gpu_sharing(host, known, cluster["mig_strategy"], errs)
    check_branch_drives(host.name, known, sharing, cluster["driver_branch"], errs)
    return NodeSpec(
        name=host.name,
        groups=tuple(host.groups),
        gpus=gpus,
        sharing=sharing,
        rdma_nics=(nics := rdma.rdma_nics(host, (soft := rdma.soft_roce(host, errs)), errs)),
        soft_roce=soft,
        address=_address(host, errs),
        settings=settings,
        vfio=vfio_spec(host, gpus, nics, errs,
                       settings.get("vfio_image_dir", LIBVIRT_IMAGES)),
        schedulers=_node_schedulers(host, cluster["schedulers"], errs),
        hardware=hardware_spec(host, errs),
    )


def _address(host: HostInput, errs: Collector) -> str | None:
    value = host.data.get("node_address")
    if value is not None and node_address({"node_address": value}) is None:
        errs.add(host.name, "node_address", value, "not an IP address",
                 "the node's IPv4 or IPv6 address on the cluster network",
                 f"set node_address {WHERE_HOST}, or remove it (an IP ssh_hostname is used)")
        return None
    address = node_address(host.data)
    problem = _not_a_node_address(address)
    if address is not None and problem:
        field = "node_address" if value is not None else "ssh_hostname"
        errs.add(host.name, field, host.data.get(field), problem,
                 "one unicast address of this node on the cluster network",
                 f"set node_address {WHERE_HOST} to the node's own address")
        return None
    return address


def _not_a_node_address(address: str | None) -> str | None:
    """Why ``address`` cannot be one node's address on the cluster network (every daemon of the
    node listens there, /etc/hosts and slurm.conf name it): None when it can."""
    if address is None:
        return None
    ip = ipaddress.ip_address(address)
    if ip.is_unspecified:
        return "the unspecified address: every daemon would listen on every interface"
    if ip.is_loopback:
        return "a loopback address: no other node reaches it"
    if ip.is_multicast:
        return "a multicast address, not one node's"
    if isinstance(ip, ipaddress.IPv4Address) and ip == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address, not one node's"
    if ip.is_link_local:
        return "a link-local address: valid on one link only, and not in /etc/hosts"
    return None


def check_unique_addresses(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """Two hosts at one address would be one machine deployed as two (and /etc/hosts would
    name it twice)."""
    by_address: dict[str, list[str]] = {}
    for node in nodes:
        if node.address is not None:
            by_address.setdefault(node.address, []).append(node.name)
    for address, names in by_address.items():
        if len(names) > 1:
            errs.add(names[0], "node_address", address,
                     f"{len(names)} hosts have this address: {', '.join(names)}",
                     "one address per host", "give each host its own node_address "
                     f"{WHERE_HOST}")


def _node_schedulers(host: HostInput, site: Sequence[str], errs: Collector) -> tuple[str, ...]:
    """The schedulers a host belongs to: the head and the workers default to the site's; any
    other host (a hypervisor, a service host) to none, so it gets no MUNGE, slurm, Pyxis,
    containerd or Kubernetes repository (issue 45 item 5); ``node_schedulers = []`` says so
    on such a host, and a list puts it in those schedulers."""
    raw = host.data.get("node_schedulers")
    member = HEAD_GROUP in host.groups or WORKER_GROUP in host.groups
    own = [(g, s) for g, s in ONE_SCHEDULER_GROUPS.items() if g in host.groups]
    if own and not member:
        # A backup controller or a login node is Slurm's alone, an extra control plane
        # Kubernetes' (gpuinfra/spec/controllers.py and kubernetes.py judge them).
        group, scheduler = own[0]
        if raw is not None and not (isinstance(raw, (list, tuple)) and
                                    list(raw) == [scheduler]):
            whose = ("Slurm's (its backup controller, or a login node)" if scheduler == "slurm"
                     else "Kubernetes' (a control plane, with etcd)")
            errs.add(host.name, "node_schedulers", raw, f"a host in '{group}' is {whose} "
                     "and nothing else's", f"['{scheduler}'], or no "
                     "node_schedulers", f"remove node_schedulers {WHERE_HOST}")
        return (scheduler,) if scheduler in site else ()
    if raw is None:
        return tuple(site) if member else ()
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        errs.add(host.name, "node_schedulers", raw, "must be a list",
                 f"a list drawn from the site's schedulers {list(site)}",
                 f"set node_schedulers {WHERE_HOST}, e.g. ['kubernetes']")
        return tuple(site)
    if not raw and member:
        role = "the head" if HEAD_GROUP in host.groups else "a worker"
        errs.add(host.name, "node_schedulers", raw, f"empty on {role}: it would run no "
                 "scheduler, and a head or worker is there for one",
                 f"a non-empty list drawn from the site's schedulers {list(site)}",
                 f"remove node_schedulers {WHERE_HOST}, or move the host to another group "
                 "(e.g. 'hypervisors')")
        return tuple(site)
    bad = [s for s in raw if s not in site]
    if bad:
        errs.add(host.name, "node_schedulers", raw, f"names {bad}, which the site does not run",
                 f"a list drawn from the site's schedulers {list(site)}",
                 f"add {bad} to schedulers {WHERE_ALL}, or remove them from node_schedulers")
    return tuple(s for s in site if s in raw)


def check_shared_workers(nodes: Sequence[NodeSpec], sharing: str | None,
                         errs: Collector) -> None:
    """A worker in Slurm and Kubernetes at once: both would hand out the same GPUs."""
    if sharing is not None:
        return
    for node in nodes:
        if node.is_worker and {"slurm", "kubernetes"} <= set(node.schedulers):
            errs.add(node.name, "node_schedulers", list(node.schedulers),
                     "this worker is in Slurm and in Kubernetes: both would hand out its GPUs "
                     "to different jobs at once",
                     "one scheduler per worker, unless the site says how they share it",
                     "set node_schedulers = ['slurm'] or ['kubernetes'] for the host, or "
                     f"scheduler_sharing = 'drain' {WHERE_ALL} (you drain it in one scheduler "
                     "before the other uses it)")


def check_heads(nodes: Sequence[NodeSpec], schedulers: Sequence[str], errs: Collector) -> None:
    """The schedulers' head: one Slurm controller and a Slurm worker, one control plane."""
    heads = [n.name for n in nodes if n.is_head]
    if "slurm" in schedulers and len(heads) != 1:
        problem = "no Slurm controller" if not heads else f"{len(heads)} Slurm controllers"
        errs.add(CLUSTER, f"group '{HEAD_GROUP}'", heads, problem,
                 "exactly one host in the 'head' group (it runs slurmctld)",
                 "list exactly one host in head = [...] in inventory/<site>.py")
    if "slurm" in schedulers and not any(n.is_worker and "slurm" in n.schedulers
                                         for n in nodes):
        errs.add(CLUSTER, f"group '{WORKER_GROUP}'", [], "no Slurm worker: slurmd would run "
                 "nowhere and no job could start", "at least one host in the 'workers' group "
                 "whose node_schedulers include 'slurm'",
                 "list the compute nodes in workers = [...] in inventory/<site>.py")
    if "kubernetes" in schedulers and len(heads) != 1:
        problem = "no Kubernetes control plane" if not heads else \
            f"{len(heads)} control-plane hosts in 'head' (kubeadm init runs on one)"
        errs.add(CLUSTER, f"group '{HEAD_GROUP}'", heads, problem,
                 "exactly one host in the 'head' group (it runs the first control plane)",
                 "list exactly one host in head = [...] in inventory/<site>.py, and the "
                 f"other control planes in {CONTROL_PLANE_GROUP} = [...]")

