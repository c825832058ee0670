"""Kubernetes on a site whose schedulers include "kubernetes", judged from the control plane
and each node (real clusters: the lab has no kubelet, see docs/roles.md "Kubernetes").

Per node: Ready; containerd's sandbox image is the one kubeadm uses (`kubeadm config images
list`). Per GPU node: the device plugin pod (and GPU Feature Discovery's, when on) running and
ready, a crash-looping plugin named with the cause its log shows (NVML not loadable: runtime or
driver; CDI spec missing; single MIG strategy on a mixed layout); allocatable nvidia.com/gpu
(or nvidia.com/mig-<profile>) equal to what the spec implies (count x replicas for
time-slicing and MPS, per-profile instances for MIG mixed, all instances for MIG single); no
``-MIG-INVALID`` product label; a pod asking for one GPU with runtimeClassName nvidia sees
exactly one GPU in `nvidia-smi -L`. The judgements are gpuinfra_verify/kubernetes_expect.py, proven
on recorded real outputs in tests/unit/test_verify_kubernetes.py.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable

import pytest
from testinfra.host import Host

from gpuinfra.containers.containerd import live_settings
from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.kubernetes.deviceplugin import GPU_RESOURCE, expected_resources
from gpuinfra.kubernetes.kubeadm import ADMIN_CONF
from gpuinfra.parsers.kubectl import KubeNode, KubePod, parse_nodes, parse_pods
from gpuinfra.spec import NodeSpec
from gpuinfra_verify.expect import SiteUnderTest, problem
from gpuinfra_verify.failure import fail
from gpuinfra_verify.kubernetes_expect import (
    allocatable_problem,
    node_ready_problem,
    pod_problem,
    pods_on,
    product_label_problem,
    runtime_problems,
    visible_gpus,
)

VERIFY_SCHEDULER = "kubernetes"
Note = Callable[[str, object], None]
KUBECTL = f"kubectl --kubeconfig {ADMIN_CONF}"
POD_TIMEOUT = 180


@pytest.fixture(scope="session")
def kubernetes_site(site: SiteUnderTest) -> None:
    if "kubernetes" not in site.spec.schedulers:
        pytest.skip("schedulers has no 'kubernetes'")


pytestmark = pytest.mark.usefixtures("kubernetes_site")


def _json(controller: Host, what: str) -> str:
    result = controller.run(f"{KUBECTL} get {what} -o json")
    if result.rc != 0:
        pytest.fail(problem("control plane", f"kubectl get {what} failed: "
                                             f"{result.stderr.strip()}",
                            "the API server is down or admin.conf is missing",
                            "`systemctl status kubelet` and `crictl ps` on the head"),
                    pytrace=False)
    return result.stdout


@pytest.fixture(scope="session")
def kube_nodes(controller: Host) -> dict[str, KubeNode]:
    return parse_nodes(_json(controller, "nodes"))


@pytest.fixture(scope="session")
def kube_pods(controller: Host) -> list[KubePod]:
    return parse_pods(_json(controller, "pods -A"))


def _gpu(node: NodeSpec) -> None:
    if node.gpus is None:
        pytest.skip("no GPUs in this node's spec")


def test_node_ready(node: NodeSpec, kube_nodes, note: Note) -> None:
    seen = kube_nodes.get(node.short_name)
    note("k8s_ready", seen.ready if seen else "absent")
    message = node_ready_problem(node.short_name, seen)
    if message:
        fail(note, message)


def test_sandbox_image_is_kubeadms(host: Host, node: NodeSpec, site: SiteUnderTest,
                                   note: Note) -> None:
    version = site.spec.kubernetes.version
    images = host.run(f"kubeadm config images list --kubernetes-version v{version} "
                      f"--image-repository {shlex.quote(site.spec.kubernetes.image_repository)}")
    pause = [line.strip() for line in images.stdout.splitlines() if "/pause:" in line]
    if images.rc != 0 or not pause:
        pytest.skip(f"kubeadm config images list gave no pause image: {images.stderr.strip()}")
    sandbox = live_settings(host.run("containerd config dump").stdout)["sandbox_image"]
    if sandbox != pause[0]:
        fail(note, problem(node.name, f"containerd's sandbox image {sandbox!r}, kubeadm's "
                                      f"{pause[0]!r}",
                           "gpuinfra's table of pause images per release is wrong for this "
                           "version, or config.toml was edited",
                           "report it (gpuinfra/knowledge/kubernetes.py RELEASES); meanwhile "
                           "kubelet pulls kubeadm's image itself"))


def _plugin(node: NodeSpec, kube_pods, controller: Host, note: Note, prefix: str,
            what: str) -> None:
    pods = pods_on(kube_pods, node.short_name, prefix)
    bad = [p for p in pods if p.phase != "Running" or not p.ready]
    log = ""
    if bad:
        log = controller.run(f"{KUBECTL} -n {bad[0].namespace} logs --tail=100 "
                             f"{shlex.quote(bad[0].name)}").stdout
    message = pod_problem(node.short_name, what, pods, log)
    if message:
        fail(note, message)


def test_device_plugin_running(node: NodeSpec, kube_pods, controller: Host, note: Note) -> None:
    _gpu(node)
    _plugin(node, kube_pods, controller, note, "nvidia-device-plugin-", "device plugin")


def test_gpu_pods_run_under_the_nvidia_runtime(node: NodeSpec, kube_pods, note: Note) -> None:
    """Every pod on the node that reaches GPUs (the device plugin, GFD, DCGM exporter, jobs)
    runs with runtimeClassName nvidia, or without one where nvidia is containerd's default."""
    _gpu(node)
    default = bool(node.settings.get("container_toolkit_set_default"))
    found = runtime_problems(node.short_name, kube_pods, default)
    note("k8s_runc_gpu_pods", len(found))
    if found:
        fail(note, "\n".join(found))


def test_gpu_feature_discovery_running(node: NodeSpec, kube_pods, controller: Host,
                                       note: Note) -> None:
    _gpu(node)
    if not node.settings["kubernetes_gpu_feature_discovery"]:
        pytest.skip("kubernetes_gpu_feature_discovery is False")
    _plugin(node, kube_pods, controller, note, "gpu-feature-discovery-",
            "GPU Feature Discovery")


def test_allocatable_matches_spec(node: NodeSpec, site: SiteUnderTest, kube_nodes,
                                  note: Note) -> None:
    _gpu(node)
    seen = kube_nodes.get(node.short_name)
    if seen is None:
        pytest.skip("not in the cluster (see test_node_ready)")
    expected = expected_resources(node, site.spec.mig_strategy)
    note("allocatable", json.dumps(seen.allocatable, sort_keys=True))
    message = allocatable_problem(node.short_name, expected, seen.allocatable)
    if message:
        fail(note, message)


def test_no_mig_invalid_label(node: NodeSpec, kube_nodes, note: Note) -> None:
    _gpu(node)
    seen = kube_nodes.get(node.short_name)
    if seen is None or "nvidia.com/gpu.product" not in seen.labels:
        pytest.skip("no nvidia.com/gpu.product label (GPU Feature Discovery off)")
    message = product_label_problem(node.short_name, seen.labels)
    if message:
        fail(note, message)


def test_one_gpu_pod_sees_one_gpu(node: NodeSpec, site: SiteUnderTest, controller: Host,
                                  note: Note) -> None:
    _gpu(node)
    expected = expected_resources(node, site.spec.mig_strategy)
    resource = GPU_RESOURCE if GPU_RESOURCE in expected else sorted(expected)[0]
    name = re.sub(r"[^a-z0-9-]", "-", f"gpuinfra-probe-{node.short_name}".lower())[:63]
    pod = {"apiVersion": "v1", "spec": {
        "runtimeClassName": k8s.RUNTIME_CLASS, "nodeName": node.short_name,
        "restartPolicy": "Never",
        "tolerations": [{"key": k8s.TAINT_GPU, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "probe", "image": node.settings["kubernetes_verify_image"],
                        "command": ["nvidia-smi", "-L"],
                        "resources": {"limits": {resource: 1}}}]}}
    run = controller.run(
        f"timeout {POD_TIMEOUT} {KUBECTL} run {name} --rm -i --restart=Never --quiet "
        f"--image={shlex.quote(node.settings['kubernetes_verify_image'])} "
        f"--overrides={shlex.quote(json.dumps(pod))} --pod-running-timeout={POD_TIMEOUT}s")
    gpus = visible_gpus(run.stdout)
    note("pod_gpus", len(gpus))
    if run.rc != 0 or len(gpus) != 1:
        fail(note, problem(node.short_name, f"a pod given one {resource} saw {len(gpus)} GPU(s) "
                                            f"(exit {run.rc}): "
                                            f"{(run.stderr or run.stdout).strip()[:300]}",
                           "the pod did not run under the nvidia runtime (RuntimeClass nvidia, "
                           "containerd's runtimes.nvidia), the image cannot be pulled, or the "
                           "runtime exposes every GPU (NVIDIA_VISIBLE_DEVICES ignored)",
                           "`kubectl describe pod` while it runs; test_container_runtime; "
                           "kubernetes_verify_image reachable from the node"))
