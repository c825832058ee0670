"""Kubernetes GPU-node judgements with their causes and fixes: the verify suite
(gpuinfra_verify/kubernetes_expect.py, on ``kubectl get -o json``) and `gpuinfra check` (on a
pasted ``kubectl describe node``, ``kubectl get pods`` table or device-plugin log) use the same
functions, so a node and its paste get the same verdict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.captures import CaptureVerdict
from gpuinfra.parsers._text import ELISION, clean_lines
from gpuinfra.parsers.kubectl import KubePod
from gpuinfra.parsers.kubectl_text import DescribedNode, PodTable
from gpuinfra.verdicts import Finding

GPU_RESOURCE = "nvidia.com/gpu"
PLUGIN_POD_PREFIXES = ("nvidia-device-plugin",)


@dataclass(frozen=True)
class Problem:
    """What was seen, its likely cause and the fix."""

    what: str
    cause: str
    fix: str


# ---------------------------------------------------------------------------- device plugin log

# What a device plugin's log says, what it means, and what to do: (pattern, cause, fix), the
# first match wins (a root cause before the messages it leads to).
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
    (r"Incompatible strategy detected|invalid device discovery strategy",
     "the plugin found neither NVML nor a Tegra system in its container: it does not run under "
     "the NVIDIA runtime (not containerd's default runtime, and no runtimeClassName nvidia), so "
     "the driver's libraries are not in it",
     "container_toolkit role (containerd's runtimes.nvidia; the plugin's DaemonSet with "
     "runtimeClassName nvidia); `nvidia-ctk runtime configure --runtime=containerd` on a node "
     "set up by hand"),
    (r"No devices found|no valid resources",
     "the plugin loaded NVML but sees no GPU it can advertise (driver not loaded, every GPU in "
     "an unexpected MIG state, or failOnInitError false hiding an NVML failure above)",
     "`nvidia-smi` and `nvidia-smi -L` on the node; reboot after a driver install"),
    (r"error parsing config file|unable to load config|failed to parse",
     "the plugin refused its config file", "compare the ConfigMap with the spec; deploy again"),
    # k8s-device-plugin's health check could not watch a GPU: NVML refused its event
    # registration (NVML_ERROR_NOT_SUPPORTED) and the plugin marked it unhealthy ("... is too old
    # to support healthchecking ... Marking it unhealthy", then in later versions "unable to
    # register events for ...; marking it as unhealthy"; the plugin's health.go). Fixed
    # upstream by NVIDIA/k8s-device-plugin#1562 (merged 2025-12-10: "we should not mark the
    # device as unhealthy, but skip the device instead").
    # (old versions spelt it "healtchecking": NVIDIA/k8s-device-plugin#33's log.)
    (r"too old to support heal\w*checking|unable to (?:register events|determine the supported "
     r"events) for \S+.*unhealthy",
     "the plugin could not watch this GPU's XIDs (NVML does not support event registration on "
     "it: a passed-through or virtual GPU, or an older one) and marked it unhealthy: "
     "allocatable drops though the GPU may work (NVIDIA/k8s-device-plugin#1562 stops this)",
     "a device plugin version with that fix (kubernetes_device_plugin_version), or "
     "DP_DISABLE_HEALTHCHECKS=xids on the plugin while the node's own health check watches "
     "the XIDs; `nvidia-smi -q` on the node to see the GPU is otherwise well"),
    # k8s-device-plugin's health check (XidCriticalError, then "'nvidia.com/gpu' device marked
    # unhealthy: GPU-..."): the GPU stays withdrawn until the plugin restarts.
    (r"XidCriticalError|device marked unhealthy|the device will go unhealthy",
     "the plugin withdrew a GPU after a critical XID: allocatable drops by one until the plugin "
     "restarts (it never marks a GPU healthy again by itself)",
     "`dmesg | grep -i xid` on the node (the XID's catalogue entry says what the GPU needs), "
     "reset the GPU or reboot, then delete the plugin pod; replace the GPU if it recurs"),
    # A crash the rules above do not name: Go's own first line of a panic.
    (r"^panic: |goroutine \d+ \[running\]",
     "the plugin crashed (a Go panic this project does not know)",
     "the panic's first line and the plugin's version: a known bug of that version (upgrade "
     "kubernetes_device_plugin_version), else report it to NVIDIA/k8s-device-plugin"),
)
# The line a healthy plugin prints once its resource is registered with the kubelet.
PLUGIN_REGISTERED = re.compile(r"Registered device plugin (?:for '[^']+' )?with Kubelet")


def plugin_log_cause(log: str) -> tuple[str, str] | None:
    """(cause, fix) for a device plugin's log, from the first known message in it."""
    for pattern, cause, fix in PLUGIN_LOG_CAUSES:
        if re.search(pattern, log):
            return cause, fix
    return None


@dataclass
class PluginLogMessage:
    """A known failure message of the log: its first line (cut to 200 characters), where it
    is, and what it means (:data:`PLUGIN_LOG_CAUSES`)."""

    line: int
    text: str
    cause: str
    fix: str


@dataclass
class PluginLog:
    """What a device plugin's log shows: its known failure messages (the first line of each,
    in :data:`PLUGIN_LOG_CAUSES` order: a root cause before what it leads to), its
    registrations with the kubelet, the lines read, and the poster's elisions."""

    messages: list[PluginLogMessage] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)
    lines: int = 0
    cuts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"messages": [{"line", "text", "cause", "fix"}], "registered": [...], "lines",
        "cuts": [...]}``."""
        return {"messages": [vars(m) for m in self.messages],
                "registered": list(self.registered), "lines": self.lines,
                "cuts": list(self.cuts)}


def parse_plugin_log(text: str) -> PluginLog:
    """A device plugin's log (``kubectl logs``, whole, grepped or elided): every other line is
    ignored (a log holds everything the plugin said), so any text reads as a log."""
    log = PluginLog()
    lines = clean_lines(text, "device plugin log")
    for pattern, cause, fix in PLUGIN_LOG_CAUSES:
        found = next(((no, line) for no, line in enumerate(lines, 1) if re.search(pattern, line)),
                     None)
        if found:
            log.messages.append(PluginLogMessage(found[0], found[1].strip()[:200], cause, fix))
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        log.lines += 1
        log.registered += [m.group(0) for m in PLUGIN_REGISTERED.finditer(line)]
        if ELISION.match(line):
            log.cuts.append(f"line {no}: {line.strip()!r}, lines left out")
    return log


def judge_plugin_log(log: PluginLog, host: str | None) -> CaptureVerdict:
    """The first known failure message is a failure with its cause; a log that registered its
    resource with no failure passes; anything else is no verdict (never a pass)."""
    verdict = CaptureVerdict("plugin-log", host, {"expect": "the plugin registers its "
                             "resources with the kubelet, with no known failure message"},
                             cuts=list(log.cuts))
    if log.messages:
        first = log.messages[0]
        verdict.findings.append(Finding("device-plugin-log", "device plugin",
                                        "no failure message", first.text, "fail", first.cause,
                                        first.fix))
    verdict.blocks = len(log.registered)
    if log.registered and not verdict.findings:
        verdict.findings.append(Finding("device-plugin-log", "device plugin",
                                        "registered with the kubelet", log.registered[-1], "ok"))
    if not verdict.findings:
        verdict.judged = False
    return verdict


# ---------------------------------------------------------------------------- allocatable

def allocatable_problem(expected: Mapping[str, int], seen: Mapping[str, int]) -> Problem | None:
    """The node's nvidia.com/* allocatable against what the spec implies (both ways)."""
    wrong = [f"{key}: expected {expected.get(key, 0)}, allocatable {seen.get(key, 0)}"
             for key in sorted(set(expected) | set(seen))
             if expected.get(key, 0) != seen.get(key, 0)]
    if not wrong:
        return None
    if not any(seen.values()):
        return Problem("no GPU is allocatable: " + "; ".join(wrong),
                       "the device plugin is not running on the node, or it found no GPU: "
                       "the driver is not loaded (a reboot pending after its install), or the "
                       "container toolkit / nvidia runtime is missing so the plugin cannot load "
                       "NVML",
                       "`nvidia-smi` on the node; test_driver.py and the device plugin pod's "
                       "logs (test_device_plugin_running names the cause)")
    if set(expected) != {k for k, v in seen.items() if v} and any(
            k.startswith("nvidia.com/mig-") for k in set(expected) | set(seen)):
        return Problem("the MIG resources differ from the spec: " + "; ".join(wrong),
                       "the GPUs' MIG layout is not the spec's (not applied yet, or changed "
                       "by hand), or the plugin's migStrategy differs",
                       "`nvidia-smi -L` on the node; apply the layout of "
                       "/etc/nvidia-mig-manager/config.yaml; check mig_strategy")
    return Problem("allocatable GPUs differ from the spec: " + "; ".join(wrong),
                   "the device plugin runs another config than the spec's (the node's "
                   "nvidia.com/device-plugin.config label, time-slicing replicas or MPS "
                   "clients), or a GPU is missing from the node",
                   "deploy (kubernetes role) to relabel the node and re-apply the configs; "
                   "compare `nvidia-smi -L` with gpu_count")


UNHEALTHY = Problem("", "the device plugin marked GPU(s) unhealthy (it withdraws a GPU after "
                    "a critical XID: capacity keeps it, allocatable drops it)",
                    "`dmesg | grep -i xid` and `nvidia-smi -q -d ECC,PAGE_RETIREMENT` on the "
                    "node; the plugin's log names the XID; reset or replace the GPU")


# A device plugin pod younger than this has likely not registered its GPUs yet (it does within
# seconds of starting: ListAndWatch after Register, k8s-device-plugin's server.go).
PLUGIN_SETTLING_S = 120


def restarted_problem(age_s: int) -> Problem:
    """Allocatable below capacity on a node whose device plugin pod is ``age_s`` seconds old."""
    return Problem("", f"the device plugin pod started {age_s}s before this capture: allocatable "
                   "stays below capacity until it registers its GPUs again (seconds); if it is "
                   "still short a minute later, the plugin marked GPU(s) unhealthy",
                   "`kubectl describe node` again after a minute; if still short: "
                   + UNHEALTHY.fix)


def product_label_problem(labels: Mapping[str, str]) -> Problem | None:
    """GFD marks a node whose MIG layout the single strategy cannot describe."""
    product = labels.get("nvidia.com/gpu.product", "")
    if not product.endswith("-MIG-INVALID"):
        return None
    return Problem(f"GPU product label {product!r}",
                   "mig_strategy 'single' on a node whose GPUs hold different MIG profiles "
                   "(or some without MIG): the device plugin cannot advertise one resource",
                   "one profile on every GPU of the node, or mig_strategy = 'mixed'")


def judge_describe_node(node: DescribedNode, expected: Mapping[str, int] | None,
                        host: str | None, expectation: dict[str, Any]) -> CaptureVerdict:
    """Allocatable against the expectation, capacity against allocatable (unhealthy GPUs),
    and the GFD product label."""
    verdict = CaptureVerdict("describe-node", host or node.name, expectation,
                             cuts=list(node.cuts))
    name = host or node.name or "node"
    if node.allocatable is None:
        verdict.cuts.append("no Allocatable section in the capture: allocatable not judged")
        short = {k: v for k, v in (node.capacity or {}).items()
                 if expected is not None and v < expected.get(k, 0)}
        if short:  # allocatable never exceeds capacity: too little capacity is a failure
            problem = allocatable_problem(expected or {}, short)
            assert problem is not None
            verdict.blocks += "Capacity" in node.complete
            verdict.findings.append(Finding(
                "k8s-allocatable", name,
                ", ".join(f"{k}={v}" for k, v in sorted((expected or {}).items())),
                problem.what.replace("allocatable", "capacity"), "fail", problem.cause,
                problem.fix))
    else:
        whole = "Allocatable" in node.complete
        verdict.blocks += whole
        if expected is not None:
            problem = allocatable_problem(expected, node.allocatable)
            exp = ", ".join(f"{k}={v}" for k, v in sorted(expected.items())) or "none"
            obs = ", ".join(f"{k}={v}" for k, v in sorted(node.allocatable.items())) or "none"
            if problem is not None and (whole or any(node.allocatable.values())):
                verdict.findings.append(Finding("k8s-allocatable", name, exp, problem.what,
                                                "fail", problem.cause, problem.fix))
            elif problem is None:
                verdict.findings.append(Finding("k8s-allocatable", name, exp, obs, "ok"))
        if node.capacity is not None:
            verdict.blocks += "Capacity" in node.complete
            for key, cap in sorted(node.capacity.items()):
                got = node.allocatable.get(key, 0)
                if cap > got and (whole or key in node.allocatable):
                    why = UNHEALTHY
                    if node.plugin_age_s is not None and node.plugin_age_s < PLUGIN_SETTLING_S:
                        why = restarted_problem(node.plugin_age_s)
                    verdict.findings.append(Finding(
                        "k8s-unhealthy", f"{name} {key}", f"allocatable = capacity ({cap})",
                        f"capacity {cap}, allocatable {got}", "fail", why.cause, why.fix))
    _allocated(node, name, verdict)
    if node.labels:
        verdict.blocks += "Labels" in node.complete
        label = product_label_problem(node.labels)
        if label is not None:
            verdict.findings.append(Finding("k8s-product-label", name, "no -MIG-INVALID",
                                            label.what, "fail", label.cause, label.fix))
    if expected is None and not verdict.findings:
        verdict.judged = False
        verdict.cuts.append("no expectation given (--expect, --gpus or the spec): "
                            "allocatable not judged")
    return verdict


def _allocated(node: DescribedNode, name: str, verdict: CaptureVerdict) -> None:
    """The "Allocated resources" rows (pods' requests) against allocatable: more requested
    than allocatable is a GPU withdrawn under running pods; all of it requested is why a new
    GPU pod stays Pending (not a fault of the node)."""
    if not node.allocated or node.allocatable is None:
        return
    for key, requested in sorted(node.allocated.items()):
        if key not in node.allocatable:
            continue
        free = node.allocatable[key]
        if requested > free:
            verdict.findings.append(Finding(
                "k8s-allocated", f"{name} {key}", f"requests <= allocatable ({free})",
                f"requests {requested}, allocatable {free}", "fail",
                "pods hold more GPUs than the node can give now: a GPU was withdrawn "
                "(unhealthy) under them, or the device plugin restarted with fewer",
                "`kubectl describe node` Events and the device plugin's log; "
                "`nvidia-smi` on the node"))
        elif requested and requested == free:
            verdict.findings.append(Finding(
                "k8s-allocated", f"{name} {key}", f"requests < allocatable ({free})",
                f"requests {requested} of {free}: every GPU is in use", "warn",
                "a new GPU pod stays Pending (Insufficient " + key + ") until one of these "
                "ends: the node's GPUs are busy, not faulty",
                "`kubectl get pods -A -o wide --field-selector spec.nodeName=<node>`"))


# ---------------------------------------------------------------------------- pods

def pod_state_problem(pod: KubePod) -> tuple[str, str] | None:
    """(cause, fix) of a pod that is not running ready, from its state alone."""
    state = pod.waiting or pod.phase
    logs = f"`kubectl -n {pod.namespace or '<namespace>'} logs {pod.name}`"
    if state.startswith("Init:"):
        return ("an init container fails or waits: the GPU Operator's device plugin and "
                "validators wait for the driver and the container toolkit to validate on the "
                "node (nvidia-operator-validator), so the driver or the toolkit is not ready",
                f"{logs} --all-containers; the nvidia-operator-validator pod's logs; "
                "`nvidia-smi` on the node")
    if state in ("ImagePullBackOff", "ErrImagePull", "InvalidImageName"):
        return ("the image cannot be pulled (name or tag wrong, registry unreachable, or no "
                "pull secret)", f"`kubectl -n {pod.namespace} describe pod {pod.name}` (Events)")
    if state in ("CreateContainerError", "RunContainerError", "CreateContainerConfigError",
                 "StartError", "ContainerCannotRun"):
        return ("the container runtime could not start it: for GPU pods the nvidia runtime "
                "(containerd's runtimes.nvidia) or its CDI spec",
                f"`kubectl -n {pod.namespace} describe pod {pod.name}`; container_toolkit role")
    if state == "Pending":
        return ("the pod is not scheduled or not started: a taint or node selector keeps it "
                "off, or its volumes/images are not ready",
                f"`kubectl -n {pod.namespace} describe pod {pod.name}` (Events)")
    if state in ("CrashLoopBackOff", "Error", "Failed") or pod.phase == "Running":
        return ("the container starts and exits (or never gets ready): its log names why",
                f"{logs} --previous, then `gpuinfra check plugin-log` on it")
    return None


GENERIC_POD = ("the pod does not start (image pull, or the plugin exits at start)",
               "`kubectl -n {ns} describe pod {name}` and its logs")


def pod_problem(what: str, pods: Sequence[KubePod], log: str = "") -> Problem | None:
    """``what`` (device plugin, GPU Feature Discovery) must run, ready, on the node."""
    if not pods:
        return Problem(f"no {what} pod on the node",
                       "the node lacks the nvidia.com/device-plugin.config label its DaemonSet "
                       "selects, or a taint keeps it off",
                       "deploy (kubernetes role labels GPU nodes); "
                       "`kubectl -n kube-system get ds`")
    bad = [p for p in pods if not _healthy(p)]
    if not bad:
        return None
    pod = bad[0]
    state = pod.waiting or pod.phase
    cause, fix = plugin_log_cause(log) or pod_state_problem(pod) or (
        GENERIC_POD[0], GENERIC_POD[1].format(ns=pod.namespace, name=pod.name))
    return Problem(f"{what} pod {pod.name} is {state} (restarts: {pod.restarts})", cause, fix)


def _healthy(pod: KubePod) -> bool:
    return (pod.phase == "Running" and pod.ready) or pod.phase == "Succeeded"


def judge_pods(table: PodTable, node: str | None, host: str | None,
               expectation: dict[str, Any]) -> CaptureVerdict:
    """Every GPU pod of the capture runs ready (or completed, for validators), and the device
    plugin has a pod (when the capture is the whole table)."""
    verdict = CaptureVerdict("gpu-pods", host, expectation, cuts=list(table.cuts))
    pods = [p for p in table.pods if not node or not p.node or p.node == node]
    if not table.header:
        verdict.cuts.append("no header line (filtered with grep?): pods not shown may exist")
    for pod in pods:
        verdict.blocks += 1
        subject = f"{pod.namespace}/{pod.name}" if pod.namespace else pod.name
        state = pod.waiting or pod.phase
        if _healthy(pod):
            verdict.findings.append(Finding("k8s-pod", subject, "Running and ready",
                                            "Completed" if pod.phase == "Succeeded" else
                                            "Running, ready", "ok"))
            continue
        problem = pod_problem("device plugin" if pod.name.startswith(PLUGIN_POD_PREFIXES)
                              else "pod", [pod])
        assert problem is not None
        verdict.findings.append(Finding("k8s-pod", subject, "Running and ready",
                                        f"{state}, {'ready' if pod.ready else 'not ready'}, "
                                        f"{pod.restarts} restarts", "fail", problem.cause,
                                        problem.fix))
    plugins = [p for p in pods if p.name.startswith(PLUGIN_POD_PREFIXES)]
    if not plugins:
        if verdict.cuts:
            verdict.cuts.append("no device plugin pod in the capture (it may be cut)")
        else:
            problem = pod_problem("device plugin", [])
            assert problem is not None
            verdict.findings.append(Finding("k8s-pod", "device plugin", "a pod running",
                                            problem.what, "fail", problem.cause, problem.fix))
    if not pods and not verdict.findings:
        verdict.judged = False
    return verdict


# ---------------------------------------------------------------------------- runtime class

NVIDIA_RUNTIME_CLASS = "nvidia"


def runtime_problem(pod: KubePod, nvidia_default: bool = False) -> Problem | None:
    """A pod that reaches GPUs and runs under a runtime that gives it none: no runtime class
    (containerd's default, runc, unless the site made nvidia the default) or another class.
    None when it is fine, or when the pod reaches no GPU or its runtime class is not shown."""
    if not pod.gpu_use or pod.runtime_class is None:
        return None
    if pod.runtime_class == NVIDIA_RUNTIME_CLASS or (not pod.runtime_class and nvidia_default):
        return None
    crashing = pod.waiting in ("CrashLoopBackOff", "Error") or pod.restarts > 0
    seen = " (it crash-loops: the plugin finds no NVML there)" if crashing else ""
    if not pod.runtime_class:
        return Problem(f"pod {pod.name} ({pod.gpu_use}) runs under runc, containerd's default "
                       f"runtime, with no runtimeClassName{seen}",
                       "runc does not give a container the driver's libraries or devices: "
                       "the NVIDIA runtime (the container toolkit's handler 'nvidia') does",
                       "runs under runc: set runtimeClassName nvidia on the pod (its "
                       "DaemonSet or Job; the kubernetes role renders them so) or make "
                       "nvidia containerd's default (container_toolkit_set_default = True)")
    return Problem(f"pod {pod.name} ({pod.gpu_use}) runs under runtime class "
                   f"{pod.runtime_class!r}{seen}",
                   f"only RuntimeClass '{NVIDIA_RUNTIME_CLASS}' (handler nvidia) gives the "
                   "container the driver; another class does not unless its handler is nvidia",
                   f"set runtimeClassName {NVIDIA_RUNTIME_CLASS}, or check `kubectl get "
                   f"runtimeclass {pod.runtime_class} -o yaml` names handler nvidia")


def judge_pod_runtime(pods: Sequence[KubePod], cuts: Sequence[str], host: str | None,
                      nvidia_default: bool = False) -> CaptureVerdict:
    """Every pod of the capture that reaches GPUs runs under the NVIDIA runtime (its
    runtimeClassName, or containerd's default when the site made it nvidia)."""
    expectation = {"runtime": f"runtimeClassName {NVIDIA_RUNTIME_CLASS} on every GPU pod"
                   + (" (or none: nvidia is containerd's default)" if nvidia_default else "")}
    verdict = CaptureVerdict("pod-runtime", host, expectation, cuts=list(cuts))
    for pod in pods:
        if not pod.gpu_use or pod.runtime_class is None:
            continue
        verdict.blocks += 1
        subject = f"{pod.namespace}/{pod.name}" if pod.namespace else pod.name
        problem = runtime_problem(pod, nvidia_default)
        shown = pod.runtime_class or "none (containerd's default)"
        verdict.findings.append(Finding(
            "k8s-runtime", subject, expectation["runtime"],
            problem.what if problem else f"runtimeClassName {shown}",
            "fail" if problem else "ok", problem.cause if problem else "",
            problem.fix if problem else ""))
    if not verdict.blocks:
        verdict.judged = False
    return verdict
