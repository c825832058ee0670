"""RDMA in Kubernetes pods: the RDMA shared device plugin on the GPU nodes whose spec has
``rdma_nics`` (the kubernetes role labels them :data:`k8s.LABEL_RDMA`), so a pod asking for
:data:`k8s.RDMA_RESOURCE` gets the node's /dev/infiniband devices and NCCL its InfiniBand or
RoCE transport (the smoke job asks for it: gpuinfra.jobs.smoke.indexed_job).

The plugin (Mellanox/k8s-rdma-shared-dev-plugin v1.5.3, deployment/k8s/base) reads
``config.json`` from a ConfigMap: one resource of every ConnectX function (PCI vendor 15b3,
driver mlx5_core: its "Devices Selectors", ANDed between selectors), each shared by up to
``rdmaHcaMax`` pods. It runs privileged on the host network with /dev mounted, as its own
DaemonSet does. The rendered objects are judged against the pinned Kubernetes' OpenAPI
(tests/unit/test_kubernetes_schemas.py); that the resource appears needs a real node.
"""

from __future__ import annotations

import json
from typing import Any

from gpuinfra.knowledge import kubernetes as k8s

NAME = "rdma-shared-device-plugin"
CONFIGMAP = "rdma-devices"
PART_LABEL = "gpuinfra.io/part"
NAMESPACE = "kube-system"
# NVIDIA's ConnectX (Mellanox PCI vendor) functions, under mlx5_core.
SELECTORS = {"vendors": ["15b3"], "drivers": ["mlx5_core"]}


def plugin_config() -> dict[str, Any]:
    """The plugin's config.json (README "RDMA Shared Device Plugin Configurations")."""
    return {"periodicUpdateInterval": 300,
            "configList": [{"resourceName": k8s.RDMA_RESOURCE_NAME,
                            "rdmaHcaMax": k8s.RDMA_HCA_MAX, "selectors": SELECTORS}]}


def rdma_objects(taint: bool) -> list[dict[str, Any]]:
    """The ConfigMap and the DaemonSet on :data:`k8s.LABEL_RDMA` nodes (tolerating the GPU
    taint where the site sets it)."""
    labels = {PART_LABEL: "rdma-device-plugin"}
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": CONFIGMAP, "namespace": NAMESPACE, "labels": labels},
              "data": {"config.json": json.dumps(plugin_config(), indent=2) + "\n"}}
    selector = {"app.kubernetes.io/name": NAME}
    host = [("device-plugin", "/var/lib/kubelet/device-plugins"),
            ("plugins-registry", "/var/lib/kubelet/plugins_registry"), ("devs", "/dev/")]
    pod: dict[str, Any] = {
        "hostNetwork": True,
        "priorityClassName": "system-node-critical",
        "nodeSelector": {k8s.LABEL_RDMA: "true"},
        "containers": [{
            "name": "rdma-shared-dp", "image": k8s.RDMA_PLUGIN_IMAGE,
            "imagePullPolicy": "IfNotPresent", "securityContext": {"privileged": True},
            "volumeMounts": [{"name": n, "mountPath": p} for n, p in host[:2]] + [
                {"name": "config", "mountPath": "/k8s-rdma-shared-dev-plugin"},
                {"name": "devs", "mountPath": "/dev/"}]}],
        "volumes": [{"name": n, "hostPath": {"path": p}} for n, p in host] + [
            {"name": "config", "configMap": {"name": CONFIGMAP, "items": [
                {"key": "config.json", "path": "config.json"}]}}],
    }
    if taint:
        pod["tolerations"] = [{"key": k8s.TAINT_GPU, "operator": "Exists",
                               "effect": "NoSchedule"}]
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
                 "spec": {"selector": {"matchLabels": selector},
                          "updateStrategy": {"type": "RollingUpdate"},
                          "template": {"metadata": {"labels": {**selector, **labels}},
                                       "spec": pod}}}
    return [config, daemonset]
