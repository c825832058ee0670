"""Pure judgements of the containerd and Kubernetes checks (gpuinfra_verify/test_containerd.py,
gpuinfra_verify/test_kubernetes.py).

Nothing here connects to a host: tests/unit/test_verify_kubernetes.py shows each judgement
passing on healthy captures and failing, with its cause and fix, on broken ones (real outputs
recorded in tests/fixtures/kubectl/INDEX.md). Messages follow the suite's form: what was seen,
then cause and fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuinfra.parsers.kubectl import KubeNode, KubePod
from gpuinfra_verify.expect import problem

# ---------------------------------------------------------------------------- containerd


def containerd_problems(settings: Mapping[str, Any], sandbox_image: str) -> list[str]:
    """What is wrong with containerd's live configuration (``containerd config dump``)."""
    out = []
    if settings.get("systemd_cgroup") is not True:
        out.append(f"SystemdCgroup is {settings.get('systemd_cgroup')!r} on the runc runtime, "
                   "not true: the kubelet's systemd cgroup driver and containerd's would "
                   "disagree")
    if settings.get("sandbox_image") != sandbox_image:
        out.append(f"sandbox image {settings.get('sandbox_image')!r}, not {sandbox_image!r} "
                   "(kubeadm's pause image of the pinned release)")
    return out


def cri_plugin_status(ctr_plugins: str) -> str | None:
    """The status of the CRI plugin in ``ctr plugins ls`` (ok, error, skip), None if absent."""
    for line in ctr_plugins.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "io.containerd.grpc.v1" and fields[1] == "cri":
            return fields[-1]
    return None


# ---------------------------------------------------------------------------- nodes

def node_ready_problem(name: str, seen: KubeNode | None) -> str | None:
    if seen is None:
        return problem(name, "the cluster has no such node",
                       "the node never joined (kubeadm join failed or was not run), or it "
                       "registered under another name",
                       "deploy (kubernetes role) and read its output for the join; "
                       "`kubectl get nodes` on the head")
    if seen.ready is True:
        return None
    return problem(name, f"node not Ready ({seen.ready_reason or 'no Ready condition'})",
                   "the kubelet cannot reach the API server, or the CNI is not up on the node "
                   "(NetworkPluginNotReady), or containerd is down",
                   "`journalctl -u kubelet` on the node; `kubectl -n kube-flannel get pods "
                   "-o wide` on the head")


# ---------------------------------------------------------------------------- allocatable

def allocatable_problem(name: str, expected: Mapping[str, int],
                        seen: Mapping[str, int]) -> str | None:
    """The node's nvidia.com/* allocatable against what the spec implies (both ways)."""
    wrong = [f"{key}: expected {expected.get(key, 0)}, allocatable {seen.get(key, 0)}"
             for key in sorted(set(expected) | set(seen))
             if expected.get(key, 0) != seen.get(key, 0)]
    if not wrong:
        return None
    if not any(seen.values()):
        return problem(name, "no GPU is allocatable: " + "; ".join(wrong),
                       "the device plugin is not running on the node, or it found no GPU: "
                       "the driver is not loaded (a reboot pending after its install), or the "
                       "container toolkit / nvidia runtime is missing so the plugin cannot load "
                       "NVML",
                       "`nvidia-smi` on the node; test_driver.py and the device plugin pod's "
                       "logs (test_device_plugin_running names the cause)")
    if set(expected) != {k for k, v in seen.items() if v} and any(
            k.startswith("nvidia.com/mig-") for k in set(expected) | set(seen)):
        return problem(name, "the MIG resources differ from the spec: " + "; ".join(wrong),
                       "the GPUs' MIG layout is not the spec's (not applied yet, or changed "
                       "by hand), or the plugin's migStrategy differs",
                       "`nvidia-smi -L` on the node; apply the layout of "
                       "/etc/nvidia-mig-manager/config.yaml; check mig_strategy")
    return problem(name, "allocatable GPUs differ from the spec: " + "; ".join(wrong),
                   "the device plugin runs another config than the spec's (the node's "
                   "nvidia.com/device-plugin.config label, time-slicing replicas or MPS "
                   "clients), or a GPU is missing from the node",
                   "deploy (kubernetes role) to relabel the node and re-apply the configs; "
                   "compare `nvidia-smi -L` with gpu_count")


def product_label_problem(name: str, labels: Mapping[str, str]) -> str | None:
    """GFD marks a node whose MIG layout the single strategy cannot describe."""
    product = labels.get("nvidia.com/gpu.product", "")
    if not product.endswith("-MIG-INVALID"):
        return None
    return problem(name, f"GPU product label {product!r}",
                   "mig_strategy 'single' on a node whose GPUs hold different MIG profiles "
                   "(or some without MIG): the device plugin cannot advertise one resource",
                   "one profile on every GPU of the node, or mig_strategy = 'mixed'")


# ---------------------------------------------------------------------------- pods

# What a device plugin's log says, what it means, and what to do: (pattern, cause, fix).
PLUGIN_LOG_CAUSES: tuple[tuple[str, str, str], ...] = (
    (r"could not load NVML|libnvidia-ml\.so\.1",
     "the plugin cannot load NVML: its container does not get the driver's libraries (the "
     "nvidia runtime is not configured in containerd, or not used for it), or the driver is not "
     "installed",
     "container_toolkit role (containerd has runtimes.nvidia; RuntimeClass nvidia); "
     "`nvidia-smi` on the node"),
    (r"unresolvable CDI devices|CDI device .* not found|failed to inject CDI",
     "the CDI spec the runtime needs is missing or stale (/etc/cdi/nvidia.yaml)",
     "deploy again once the driver is loaded (container_toolkit regenerates the CDI spec)"),
    (r"More than one MIG device type present|mig-strategy=single|migStrategy=single",
     "mig_strategy 'single' on a node with several MIG profiles",
     "one profile on every GPU, or mig_strategy = 'mixed'"),
    (r"Incompatible strategy detected|No devices found|no valid resources",
     "the plugin sees no GPU it can advertise (driver not loaded, or every GPU in an "
     "unexpected MIG state)",
     "`nvidia-smi` and `nvidia-smi -L` on the node; reboot after a driver install"),
    (r"error parsing config file|unable to load config|failed to parse",
     "the plugin refused its config file", "compare the ConfigMap with the spec; deploy again"),
)


def plugin_log_cause(log: str) -> tuple[str, str] | None:
    """(cause, fix) for a device plugin's log, from the first known message in it."""
    for pattern, cause, fix in PLUGIN_LOG_CAUSES:
        if re.search(pattern, log):
            return cause, fix
    return None


def pods_on(pods: Iterable[KubePod], node: str, name_prefix: str) -> list[KubePod]:
    return [p for p in pods if p.node == node and p.name.startswith(name_prefix)]


def pod_problem(name: str, what: str, pods: Sequence[KubePod], log: str = "") -> str | None:
    """``what`` (device plugin, GPU Feature Discovery) must run, ready, on node ``name``."""
    if not pods:
        return problem(name, f"no {what} pod on the node",
                       "the node lacks the nvidia.com/device-plugin.config label its DaemonSet "
                       "selects, or a taint keeps it off",
                       "deploy (kubernetes role labels GPU nodes); "
                       "`kubectl -n kube-system get ds`")
    bad = [p for p in pods if p.phase != "Running" or not p.ready]
    if not bad:
        return None
    pod = bad[0]
    state = pod.waiting or pod.phase
    cause, fix = plugin_log_cause(log) or (
        "the pod does not start (image pull, or the plugin exits at start)",
        f"`kubectl -n {pod.namespace} describe pod {pod.name}` and its logs")
    return problem(name, f"{what} pod {pod.name} is {state} (restarts: {pod.restarts})",
                   cause, fix)


def visible_gpus(nvidia_smi_l: str) -> list[str]:
    """The GPU lines of ``nvidia-smi -L`` run in a pod (MIG device lines excluded)."""
    return [line for line in nvidia_smi_l.splitlines() if line.startswith("GPU ")]
