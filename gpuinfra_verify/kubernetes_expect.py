"""Pure judgements of the containerd and Kubernetes checks (gpuinfra_verify/test_containerd.py,
gpuinfra_verify/test_kubernetes.py).

Nothing here connects to a host: tests/unit/test_verify_kubernetes.py shows each judgement
passing on healthy captures and failing, with its cause and fix, on broken ones (real outputs
recorded in tests/fixtures/kubectl/INDEX.md). Messages follow the suite's form: what was seen,
then cause and fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuinfra.captures import kubernetes as judge
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
# The judgements are the library's (gpuinfra/captures/kubernetes.py), shared with `gpuinfra
# check` on pasted captures; here they read in the suite's form, node first.

def _message(name: str, found: judge.Problem | None) -> str | None:
    return problem(name, found.what, found.cause, found.fix) if found else None


def allocatable_problem(name: str, expected: Mapping[str, int],
                        seen: Mapping[str, int]) -> str | None:
    """The node's nvidia.com/* allocatable against what the spec implies (both ways)."""
    return _message(name, judge.allocatable_problem(expected, seen))


def product_label_problem(name: str, labels: Mapping[str, str]) -> str | None:
    """GFD marks a node whose MIG layout the single strategy cannot describe."""
    return _message(name, judge.product_label_problem(labels))


# ---------------------------------------------------------------------------- pods

PLUGIN_LOG_CAUSES = judge.PLUGIN_LOG_CAUSES
plugin_log_cause = judge.plugin_log_cause


def pods_on(pods: Iterable[KubePod], node: str, name_prefix: str) -> list[KubePod]:
    return [p for p in pods if p.node == node and p.name.startswith(name_prefix)]


def pod_problem(name: str, what: str, pods: Sequence[KubePod], log: str = "") -> str | None:
    """``what`` (device plugin, GPU Feature Discovery) must run, ready, on node ``name``."""
    return _message(name, judge.pod_problem(what, pods, log))


def runtime_problems(name: str, pods: Iterable[KubePod], nvidia_default: bool) -> list[str]:
    """Every pod on node ``name`` that reaches GPUs and runs under a runtime that gives it
    none (the judgement `gpuinfra check pod-runtime` makes of a pasted pod)."""
    found = (judge.runtime_problem(p, nvidia_default) for p in pods if p.node == name)
    return [m for m in (_message(name, f) for f in found) if m]


def visible_gpus(nvidia_smi_l: str) -> list[str]:
    """The GPU lines of ``nvidia-smi -L`` run in a pod (MIG device lines excluded)."""
    return [line for line in nvidia_smi_l.splitlines() if line.startswith("GPU ")]
