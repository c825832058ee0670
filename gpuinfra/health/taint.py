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

This module runs alone in the controller's pod (next to gpuinfra_node/taint_controller.py,
nothing else of the library is shipped there): Python's standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
