"""The taint that follows the health check's node condition on Kubernetes, as one rule.

node-problem-detector sets the node condition ``GpuinfraUnhealthy`` from the check
(gpuinfra.kubernetes.manifests.health_objects); a node cannot taint itself (NodeRestriction), so a
small
controller on the control plane (gpuinfra_node.taint_controller, deployed by
gpuinfra.kubernetes.manifests.health_taint_objects) applies this rule to every node it sees:

- condition ``True``: the node carries ``gpuinfra.io/unhealthy=true:NoSchedule``;
- condition ``False``: that taint is removed, and nothing else;
- condition ``Unknown`` (the check could not judge) or absent (no node-problem-detector on the
  node, or not yet): the taints stay as they are.

The taint's value is fixed: taint values follow the label-value syntax (63 characters of
``[A-Za-z0-9_.-]``), too narrow for a cause, which stays in the condition's message. The
taint is known by its key and effect (as ``kubectl taint`` knows it): a taint with any other
key or effect, an operator's, is kept as it is.

The taints are bounded by the health check's circuit breaker (gpuinfra.health.breaker, the
same share and window the site sets for Slurm's drains): :func:`bounded_patch` taints a node
only while fewer than ``Bound.most`` GPU nodes carry the taint or were tainted within the
window (annotation ``gpuinfra.io/tainted-at``, kept after the taint is gone: the window's
memory); past that the node is held untainted and annotated ``gpuinfra.io/breaker-tripped``,
after which no node is tainted until a person removes that annotation (``gpuinfra health
reset-breaker``). One controller applies the rule to one node at a time, so no two taints race.

This module runs alone in the controller's pod (next to gpuinfra_node/taint_controller.py,
nothing else of the library is shipped there): Python's standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONDITION = "GpuinfraUnhealthy"
TAINT_KEY = "gpuinfra.io/unhealthy"
TAINT_VALUE = "true"
TAINT_EFFECT = "NoSchedule"
TAINT = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": TAINT_EFFECT}


def condition_status(conditions: Sequence[Mapping[str, Any]] | None) -> str | None:
    """``status`` of the ``GpuinfraUnhealthy`` condition (``"True"``, ``"False"``,
    ``"Unknown"``), or None when the node has none."""
    for condition in conditions or ():
        if condition.get("type") == CONDITION:
            return str(condition.get("status"))
    return None


def _ours(taint: Mapping[str, Any]) -> bool:
    return taint.get("key") == TAINT_KEY and taint.get("effect") == TAINT_EFFECT


def wanted_taints(status: str | None, taints: Sequence[Mapping[str, Any]] | None
                  ) -> list[dict[str, Any]] | None:
    """The node's taints as the condition ``status`` wants them, or None when they already are
    (or when the status says nothing: Unknown, absent). Every other taint is kept, in order."""
    ours = [t for t in taints or () if _ours(t)]
    others = [dict(t) for t in taints or () if not _ours(t)]
    if status == "True":
        if len(ours) == 1 and ours[0].get("value") == TAINT_VALUE:
            return None
        return [*others, dict(TAINT)]
    if status == "False" and ours:
        return others
    return None


def node_patch(node: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The JSON patch (RFC 6902) that brings Node object ``node`` (as the API returns it) to
    the rule, or None when nothing is to change.

    The patch first tests the node's resourceVersion: when the node changed since it was read
    (an operator tainted it meanwhile), the API server refuses the whole patch and nothing
    the operator did is overwritten; the controller reads the node again and decides anew."""
    spec = node.get("spec") or {}
    status = condition_status((node.get("status") or {}).get("conditions"))
    taints = wanted_taints(status, spec.get("taints"))
    if taints is None:
        return None
    version = (node.get("metadata") or {}).get("resourceVersion")
    # "add" sets /spec/taints whether or not the node has the field (RFC 6902 4.1).
    change = {"op": "add", "path": "/spec/taints", "value": taints}
    if version is None:
        return [change]
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, change]


TAINTED_AT = "gpuinfra.io/tainted-at"  # when the controller tainted the node (epoch seconds)
TRIPPED = "gpuinfra.io/breaker-tripped"  # on the node the breaker held: "<epoch>: why"


@dataclass(frozen=True)
class Bound:
    """At most ``most`` GPU nodes tainted within ``window_s`` seconds."""

    most: int
    window_s: int


def _annotations(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return (node.get("metadata") or {}).get("annotations") or {}


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def tainted_within(node: Mapping[str, Any], now: float, window_s: int) -> bool:
    """The node carries the taint, or the controller tainted it within the window."""
    if any(_ours(t) for t in (node.get("spec") or {}).get("taints") or ()):
        return True
    try:
        return now - float(_annotations(node).get(TAINTED_AT, "")) <= window_s
    except ValueError:
        return False


def tripped(nodes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The node holding the trip, when the breaker is tripped."""
    return next((n for n in nodes if TRIPPED in _annotations(n)), None)


def _annotate(node: Mapping[str, Any], key: str, value: str) -> dict[str, Any]:
    """A JSON patch operation setting one annotation (RFC 6901: "/" in a key is "~1")."""
    if not _annotations(node):
        return {"op": "add", "path": "/metadata/annotations", "value": {key: value}}
    return {"op": "add", "path": "/metadata/annotations/" + key.replace("~", "~0").replace(
        "/", "~1"), "value": value}


def bounded_patch(node: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]], bound: Bound,
                  now: float) -> tuple[list[dict[str, Any]] | None, str]:
    """:func:`node_patch` within the breaker: the patch (None: nothing to change) and, when
    the breaker held the taint, why (for the controller's log). ``nodes``: every node the
    controller knows (the taint only counts on other nodes)."""
    ops = node_patch(node)
    status = condition_status((node.get("status") or {}).get("conditions"))
    adds = ops is not None and status == "True"
    if not adds:
        return ops, ""
    assert ops is not None
    others = [n for n in nodes if _name(n) != _name(node)]
    held = tripped(others) or (node if TRIPPED in _annotations(node) else None)
    if held is not None:
        return None, (f"the breaker is tripped ({_name(held)}: {_annotations(held)[TRIPPED]}): "
                      "no taint until a person resets it (gpuinfra health reset-breaker)")
    taken = sorted(_name(n) for n in others if tainted_within(n, now, bound.window_s))
    if len(taken) + 1 > bound.most:
        why = (f"{len(taken)} GPU nodes tainted within {bound.window_s} s "
               f"({', '.join(taken[:5])}{', ...' if len(taken) > 5 else ''}), the most allowed "
               f"is {bound.most}; {_name(node)} held untainted")
        return ops[:-1] + [_annotate(node, TRIPPED, f"{int(now)}: {why}")], \
            f"the breaker trips: {why}"
    return ops + [_annotate(node, TAINTED_AT, str(int(now)))], ""
