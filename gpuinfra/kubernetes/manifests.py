"""The Kubernetes objects the kubernetes role applies, built from the spec as data.

Each function returns plain dicts (one per object); :func:`render` writes them as one YAML
stream. Every object is checked twice before it reaches a cluster: offline by the unit tests
against the OpenAPI schema of the pinned Kubernetes minor (kubernetes-validate, strict), and
on the control plane by the API server's own schema (``kubectl apply --dry-run=server``,
roles/kubernetes).

The GPU layer, and why this one (docs/hardware-reference.md 6.4, 6.5): the NVIDIA device plugin
(and, optionally, GPU Feature Discovery) as static manifests, not the GPU Operator. This
project's roles already own what the operator would otherwise install (driver, container
toolkit, and the MIG layout, written by the node roles into
/etc/nvidia-mig-manager/config.yaml); the operator would run with driver.enabled=false and
toolkit.enabled=false and still bring Helm, NFD, its CRDs and a controller to reconcile what is
left: two small DaemonSets. As manifests every object is schema-checked offline, and nothing
else rewrites them.

Sharing per node without the plugin's config-manager sidecar: each distinct config (whole
GPUs, time-slicing-4, mps-8, mig-mixed, ...) is one key of the ConfigMap and one DaemonSet
selecting the nodes labelled ``nvidia.com/device-plugin.config=<key>``
(gpuinfra.kubernetes.deviceplugin); MPS configs also get the plugin's MPS control daemon.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from gpuinfra.health import taint as health_taint
from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.kubernetes import kubeadm
from gpuinfra.kubernetes.deviceplugin import config_key, uses_mps

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuinfra"}
PART = "gpuinfra.io/part"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
DEVICE_PLUGIN_NAMESPACE = "kube-system"
DEVICE_PLUGIN_CONFIGMAP = "nvidia-device-plugin-configs"


def render(objects: Iterable[Mapping[str, Any]]) -> str:
    """One YAML stream, ``---`` between objects, keys in the order written."""
    return yaml.safe_dump_all(list(objects), sort_keys=False, explicit_start=True,
                              default_flow_style=False)


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**labels, **MANAGED_BY}
    return meta


def _cluster_access(name: str, namespace: str, labels: dict[str, str],
                    rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ServiceAccount ``name`` in ``namespace``, a ClusterRole of ``rules`` and the binding
    between them, all called ``name``."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": _meta(name, namespace, **labels)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": _meta(name, None, **labels), "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(name, None, **labels),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]


# ---------------------------------------------------------------------------- RuntimeClass

def runtime_class() -> dict[str, Any]:
    """RuntimeClass ``nvidia``: pods asking for it run under containerd's nvidia runtime (the
    container toolkit's ``runtimes.nvidia``, handler ``nvidia``) [dp-readme]."""
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": _meta(k8s.RUNTIME_CLASS), "handler": k8s.RUNTIME_CLASS}


# ---------------------------------------------------------------------------- Flannel

def flannel(pod_cidr: str) -> list[dict[str, Any]]:
    """Flannel (Documentation/kube-flannel.yml layout [flannel]) with ``pod_cidr`` as its
    network; images pinned in gpuinfra.knowledge.kubernetes."""
    cni = k8s.CNIS["flannel"]
    ns = "kube-flannel"
    labels = {"app": "flannel", "k8s-app": "flannel", "tier": "node"}
    cni_conf = {"name": "cbr0", "cniVersion": "0.3.1", "plugins": [
        {"type": "flannel", "delegate": {"hairpinMode": True, "isDefaultGateway": True}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}
    net_conf = {"Network": pod_cidr, "EnableNFTables": False, "Backend": {"Type": "vxlan"}}
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": _meta(ns, None, **{"k8s-app": "flannel",
                                                "pod-security.kubernetes.io/enforce":
                                                    "privileged"})}
    account, role, binding = _cluster_access("flannel", ns, {"k8s-app": "flannel"}, [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}])
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": _meta("kube-flannel-cfg", ns, **labels),
              "data": {"cni-conf.json": json.dumps(cni_conf, indent=2) + "\n",
                       "net-conf.json": json.dumps(net_conf, indent=2) + "\n"}}
    env = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
           {"name": "EVENT_QUEUE_DEPTH", "value": "5000"}]
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": _meta("kube-flannel-ds", ns, **labels),
        "spec": {
            "selector": {"matchLabels": {"app": "flannel", "k8s-app": "flannel"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": {"nodeAffinity": {_REQUIRED: {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In",
                                               "values": ["linux"]}]}]}}},
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "serviceAccountName": "flannel",
                    "tolerations": [{"effect": "NoSchedule", "operator": "Exists"}],
                    "initContainers": [
                        {"name": "install-cni-plugin", "image": cni.images["cni-plugin"],
                         "command": ["cp"], "args": ["-f", "/flannel", "/opt/cni/bin/flannel"],
                         "volumeMounts": [{"name": "cni-plugin", "mountPath": "/opt/cni/bin"}]},
                        {"name": "install-cni", "image": cni.images["flannel"],
                         "command": ["cp"],
                         "args": ["-f", "/etc/kube-flannel/cni-conf.json",
                                  "/etc/cni/net.d/10-flannel.conflist"],
                         "volumeMounts": [{"name": "cni", "mountPath": "/etc/cni/net.d"},
                                          {"name": "flannel-cfg",
                                           "mountPath": "/etc/kube-flannel/"}]}],
                    "containers": [{
                        "name": "kube-flannel", "image": cni.images["flannel"],
                        "command": ["/opt/bin/flanneld"],
                        "args": ["--ip-masq", "--kube-subnet-mgr"],
                        "env": env,
                        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                        "securityContext": {"privileged": False, "capabilities": {
                            "add": ["NET_ADMIN", "NET_RAW"]}},
                        "volumeMounts": [
                            {"name": "run", "mountPath": "/run/flannel"},
                            {"name": "flannel-cfg", "mountPath": "/etc/kube-flannel/"},
                            {"name": "xtables-lock", "mountPath": "/run/xtables.lock"}]}],
                    "volumes": [
                        {"name": "run", "hostPath": {"path": "/run/flannel"}},
                        {"name": "cni-plugin", "hostPath": {"path": "/opt/cni/bin"}},
                        {"name": "cni", "hostPath": {"path": "/etc/cni/net.d"}},
                        {"name": "flannel-cfg", "configMap": {"name": "kube-flannel-cfg"}},
                        {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock",
                                                              "type": "FileOrCreate"}}],
                }}}}
    return [namespace, account, role, binding, config, daemonset]


def cni_objects(cni: str, pod_cidr: str) -> list[dict[str, Any]]:
    if cni == "flannel":
        return flannel(pod_cidr)
    raise ValueError(f"no manifest for CNI {cni!r}")


# ---------------------------------------------------------------------------- device plugin

def _image(version: str) -> str:
    return f"{k8s.DEVICE_PLUGIN_IMAGE}:{version}"


def _config_volume(key: str) -> dict[str, Any]:
    return {"name": "config", "configMap": {"name": DEVICE_PLUGIN_CONFIGMAP,
                                            "items": [{"key": key, "path": "config.yaml"}]}}


def _gpu_node_spec(key: str, taint: bool) -> dict[str, Any]:
    """Where a GPU DaemonSet runs: nodes labelled with its config key; tolerating the GPU
    taint the role may put on GPU nodes; under the NVIDIA runtime. containerd's default stays
    runc (container_toolkit_set_default is False), and "without --set-as-default, Kubernetes
    pods need a RuntimeClass with handler: nvidia" (hardware-reference.md, NVIDIA's
    k8s-device-plugin README): under runc the plugin finds no NVML and crash-loops, and no node
    advertises nvidia.com/gpu (issue 46)."""
    spec: dict[str, Any] = {"nodeSelector": {k8s.LABEL_DEVICE_PLUGIN_CONFIG: key},
                            "priorityClassName": "system-node-critical",
                            "runtimeClassName": k8s.RUNTIME_CLASS}
    if taint:
        spec["tolerations"] = [{"key": k8s.TAINT_GPU, "operator": "Exists",
                                "effect": "NoSchedule"}]
    return spec


def _daemonset(name: str, key: str, part: str, pod: dict[str, Any]) -> dict[str, Any]:
    selector = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": _meta(name, DEVICE_PLUGIN_NAMESPACE,
                              **{PART: part, "gpuinfra.io/config": key}),
            "spec": {"selector": {"matchLabels": selector},
                     "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": {**selector, PART: part}},
                                  "spec": pod}}}


def _env(**values: str) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def device_plugin_configmap(configs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The ConfigMap holding every distinct plugin config, keyed by :func:`config_key`."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(DEVICE_PLUGIN_CONFIGMAP, DEVICE_PLUGIN_NAMESPACE,
                              **{PART: "device-plugin"}),
            "data": {key: yaml.safe_dump(dict(config), sort_keys=False)
                     for key, config in sorted(configs.items())}}


def device_plugin_daemonset(key: str, config: Mapping[str, Any], version: str,
                            taint: bool) -> dict[str, Any]:
    """The device plugin for the nodes of config ``key`` (deployments/static and the Helm
    chart's daemonset-device-plugin.yml: the kubelet's device-plugins dir, the MPS root and
    /var/run/cdi mounted; the config file from the ConfigMap)."""
    migs = config["flags"]["migStrategy"] != "none"
    # The MPS root and its shm only where the node runs MPS (its control daemon's pipes):
    # elsewhere the plugin has no business with a host folder of another node's sharing mode.
    mps = uses_mps(config)
    env = _env(CONFIG_FILE="/config/config.yaml",
               **({"MPS_ROOT": k8s.MPS_ROOT} if mps else {}),
               NVIDIA_VISIBLE_DEVICES="all", NVIDIA_DRIVER_CAPABILITIES="compute,utility")
    if migs:
        env += _env(NVIDIA_MIG_MONITOR_DEVICES="all")
    mps_mounts = [{"name": "mps-shm", "mountPath": "/dev/shm"},
                  {"name": "mps-root", "mountPath": "/mps"}] if mps else []
    mps_volumes = [{"name": "mps-root",
                    "hostPath": {"path": k8s.MPS_ROOT, "type": "DirectoryOrCreate"}},
                   {"name": "mps-shm", "hostPath": {"path": f"{k8s.MPS_ROOT}/shm"}}] if mps else []
    pod = {**_gpu_node_spec(key, taint), "containers": [{
        "name": "nvidia-device-plugin-ctr", "image": _image(version),
        "command": ["nvidia-device-plugin"], "env": env,
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [
            {"name": "kubelet-device-plugins-dir", "mountPath": "/var/lib/kubelet/device-plugins"},
            *mps_mounts,
            {"name": "cdi-root", "mountPath": "/var/run/cdi"},
            {"name": "config", "mountPath": "/config"}]}],
        "volumes": [
            {"name": "kubelet-device-plugins-dir",
             "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"}},
            *mps_volumes,
            {"name": "cdi-root", "hostPath": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}},
            _config_volume(key)]}
    return _daemonset(f"nvidia-device-plugin-{key}", key, "device-plugin", pod)


def mps_control_daemon(key: str, version: str, taint: bool) -> dict[str, Any]:
    """The plugin's MPS control daemon for an MPS config (the Helm chart's
    daemonset-mps-control-daemon.yml): privileged, the MPS root's shm mounted bidirectionally."""
    pod = {**_gpu_node_spec(key, taint),
           "initContainers": [{
               "name": "mps-control-daemon-mounts", "image": _image(version),
               "command": ["mps-control-daemon", "mount-shm"],
               "securityContext": {"privileged": True},
               "volumeMounts": [{"name": "mps-root", "mountPath": "/mps",
                                 "mountPropagation": "Bidirectional"}]}],
           "containers": [{
               "name": "mps-control-daemon-ctr", "image": _image(version),
               "command": ["mps-control-daemon"],
               "env": [{"name": "NODE_NAME",
                        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                       *_env(CONFIG_FILE="/config/config.yaml", NVIDIA_VISIBLE_DEVICES="all",
                             NVIDIA_DRIVER_CAPABILITIES="compute,utility")],
               "securityContext": {"privileged": True},
               "volumeMounts": [{"name": "mps-shm", "mountPath": "/dev/shm"},
                                {"name": "mps-root", "mountPath": "/mps"},
                                {"name": "config", "mountPath": "/config"}]}],
           "volumes": [
               {"name": "mps-root",
                "hostPath": {"path": k8s.MPS_ROOT, "type": "DirectoryOrCreate"}},
               {"name": "mps-shm", "hostPath": {"path": f"{k8s.MPS_ROOT}/shm"}},
               _config_volume(key)]}
    return _daemonset(f"nvidia-mps-control-daemon-{key}", key, "device-plugin", pod)


def gpu_feature_discovery(key: str, version: str, taint: bool) -> dict[str, Any]:
    """GPU Feature Discovery for the nodes of config ``key`` (deployments/static/
    gpu-feature-discovery-daemonset.yaml): writes its labels where NFD's local source reads
    them, so it needs Node Feature Discovery in the cluster."""
    pod = {**_gpu_node_spec(key, taint), "containers": [{
        "name": "gpu-feature-discovery", "image": _image(version),
        "command": ["/usr/bin/gpu-feature-discovery"],
        "env": _env(CONFIG_FILE="/config/config.yaml", NVIDIA_VISIBLE_DEVICES="all"),
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "output-dir", "mountPath": _FEATURES_DIR},
            {"name": "host-sys", "mountPath": "/sys"},
            {"name": "config", "mountPath": "/config"}]}],
        "volumes": [
            {"name": "output-dir", "hostPath": {"path": _FEATURES_DIR,
                                                "type": "DirectoryOrCreate"}},
            {"name": "host-sys", "hostPath": {"path": "/sys", "type": "Directory"}},
            _config_volume(key)]}
    return _daemonset(f"gpu-feature-discovery-{key}", key, "gpu-feature-discovery", pod)


def gpu_layer(configs: Sequence[Mapping[str, Any]], version: str, *, taint: bool,
              feature_discovery: bool) -> list[dict[str, Any]]:
    """RuntimeClass, the configs' ConfigMap and, per distinct config, the device plugin (and
    MPS control daemon, GFD) DaemonSets. ``configs``: every GPU node's plugin config."""
    by_key = {config_key(dict(c)): dict(c) for c in configs}
    objects: list[dict[str, Any]] = [runtime_class()]
    if not by_key:
        return objects
    objects.append(device_plugin_configmap(by_key))
    for key, config in sorted(by_key.items()):
        objects.append(device_plugin_daemonset(key, config, version, taint))
        if uses_mps(config):
            objects.append(mps_control_daemon(key, version, taint))
        if feature_discovery:
            objects.append(gpu_feature_discovery(key, version, taint))
    return objects


# ---------------------------------------------------------------------------- node health check

HEALTH_NAME = "gpuinfra-health"
HEALTH_CONFIG = "gpuinfra-health.json"
# The node condition the check drives (kubectl describe node: Conditions); the taint
# controller reads the same name (gpuinfra.health.taint).
HEALTH_CONDITION = health_taint.CONDITION
HEALTH_COMMAND = "/usr/local/sbin/gpuinfra-health"  # roles/health COMMAND
# The check runs in the host's namespaces: it needs the host's python3, nvidia-smi with the
# driver's libraries, the kernel log of this boot, ibstat and systemd (Fabric Manager), none of
# which node-problem-detector's image has; mounting each into the pod would copy the host
# half-way. nsenter (util-linux, in the image) into PID 1's namespaces needs hostPID and
# privileged.
NSENTER = ("/usr/bin/nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid",
           "--")


def health_plugin_config(interval_s: int, timeout_s: int = 60) -> dict[str, Any]:
    """node-problem-detector's custom plugin monitor running ``gpuinfra-health check`` every
    ``interval_s`` seconds: its exit status is the plugin protocol's (0 OK, 1 NonOK, 2
    Unknown: node-problem-detector pkg/custompluginmonitor/types/types.go), its one line of
    cause the condition's message. Format: docs/custom_plugin_monitor.md and
    config/custom-plugin-monitor.json of kubernetes/node-problem-detector v0.8.20; a rule's
    timeout may not exceed the global one (types/config.go Validate)."""
    return {
        "plugin": "custom",
        "pluginConfig": {"invoke_interval": f"{interval_s}s", "timeout": f"{timeout_s}s",
                         # The condition's message: the check's cause line (sinfo -R width).
                         "max_output_length": 200, "concurrency": 1},
        "source": "gpuinfra-health",
        "conditions": [{"type": HEALTH_CONDITION, "reason": "GpuinfraHealthy",
                        "message": "gpuinfra-health passes"}],
        "rules": [{"type": "permanent", "condition": HEALTH_CONDITION,
                   "reason": "GpuinfraCheckFailed", "path": NSENTER[0],
                   "args": [*NSENTER[1:], HEALTH_COMMAND, "check"],
                   "timeout": f"{timeout_s}s"}],
    }


def health_objects(interval_s: int) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole and binding (node-problem-detector reads its Node, patches
    its status and records events), the plugin config's ConfigMap, and the DaemonSet of
    node-problem-detector on the GPU nodes (label ``nvidia.com/gpu.present=true``)."""
    ns = DEVICE_PLUGIN_NAMESPACE
    labels = {PART: "health"}
    account, role, binding = _cluster_access(HEALTH_NAME, ns, labels, [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
         "verbs": ["create", "patch", "update"]}])
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": _meta(HEALTH_NAME, ns, **labels),
              "data": {HEALTH_CONFIG: json.dumps(health_plugin_config(interval_s),
                                                 indent=2) + "\n"}}
    selector = {"app.kubernetes.io/name": HEALTH_NAME}
    # Runs on every GPU node whatever its taints (the GPU taint, a cordon's): like
    # node-problem-detector's own deployment, it tolerates every NoSchedule and NoExecute.
    tolerations = [{"operator": "Exists", "effect": "NoSchedule"},
                   {"operator": "Exists", "effect": "NoExecute"}]
    pod = {
        "nodeSelector": {k8s.LABEL_GPU_PRESENT: "true"},
        "priorityClassName": "system-node-critical",
        "serviceAccountName": HEALTH_NAME,
        "hostPID": True,
        "tolerations": tolerations,
        "containers": [{
            "name": "node-problem-detector", "image": k8s.NODE_PROBLEM_DETECTOR_IMAGE,
            "command": ["/node-problem-detector", "--logtostderr",
                        f"--config.custom-plugin-monitor=/config/{HEALTH_CONFIG}"],
            "env": [{"name": "NODE_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
            "resources": {"requests": {"cpu": "10m", "memory": "80Mi"},
                          "limits": {"memory": "160Mi"}},
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}]}],
        "volumes": [{"name": "config", "configMap": {"name": HEALTH_NAME, "items": [
            {"key": HEALTH_CONFIG, "path": HEALTH_CONFIG}]}}]}
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": _meta(HEALTH_NAME, ns, **labels),
                 "spec": {"selector": {"matchLabels": selector},
                          "updateStrategy": {"type": "RollingUpdate"},
                          "template": {"metadata": {"labels": {**selector, **labels}},
                                       "spec": pod}}}
    return [account, role, binding, config, daemonset]


# ---------------------------------------------------------------------------- health taint

TAINT_NAME = "gpuinfra-health-taint"
# What the controller's pod runs, as files under /app: the rule and the loop, nothing else of
# the library (the rule module imports only the standard library: tests/unit/test_health_taint).
TAINT_SOURCES = ("gpuinfra/health/taint.py", "gpuinfra_node/taint_controller.py")
TAINT_MODULE = "gpuinfra_node.taint_controller"
TAINT_APP = "/app"


def _source_key(path: str) -> str:
    """A ConfigMap key for a source path (keys allow no ``/``)."""
    return path.replace("/", ".")


def health_taint_objects(sources: Mapping[str, str],
                         bound: health_taint.Bound | None = None) -> list[dict[str, Any]]:
    """The controller that keeps ``gpuinfra.io/unhealthy=true:NoSchedule`` on the nodes whose
    condition GpuinfraUnhealthy is True (gpuinfra.health.taint): ServiceAccount, ClusterRole
    (nodes: list, watch, patch), ClusterRoleBinding, the ConfigMap holding ``sources`` (path
    -> text, :data:`TAINT_SOURCES`), and a one-replica Deployment on the control plane.

    A node's own credentials cannot change its taints (NodeRestriction), so
    node-problem-detector on the node only sets the condition and this controller, with its
    own account, sets the taint. The pod runs the sources with the pinned Python image's
    standard library (k8s.TAINT_CONTROLLER_IMAGE, where the choice is explained); the
    template carries their digest, so changed code restarts it. ``bound``: the circuit
    breaker's (at most ``most`` GPU nodes tainted within ``window_s``), in the environment."""
    missing = [p for p in TAINT_SOURCES if p not in sources]
    if missing:
        raise ValueError(f"the taint controller needs {', '.join(missing)}")
    ns = DEVICE_PLUGIN_NAMESPACE
    labels = {PART: "health-taint"}
    # What the controller does and nothing more: it lists and watches nodes and patches their
    # spec (no get of one node, no status, no events).
    account, role, binding = _cluster_access(TAINT_NAME, ns, labels, [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch", "patch"]}])
    data = {_source_key(p): sources[p] for p in TAINT_SOURCES}
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": _meta(TAINT_NAME, ns, **labels), "data": data}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    selector = {"app.kubernetes.io/name": TAINT_NAME}
    pod = {
        "serviceAccountName": TAINT_NAME,
        "priorityClassName": "system-cluster-critical",
        # On the control plane (kubeadm labels and taints it). A control plane that is also a
        # GPU node may carry the GPU taint or this controller's own: were it kept off by the
        # taint it alone removes, nothing would ever remove it.
        "nodeSelector": {kubeadm.CONTROL_PLANE_TAINT: ""},
        "tolerations": [{"key": key, "operator": "Exists", "effect": "NoSchedule"}
                        for key in (kubeadm.CONTROL_PLANE_TAINT, health_taint.TAINT_KEY,
                                    k8s.TAINT_GPU)],
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "taint-controller", "image": k8s.TAINT_CONTROLLER_IMAGE,
            # -m from the working directory finds the sources as namespace packages; -B: the
            # file system is read-only; -E -s: no environment or user site changes the path.
            "command": ["python3", "-B", "-E", "-s", "-m", TAINT_MODULE],
            "workingDir": TAINT_APP,
            **({"env": _env(GPUINFRA_BREAKER_MOST=str(bound.most),
                            GPUINFRA_BREAKER_WINDOW=str(bound.window_s))} if bound else {}),
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                          "limits": {"memory": "128Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "code", "mountPath": TAINT_APP, "readOnly": True}]}],
        "volumes": [{"name": "code", "configMap": {"name": TAINT_NAME, "items": [
            {"key": _source_key(p), "path": p} for p in TAINT_SOURCES]}}]}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": _meta(TAINT_NAME, ns, **labels),
                  "spec": {"replicas": 1, "selector": {"matchLabels": selector},
                           # Never two controllers at once, even during a change.
                           "strategy": {"type": "Recreate"},
                           "template": {"metadata": {
                               "labels": {**selector, **labels},
                               "annotations": {"gpuinfra.io/code-sha256": digest}},
                               "spec": pod}}}
    return [account, role, binding, config, deployment]
