"""The `kubernetes` role: a kubeadm cluster on the spec's Kubernetes nodes, with the GPU layer.

Every Kubernetes node: swap off (now and in /etc/fstab), overlay and br_netfilter loaded (and
at boot), the forwarding sysctls, pkgs.k8s.io's repository for the pinned minor (or the site's
mirror), kubeadm, kubelet and kubectl at the pinned version, held. The head: kubeadm-init.yaml
rendered from the spec (gpuinfra.kubernetes.kubeadm) and checked by ``kubeadm config validate``
before it
goes in, ``kubeadm init`` once (an initialised control plane is never initialised again); the
CNI, RuntimeClass ``nvidia`` and the NVIDIA device plugin as manifests
(gpuinfra.kubernetes.manifests),
checked by the API server (``kubectl apply --dry-run=server``) before they are written and
applied; GPU nodes labelled (and optionally tainted). Workers: ``kubeadm join`` once, with a
single-use token made on the head at run time that never leaves memory (operations._join).
A changed Kubernetes version on a running node moves the repository line and stops with the
ordered upgrade steps (gpuinfra.kubernetes.kubeadm.upgrade_steps). Data keys: defaults.py.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import FileContents
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.health import taint as health_taint
from gpuinfra.health.breaker import Breaker
from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.knowledge.packages import SIGNING_KEYS, PinnedPackages
from gpuinfra.kubernetes import kubeadm, manifests
from gpuinfra.kubernetes.deviceplugin import config_key, plugin_config
from gpuinfra.kubernetes.rdma import rdma_objects
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra_deploy.nodecode import sources
from gpuinfra_deploy.ops.apt import apt_keyring, install_pinned
from gpuinfra_deploy.ops.checked import check_script, checked_files, upload_source
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import text as render_text
from gpuinfra_roles.kubernetes.operations import (
    KUBECTL,
    control_plane,
    joined,
    manifests_applied,
    modules_loaded,
    node_labels,
    refuse,
    swap_off,
)

PIN_FILE = "/etc/apt/preferences.d/gpuinfra-kubernetes"
STAGE = f"{kubeadm.CONFIG_DIR}/.stage"
MANIFESTS = f"{kubeadm.CONFIG_DIR}/manifests"
NAMESPACES = f"{MANIFESTS}/00-namespaces.yaml"
CLUSTER_OBJECTS = f"{MANIFESTS}/10-cluster.yaml"
GPU_TAINT = (k8s.TAINT_GPU, "present", "NoSchedule")
HEALTH_TAINT = (health_taint.TAINT_KEY, health_taint.TAINT_VALUE, health_taint.TAINT_EFFECT)


@deploy("kubernetes")
def kubernetes(site: Site, node: NodeSpec) -> None:
    # Where it runs: applies() below (ROLE.apply never calls it elsewhere).
    spec = site.spec
    data = node.settings
    version = spec.kubernetes.version
    _containerd_advice(version)
    _node_preparation()
    if not _repository_and_packages(spec, node, data, version):
        return  # a version change on a running node: refused with the upgrade steps
    if node.is_head:
        _control_plane(spec, node)
    elif node.is_extra_control_plane:
        joined(name="Join the cluster as a control plane (kubeadm join, single-use token and "
                    "certificate key from the head)",
               head=site.host(spec.head[0].name), settings=_join_settings(spec, node, data),
               control_plane=True,
               # One at a time: each adds an etcd member, and each upload of the head's
               # certificates makes a new key (a parallel join would hold a stale one).
               _serial=True)
    else:
        head = spec.head[0]
        joined(name="Join the cluster (kubeadm join, single-use token from the head)",
               head=site.host(head.name), settings=_join_settings(spec, node, data))
    if node.is_head:
        _cluster_objects(site, spec, data)


def _containerd_advice(version: str) -> None:
    """A warning when the installed containerd is below containerd's recommendation for the
    pinned minor (gpuinfra.knowledge.kubernetes); the deploy goes on with it."""
    installed = (host.get_fact(DebPackages).get("containerd") or [None])[0]
    why = k8s.containerd_recommended(version, installed) if installed else None
    if why:
        logger.warning(f"{host.print_prefix}kubernetes: {why}; the distribution's containerd "
                       "is used as it is")


def _node_preparation() -> None:
    swap_off(name="Swap off, now and at boot (the kubelet refuses to run with swap)")
    files.put(name=f"Load {', '.join(kubeadm.KERNEL_MODULES)} at boot",
              dest=kubeadm.MODULES_FILE, src=upload_source(render_text(kubeadm.modules_file())),
              mode="644")
    modules_loaded(name=f"Load {', '.join(kubeadm.KERNEL_MODULES)} now",
                   modules=list(kubeadm.KERNEL_MODULES))
    files.put(name="Forwarding sysctls at boot", dest=kubeadm.SYSCTL_FILE,
              src=upload_source(render_text(kubeadm.sysctl_file())), mode="644")
    for key, value in kubeadm.SYSCTLS.items():
        server.sysctl(name=f"{key} = {value} now", key=key, value=int(value))


def _repository_and_packages(spec: ClusterSpec, node: NodeSpec, data: Any, version: str) -> bool:
    """The repository line, then the pinned packages; False (after moving the line) when the
    node runs another version: that is an upgrade, done in order by hand."""
    mirror = data["kubernetes_repo_mirror"]
    files.directory(name="/etc/apt/keyrings exists", path="/etc/apt/keyrings", mode="755")
    keyring = apt_keyring(name="Add the Kubernetes repository's signing key",
                          url=k8s.repository_key_url(version, mirror), path=k8s.KEYRING,
                          fingerprint=SIGNING_KEYS["kubernetes"])
    listed = files.put(name=f"List pkgs.k8s.io v{spec.kubernetes.minor} in apt sources",
                       dest=k8s.LIST_FILE,
                       src=upload_source(render_text(k8s.repository_line(version, mirror))),
                       mode="644")
    apt.update(name="Refresh apt after the Kubernetes repository changed",
               _if=any_changed(keyring, listed))
    wanted = k8s.package_version(version)
    installed = (host.get_fact(DebPackages).get("kubeadm") or [None])[0]
    if installed and installed != wanted:
        workers = [n.short_name for n in spec.workers_of("kubernetes")]
        others = [n.short_name for n in spec.control_planes[1:]]
        refuse(name=f"Stop: this node runs kubeadm {installed}, the spec says {wanted}",
               message="gpuinfra: " + kubeadm.upgrade_steps(
                   installed, version, spec.head[0].short_name, workers, others))
        return False
    pinned = PinnedPackages(dict.fromkeys(k8s.PACKAGES, wanted), dict.fromkeys(k8s.PACKAGES,
                                                                               wanted))
    install_pinned(f"Kubernetes {version} (kubeadm, kubelet, kubectl)", pinned, PIN_FILE)
    # kubeadm starts the kubelet once its configuration exists; it must start at boot.
    systemd.service(name="kubelet enabled at boot", service="kubelet", running=None,
                    enabled=True)
    return True


def _init_config(spec: ClusterSpec, node: NodeSpec) -> str:
    return kubeadm.init_config(
        node_name=node.short_name, address=node.address, version=spec.kubernetes.version,
        cluster_name=spec.name, pod_cidr=spec.kubernetes.pod_cidr,
        service_cidr=spec.kubernetes.service_cidr, endpoint=spec.kubernetes.endpoint,
        image_repository=(spec.kubernetes.image_repository
                          if spec.kubernetes.image_repository != k8s.DEFAULT_IMAGE_REPOSITORY
                          else None))


def _control_plane(spec: ClusterSpec, node: NodeSpec) -> None:
    text = _init_config(spec, node)
    control_plane(name="Initialise the control plane (kubeadm-init.yaml checked by kubeadm, "
                       "kubeadm init once)", config=text, stage=STAGE,
                  refusal=_refusal(text))


def _refusal(text: str) -> str | None:
    """Why an initialised control plane cannot take the spec: its networks or address changed
    (a different version is an upgrade: _repository_and_packages). None when it can."""
    lines = host.get_fact(FileContents, path=kubeadm.INIT_CONFIG)
    if lines is None:
        return None  # not initialised by gpuinfra (or not at all): see control_plane
    have = kubeadm.init_settings("\n".join(lines))
    want = kubeadm.init_settings(text)
    changed = [k for k in ("pod_cidr", "service_cidr", "address", "endpoint")
               if have[k] != want[k]]
    if not changed:
        return None
    return (f"gpuinfra: the cluster was initialised with "
            f"{', '.join(f'{k}={have[k]}' for k in changed)}; the spec now says "
            f"{', '.join(f'{k}={want[k]}' for k in changed)}. kubeadm cannot change these on a "
            "running cluster: restore the spec's values, or rebuild the cluster (kubeadm reset "
            "on every node, then deploy).")


def gpu_configs(spec: ClusterSpec) -> dict[str, dict[str, Any]]:
    """Each Kubernetes GPU node's device plugin config."""
    return {n.short_name: plugin_config(n, spec.mig_strategy)
            for n in spec.members("kubernetes") if n.gpus is not None}


def gpu_labels(spec: ClusterSpec, node: NodeSpec) -> dict[str, str]:
    """The labels a GPU node carries: present, which device plugin config it runs, and RDMA
    where its spec has rdma_nics (the RDMA shared device plugin's DaemonSet selects it)."""
    labels = {k8s.LABEL_GPU_PRESENT: "true",
              k8s.LABEL_DEVICE_PLUGIN_CONFIG: config_key(plugin_config(node, spec.mig_strategy))}
    if node.rdma_nics:
        labels[k8s.LABEL_RDMA] = "true"
    return labels


def taint_bound(spec: ClusterSpec, data: Any) -> health_taint.Bound:
    """The health check's circuit breaker for the taint controller: the share and window the
    site set (health_breaker_share, health_breaker_window) of its Kubernetes GPU nodes."""
    gpu_nodes = [n for n in spec.nodes if n.gpus is not None and "kubernetes" in n.schedulers]
    breaker = Breaker(float(data["health_breaker_share"]), int(data["health_breaker_window"]))
    return health_taint.Bound(breaker.most(len(gpu_nodes)), breaker.window_s)


def rdma_nodes(spec: ClusterSpec) -> list[NodeSpec]:
    """Kubernetes GPU nodes with RDMA NICs: the RDMA shared device plugin runs there."""
    return [n for n in spec.members("kubernetes") if n.gpus is not None and n.rdma_nics]


def _join_settings(spec: ClusterSpec, node: NodeSpec, data: Any) -> dict[str, Any]:
    """The JoinConfiguration's values but the token (and a control plane's certificate key):
    a GPU node registers with its labels (and taint), so its device plugin starts at once; a
    control plane with the control-plane taint, as the head has. Every node reaches the API
    at the site's endpoint when it has one (a joining node keeps that address)."""
    head = spec.head[0]
    gpu = node.gpus is not None
    taints = [GPU_TAINT] if gpu and data["kubernetes_gpu_taint"] else []
    if node.is_extra_control_plane:
        taints = [(kubeadm.CONTROL_PLANE_TAINT, "", "NoSchedule")]
    return {"node_name": node.short_name, "address": node.address,
            "api_endpoint": spec.kubernetes.endpoint or kubeadm.api_endpoint(head.address),
            "taints": taints, "labels": gpu_labels(spec, node) if gpu else {}}


def _cluster_objects(site: Site, spec: ClusterSpec, data: Any) -> None:
    """On the head, after the control plane and the joins: CNI, RuntimeClass, device plugin,
    the health check's node condition and taint, node labels. Each file is judged by the API
    server before it is written and applied."""
    objects = manifests.cni_objects(spec.kubernetes.cni, spec.kubernetes.pod_cidr)
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    configs = gpu_configs(spec)
    cluster = [o for o in objects if o["kind"] != "Namespace"] + manifests.gpu_layer(
        list(configs.values()), spec.kubernetes.device_plugin_version,
        taint=data["kubernetes_gpu_taint"],
        feature_discovery=data["kubernetes_gpu_feature_discovery"])
    rdma = bool(rdma_nodes(spec))
    if rdma:
        cluster += rdma_objects(taint=data["kubernetes_gpu_taint"])
    health = bool(configs) and data["health_enabled"] and data["health_kubernetes"]
    tainting = health and data["health_kubernetes_taint"]
    if health:
        cluster += manifests.health_objects(data["health_check_interval"])
    if tainting:
        cluster += manifests.health_taint_objects(sources(manifests.TAINT_SOURCES),
                                                  taint_bound(spec, data))
    for path, docs, what in ((NAMESPACES, namespaces, "namespaces"),
                             (CLUSTER_OBJECTS, cluster,
                              "CNI, RuntimeClass, device plugins, node health check")):
        name = path.rsplit("/", 1)[1]
        written = checked_files(
            name=f"{path} ({what}), checked by the API server",
            files={path: manifests.render(docs)}, stage=STAGE,
            check=check_script(f"{' '.join(KUBECTL)} apply --dry-run=server "
                               f"-f {STAGE}/{name}", "the Kubernetes API server",
                               STAGE))
        manifests_applied(name=f"The cluster holds {name}", path=path,
                          file_changes=written.will_change,
                          pruning=_pruning(configs, tainting, rdma) if path == CLUSTER_OBJECTS
                          else ())
    for node in spec.members("kubernetes"):
        if node.gpus is None:
            continue
        on = node.settings["kubernetes_gpu_taint"]
        # While the controller runs, the health taint is its own; without it, nothing would
        # ever take the taint off again, so the role does.
        untaints = ([] if on else [GPU_TAINT]) + ([] if tainting else [HEALTH_TAINT])
        node_labels(name=f"GPU labels and taint of {node.short_name}", node=node.short_name,
                    labels=gpu_labels(spec, node), taint=GPU_TAINT if on else None,
                    untaints=untaints)


def _pruning(configs: dict[str, dict[str, Any]], tainting: bool, rdma: bool
             ) -> list[tuple[str, str | None, str]]:
    """What 10-cluster.yaml no longer holds and the cluster may: device plugin DaemonSets of
    configs no longer used, the taint controller when it is off, the RDMA device plugin when
    no node has RDMA NICs."""
    keys = sorted({config_key(c) for c in configs.values()})
    ns = manifests.DEVICE_PLUGIN_NAMESPACE
    pruning: list[tuple[str, str | None, str]] = [
        ("daemonset", ns, "gpuinfra.io/part in (device-plugin,gpu-feature-discovery),"
                          f"gpuinfra.io/config notin ({','.join(keys)})")]
    if not rdma:
        pruning.append(("daemonset,configmap", ns, f"{manifests.PART}=rdma-device-plugin"))
    if not tainting:
        part = f"{manifests.PART}=health-taint"
        pruning += [("deployment,configmap,serviceaccount", ns, part),
                    ("clusterrolebinding,clusterrole", None, part)]
    return pruning


def applies(site: Site, node: NodeSpec) -> bool:
    """Kubernetes nodes: the control plane on the head, the workers joined."""
    return "kubernetes" in node.schedulers


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("kubernetes", kubernetes, applies, needs_head=True, reads=("health",))
apply = ROLE.apply
