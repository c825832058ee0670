"""The site's Kubernetes keys (version, images, CNI, pod and service networks), typed as
:class:`KubernetesSpec`, and the networks checked against each other and the nodes."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.spec.checks import CLUSTER, WHERE_ALL, WHERE_HOST, Collector
from gpuinfra.spec.model import (
    CONTROL_PLANE_GROUP,
    KubernetesSpec,
    NodeSpec,
)
from gpuinfra.spec.rules import HOSTNAME, is_ip


def kubernetes_spec(raw: Mapping[str, Any], errs: Collector) -> KubernetesSpec:
    version = raw["kubernetes_version"]
    try:
        k8s.release(version)
    except GpuinfraError as exc:
        errs.add(CLUSTER, "kubernetes_version", version, str(exc),
                 ", ".join(f"{m}.x" for m in k8s.SUPPORTED_MINORS) + f" (e.g. "
                 f"{k8s.DEFAULT_VERSION!r}: Kubernetes 1.36+ needs containerd 2, which Debian 12 "
                 "and Ubuntu 22.04/24.04 do not ship)",
                 f"set kubernetes_version {WHERE_ALL}")
        version = k8s.DEFAULT_VERSION
    cni = raw["kubernetes_cni"]
    if cni not in k8s.CNIS:
        errs.add(CLUSTER, "kubernetes_cni", cni, "not a CNI the kubernetes role deploys",
                 ", ".join(k8s.CNIS), f"set kubernetes_cni {WHERE_ALL}")
        cni = k8s.DEFAULT_CNI
    plugin = raw["kubernetes_device_plugin_version"]
    if not isinstance(plugin, str) or not k8s.DEVICE_PLUGIN_VERSION.fullmatch(plugin):
        errs.add(CLUSTER, "kubernetes_device_plugin_version", plugin,
                 "not a device plugin release the role's config format suits",
                 "v0.15.0 or later 0.x, written with its 'v' (MPS sharing and GPU Feature "
                 f"Discovery are in one image since v0.15.0), e.g. "
                 f"{k8s.DEFAULT_DEVICE_PLUGIN_VERSION!r}",
                 f"set kubernetes_device_plugin_version {WHERE_ALL}")
        plugin = k8s.DEFAULT_DEVICE_PLUGIN_VERSION
    repository = raw["kubernetes_image_repository"]
    port = re.match(r"[^/:]+:(\d+)", repository) if isinstance(repository, str) else None
    if not isinstance(repository, str) or not k8s.IMAGE_REPOSITORY.fullmatch(repository) \
            or (port is not None and not 1 <= int(port[1]) <= 65535):
        errs.add(CLUSTER, "kubernetes_image_repository", repository,
                 "not an image repository", "host[:port][/path], e.g. 'registry.k8s.io' or "
                 "'registry.example:5000/k8s' (the site's mirror of registry.k8s.io)",
                 f"set kubernetes_image_repository {WHERE_ALL}")
        repository = k8s.DEFAULT_IMAGE_REPOSITORY
    return KubernetesSpec(
        endpoint=_endpoint(raw.get("kubernetes_control_plane_endpoint"), errs),
        version=version, image_repository=repository,
        pod_cidr=_cidr("kubernetes_pod_cidr", raw["kubernetes_pod_cidr"], errs),
        service_cidr=_cidr("kubernetes_service_cidr", raw["kubernetes_service_cidr"], errs),
        cni=cni, device_plugin_version=plugin)


_ENDPOINT = re.compile(rf"(?P<host>{HOSTNAME}|\[(?P<v6>[0-9A-Fa-f:.]+)\])"
                       r"(?::(?P<port>[0-9]{1,5}))?")


def _endpoint(value: Any, errs: Collector) -> str | None:
    """kubernetes_control_plane_endpoint as ``host:port`` (6443 when no port is given; an IPv6
    address in brackets); None when not set or wrong (reported)."""
    if value is None:
        return None
    found = _ENDPOINT.fullmatch(value) if isinstance(value, str) else None
    bare_v6 = isinstance(value, str) and ":" in value and "[" not in value and is_ip(value)
    port = int(found["port"]) if found and found["port"] else k8s.API_SERVER_PORT
    v6_ok = not (found and found["v6"]) or is_ip(found["v6"])
    if bare_v6:
        return f"[{value}]:{k8s.API_SERVER_PORT}"
    if found and v6_ok and 1 <= port <= 65535:
        return f"{found['host']}:{port}"
    errs.add(CLUSTER, "kubernetes_control_plane_endpoint", value,
             "not an address the API server can be reached at",
             "a host name or IP of the site's VIP or load balancer, with an optional port "
             "(e.g. 'k8s-api.example:6443', '10.0.0.5', '[fd00::5]:6443')",
             f"set kubernetes_control_plane_endpoint {WHERE_ALL}")
    return None


def check_control_planes(nodes: Sequence[NodeSpec], schedulers: Sequence[str],
                         spec: KubernetesSpec, errs: Collector) -> None:
    """Control planes beside the head (the 'kubernetes_control_plane' group; on a Kubernetes
    site and hosts of their own: gpuinfra/spec/controllers.py): each with its address, an odd
    number of etcd members in all, behind an endpoint that is none of them."""
    if "kubernetes" not in schedulers:
        return  # a control plane there is refused as such (controllers.py)
    extras = [n for n in nodes if n.is_extra_control_plane]
    for node in extras:
        if node.address is None:
            errs.add(node.name, "node_address", None, "a control plane needs its address (its "
                     "API server and etcd member advertise it)",
                     "the host's IP on the cluster network",
                     f"set node_address {WHERE_HOST} (or an IP ssh_hostname)")
    planes = [n for n in nodes if n.is_head and "kubernetes" in n.schedulers] + extras
    names = ", ".join(n.name for n in planes)
    if len(planes) % 2 == 0:
        errs.add(CLUSTER, CONTROL_PLANE_GROUP, [n.name for n in extras],
                 f"{len(planes)} control planes ({names}): each runs an etcd member, and etcd "
                 f"needs a majority of them up; {len(planes)} survive no more failures than "
                 f"{len(planes) - 1} do, and a split between the two halves stops the cluster",
                 "an odd number of control planes in all, the head counted (1, 3 or 5)",
                 f"add a host to, or remove one from, {CONTROL_PLANE_GROUP} = [...] in "
                 "inventory/<site>.py")
    if len(planes) > 1 and spec.endpoint is None:
        errs.add(CLUSTER, "kubernetes_control_plane_endpoint", None,
                 f"{len(planes)} control planes ({names}) and no endpoint: every node and "
                 "client would use the head's address and lose the API with the head",
                 "the address of a VIP or load balancer the site runs in front of every "
                 "control plane's API server (port 6443)",
                 f"set kubernetes_control_plane_endpoint {WHERE_ALL}, e.g. "
                 "'k8s-api.example:6443'")
    if len(planes) > 1 and spec.endpoint is not None:
        host = spec.endpoint.rsplit(":", 1)[0].strip("[]")
        owner = next((n for n in planes if host in (n.address, n.name, n.short_name)), None)
        if owner is not None:
            errs.add(CLUSTER, "kubernetes_control_plane_endpoint", spec.endpoint,
                     f"is {owner.name}'s own address: when {owner.name} is down, no node or "
                     "client reaches the API, whatever the other control planes",
                     "a VIP or load balancer apart from every control plane's own address",
                     f"set kubernetes_control_plane_endpoint {WHERE_ALL}")


def _cidr(field: str, value: Any, errs: Collector) -> str:
    """The network ``value`` as text ("" after reporting it)."""
    if isinstance(value, str):
        try:
            net = ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            problem = f"not a network address: {exc}"
        else:
            special = next((what for what, yes in (
                ("loopback", net.is_loopback), ("link-local", net.is_link_local),
                ("multicast", net.is_multicast), ("unspecified", net.is_unspecified),
                ("reserved", net.is_reserved)) if yes), None)
            if special is None:
                return str(net)
            problem = (f"a {special} network: no pod or service traffic can be routed in it "
                       "between nodes")
    else:
        problem = "must be a string"
    errs.add(CLUSTER, field, value, problem,
             "a CIDR whose host bits are zero, e.g. '10.244.0.0/16'",
             f"set {field} {WHERE_ALL}")
    return ""


def check_kubernetes(nodes: Sequence[NodeSpec], spec: KubernetesSpec, errs: Collector) -> None:
    """Networks kubeadm and the CNI can use, apart from each other and from the nodes."""
    members = [n for n in nodes if "kubernetes" in n.schedulers]
    heads = [n for n in members if n.is_head]
    if len(heads) == 1 and heads[0].address is None:
        errs.add(heads[0].name, "node_address", None, "the control plane needs its address "
                 "(the API server advertises it; workers join it)",
                 "the head's IP on the cluster network",
                 f"set node_address {WHERE_HOST} (or an IP ssh_hostname)")
    if not spec.pod_cidr or not spec.service_cidr:
        return  # already reported
    pods, services = ipaddress.ip_network(spec.pod_cidr), ipaddress.ip_network(spec.service_cidr)
    where = f"set kubernetes_pod_cidr / kubernetes_service_cidr {WHERE_ALL}"
    if pods.overlaps(services):
        errs.add(CLUSTER, "kubernetes_pod_cidr/kubernetes_service_cidr",
                 [spec.pod_cidr, spec.service_cidr], "the pod and service networks overlap",
                 "two disjoint networks (kubeadm's defaults: 10.244.0.0/16 and 10.96.0.0/12)",
                 where)
    for field, net in (("kubernetes_pod_cidr", pods), ("kubernetes_service_cidr", services)):
        inside = [n for n in nodes
                  if n.address is not None and ipaddress.ip_address(n.address) in net]
        if inside:  # one problem per network, naming every node it swallows
            shown = ", ".join(f"{n.name} {n.address}" for n in inside[:4])
            more = f" and {len(inside) - 4} more" if len(inside) > 4 else ""
            errs.add(", ".join(n.name for n in inside) if len(inside) <= 4 else CLUSTER,
                     field, str(net), f"contains the address of {len(inside)} node(s) "
                     f"({shown}{more}): traffic to them would be routed into the cluster "
                     "network", "a network apart from every node's address",
                     f"move {field} {WHERE_ALL} away from the hosts' network")
    service_bits = services.max_prefixlen - services.prefixlen
    if service_bits > k8s.MAX_SERVICE_SUBNET_BITS or services.num_addresses < \
            k8s.MIN_SERVICE_ADDRESSES:
        errs.add(CLUSTER, "kubernetes_service_cidr", spec.service_cidr,
                 "kubeadm refuses this size of service network",
                 f"at most 2^{k8s.MAX_SERVICE_SUBNET_BITS} addresses (/12 for IPv4) and at "
                 f"least {k8s.MIN_SERVICE_ADDRESSES} (e.g. '10.96.0.0/12')", where)
    _check_pod_cidr_for_cni(pods, spec, len(members), errs)


def _check_pod_cidr_for_cni(pods: ipaddress.IPv4Network | ipaddress.IPv6Network,
                            spec: KubernetesSpec, members: int, errs: Collector) -> None:
    cni = k8s.CNIS[spec.cni]
    fix = f"set kubernetes_pod_cidr {WHERE_ALL}, e.g. '10.244.0.0/16'"
    if cni.ipv4_only and pods.version != 4:
        errs.add(CLUSTER, "kubernetes_pod_cidr", spec.pod_cidr,
                 f"{cni.name} as deployed here uses IPv4 pod networks", "an IPv4 CIDR", fix)
        return
    if pods.prefixlen >= cni.subnet_len or \
            cni.subnet_len - pods.prefixlen > k8s.NODE_MASK_MAX_DIFF:
        errs.add(CLUSTER, "kubernetes_pod_cidr", spec.pod_cidr,
                 f"{cni.name} gives every node a /{cni.subnet_len} out of the pod network: it "
                 f"must be larger than /{cni.subnet_len} (and kubeadm allows at most "
                 f"{k8s.NODE_MASK_MAX_DIFF} bits between the two)",
                 f"a prefix from /{cni.subnet_len - k8s.NODE_MASK_MAX_DIFF} to "
                 f"/{cni.subnet_len - 1}", fix)
        return
    subnets = 2 ** (cni.subnet_len - pods.prefixlen)
    if subnets < members:
        errs.add(CLUSTER, "kubernetes_pod_cidr", spec.pod_cidr,
                 f"holds {subnets} node subnets (/{cni.subnet_len}) for {members} Kubernetes "
                 "nodes", f"a pod network with a /{cni.subnet_len} for every node", fix)
