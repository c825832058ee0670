"""kubectl's answers, read into what the kubernetes role and the verify suite judge.

- ``kubectl get nodes -o json`` (a NodeList; one Node works too): per node its labels,
  taints, readiness and the ``nvidia.com/*`` allocatable counts (:func:`parse_nodes`);
- ``kubectl get pods -A -o json``: per pod its node, phase, readiness, restarts, the reason
  a container waits (CrashLoopBackOff...), its runtime class and whether it reaches GPUs
  (:func:`parse_pods`);
- the ``Allocatable:`` / ``Capacity:`` blocks of ``kubectl describe node`` (what people paste
  when they report a problem; :func:`parse_describe_resources`).

YAML is JSON's superset: ``kubectl get ... -o yaml`` output reads the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError

NVIDIA_PREFIX = "nvidia.com/"


@dataclass(frozen=True)
class KubeNode:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)
    ready: bool | None = None  # None: no Ready condition reported
    ready_reason: str = ""
    allocatable: dict[str, int] = field(default_factory=dict)  # nvidia.com/* only
    unschedulable: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "labels": self.labels, "taints": [list(t) for t in self.taints],
                "ready": self.ready, "ready_reason": self.ready_reason,
                "allocatable": self.allocatable, "unschedulable": self.unschedulable}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KubeNode:
        return cls(data["name"], dict(data.get("labels", {})),
                   tuple(tuple(t) for t in data.get("taints", ())), data.get("ready"),
                   data.get("ready_reason", ""), dict(data.get("allocatable", {})),
                   bool(data.get("unschedulable", False)))


@dataclass(frozen=True)
class KubePod:
    namespace: str
    name: str
    node: str
    phase: str
    ready: bool
    restarts: int
    waiting: str = ""  # the first waiting reason of a container (CrashLoopBackOff, ...)
    labels: dict[str, str] = field(default_factory=dict)
    # spec.runtimeClassName ("": none, the runtime's default handler); None: not shown.
    runtime_class: str | None = None
    # Why the pod reaches GPUs ("requests nvidia.com/gpu", "image ...k8s-device-plugin...",
    # "NVIDIA_VISIBLE_DEVICES=all"); "": it does not, as far as its spec shows.
    gpu_use: str = ""


# Images of NVIDIA's GPU pods: each needs the NVIDIA runtime to see the driver (NVML).
GPU_IMAGES = re.compile(r"k8s-device-plugin|gpu-feature-discovery|dcgm-exporter|"
                        r"/cuda(?::|$)|/cuda-sample|nvidia/driver|k8s-mig-manager")


def gpu_use(images: list[str], resources: list[str], visible: list[str]) -> str:
    """Why a pod with these containers' images, resource names (requests and limits) and
    NVIDIA_VISIBLE_DEVICES values reaches GPUs; "" when nothing shows it does."""
    for name in resources:
        if name.startswith(NVIDIA_PREFIX):
            return f"requests {name}"
    for image in images:
        if GPU_IMAGES.search(image):
            return f"image {image}"
    for value in visible:
        if value.strip().lower() not in ("", "void", "none"):
            return f"NVIDIA_VISIBLE_DEVICES={value}"
    return ""


def _load(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # YAML only when it is not JSON: the head's collector (roles/monitoring/
        # kubernetes_nodes.py) reads JSON with Python's standard library alone.
        try:
            import yaml
        except ImportError:
            raise ParseError(source, "not JSON (and PyYAML, to read YAML, is not "
                                     "installed)") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ParseError(source, f"neither JSON nor YAML: {exc}") from None
        except ValueError as exc:  # a number of thousands of digits
            raise ParseError(source, f"a value YAML cannot read: {str(exc)[:200]}") from None


def _items(data: Any, kind: str, source: str) -> list[Mapping[str, Any]]:
    if isinstance(data, Mapping) and data.get("kind") == kind:
        return [data]
    if isinstance(data, Mapping) and isinstance(data.get("items"), list):
        return [i for i in data["items"] if isinstance(i, Mapping)]
    raise ParseError(source, f"not a {kind} or a list of them")


def quantity(value: Any) -> int:
    """An extended-resource quantity as an integer ("8"; device counts are whole)."""
    text = str(value).strip()
    if not re.fullmatch(r"\d+", text):
        raise ValueError(f"not a whole count: {value!r}")
    return int(text)


def _nvidia(resources: Any, source: str) -> dict[str, int]:
    out = {}
    for key, value in (resources or {}).items():
        if str(key).startswith(NVIDIA_PREFIX):
            try:
                out[str(key)] = quantity(value)
            except ValueError as exc:
                raise ParseError(source, f"{key}: {exc}") from None
    return out


def parse_nodes(text: str) -> dict[str, KubeNode]:
    """``kubectl get nodes -o json`` -> ``{name: KubeNode}``."""
    source = "kubectl get nodes"
    nodes = {}
    for item in _items(_load(text, source), "Node", source):
        meta, spec, status = (item.get(k) or {} for k in ("metadata", "spec", "status"))
        name = meta.get("name")
        if not isinstance(name, str):
            raise ParseError(source, "a node without metadata.name")
        ready, reason = None, ""
        for condition in status.get("conditions") or []:
            if condition.get("type") == "Ready":
                ready = condition.get("status") == "True"
                reason = str(condition.get("reason") or condition.get("message") or "")
        taints = tuple((str(t.get("key", "")), str(t.get("value", "") or ""),
                        str(t.get("effect", ""))) for t in spec.get("taints") or [])
        nodes[name] = KubeNode(name, {str(k): str(v) for k, v in
                                      (meta.get("labels") or {}).items()},
                               taints, ready, reason, _nvidia(status.get("allocatable"), source),
                               bool(spec.get("unschedulable", False)))
    return nodes


def parse_pods(text: str) -> list[KubePod]:
    """``kubectl get pods -o json`` (any namespaces) -> pods."""
    source = "kubectl get pods"
    pods = []
    for item in _items(_load(text, source), "Pod", source):
        meta, spec, status = (item.get(k) or {} for k in ("metadata", "spec", "status"))
        statuses = status.get("containerStatuses") or []
        waiting = ""
        for container in statuses:
            reason = ((container.get("state") or {}).get("waiting") or {}).get("reason")
            if reason:
                waiting = str(reason)
                break
        pods.append(KubePod(
            namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
            node=str(spec.get("nodeName", "") or ""), phase=str(status.get("phase", "")),
            ready=bool(statuses) and all(c.get("ready") for c in statuses),
            restarts=sum(_count(c.get("restartCount"), source) for c in statuses),
            waiting=waiting, labels={str(k): str(v) for k, v in
                                     (meta.get("labels") or {}).items()},
            runtime_class=str(spec.get("runtimeClassName") or ""),
            gpu_use=_spec_gpu_use(spec)))
    return pods


def _count(value: Any, source: str) -> int:
    """A restart count: a whole number of at most nine digits."""
    if value is None:
        return 0
    if isinstance(value, bool) or not re.fullmatch(r"\d{1,9}", str(value)):
        raise ParseError(source, f"restartCount {str(value)[:40]!r} is not a count")
    return int(str(value))


def _spec_gpu_use(spec: Mapping[str, Any]) -> str:
    containers = [c for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
                  if isinstance(c, Mapping)]
    resources = [str(name) for c in containers for part in ("requests", "limits")
                 for name in ((c.get("resources") or {}).get(part) or {})]
    visible = [str(e.get("value", "")) for c in containers for e in c.get("env") or []
               if isinstance(e, Mapping) and e.get("name") == "NVIDIA_VISIBLE_DEVICES"]
    return gpu_use([str(c.get("image", "")) for c in containers], resources, visible)


_BLOCK = re.compile(r"^(Capacity|Allocatable):\s*$")
_ENTRY = re.compile(r"^\s+([A-Za-z0-9./_-]+):\s+(\S+)\s*$")


def parse_describe_resources(text: str) -> dict[str, dict[str, int]]:
    """The ``Capacity:`` and ``Allocatable:`` blocks of ``kubectl describe node`` ->
    ``{"Capacity": {...}, "Allocatable": {...}}`` (nvidia.com/* entries only)."""
    out: dict[str, dict[str, int]] = {}
    block: str | None = None
    for line in text.splitlines():
        match = _BLOCK.match(line.strip()) if not line.startswith(" ") else None
        if match:
            block = match[1]
            out[block] = {}
            continue
        if block and line.strip() in ("[...]", "..."):
            continue  # lines left out by whoever pasted it
        entry = _ENTRY.match(line)
        if block and entry:
            if entry[1].startswith(NVIDIA_PREFIX):
                out[block][entry[1]] = quantity(entry[2])
            continue
        if line.strip():
            block = None
    if not out:
        raise ParseError("kubectl describe node", "no Capacity or Allocatable block")
    return out
