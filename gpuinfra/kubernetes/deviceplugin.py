"""The NVIDIA device plugin's config per node, and the resources a node must then advertise.

Config file format ``version: v1`` (api/config/v1 of k8s-device-plugin; docs/hardware-reference.md
6.5) [dp-readme] [dp-sharing] [dp-replicas]::

    version: v1
    flags: {migStrategy: none|single|mixed, failOnInitError: true}
    sharing:
      timeSlicing:            # or mps: (same shape; one of them)
        resources: [{name: nvidia.com/gpu, replicas: 4}]

A node's config follows its ``gpu_sharing``: time-slicing ``replicas``; MPS ``clients`` as the
replicas (the plugin's MPS control daemon gives each replica 1/replicas of memory and SMs);
MIG with the site's ``mig_strategy``; otherwise whole GPUs. Nodes with the same config share
one key of the ConfigMap (:func:`config_key`), which their label
``nvidia.com/device-plugin.config`` names.

What the node then advertises (:func:`expected_resources`, docs/hardware-reference.md 6.6):
whole GPUs ``nvidia.com/gpu: count``; time-slicing/MPS ``count x replicas``; MIG single
``nvidia.com/gpu: instances``; MIG mixed ``nvidia.com/mig-<profile>: instances`` per profile,
each ``+`` of the profile name written ``.`` (``1g.10gb+me`` -> ``nvidia.com/mig-1g.10gb.me``;
:func:`mig_resource`), and ``nvidia.com/gpu`` for GPUs left without MIG.
"""

from __future__ import annotations

from typing import Any

from gpuinfra.sharing.migconfig import instances
from gpuinfra.spec.model import NodeSpec

CONFIG_VERSION = "v1"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def mig_resource(profile: str) -> str:
    """The resource the device plugin advertises for MIG ``profile`` under the mixed strategy.

    The plugin names it ``strings.ReplaceAll("mig-"+profile, "+", ".")``: a ``+`` is not valid
    in a Kubernetes resource name (NVIDIA/k8s-device-plugin v0.17.1 and HEAD 1b826acc6,
    ``internal/rm/rm.go`` line 132 and ``internal/resource/nvml-mig-device.go`` line 103; knowledge
    audit 9735030 row 81). So ``1g.10gb+me`` -> ``nvidia.com/mig-1g.10gb.me``, RTX PRO 6000
    ``1g.24gb+gfx`` -> ``nvidia.com/mig-1g.24gb.gfx``."""
    return "nvidia.com/" + ("mig-" + profile).replace("+", ".")


def mig_strategy(node: NodeSpec, site_strategy: str) -> str:
    """The device plugin's ``migStrategy`` for ``node``: the site's on MIG nodes, else none."""
    return site_strategy if node.sharing.mode == "mig" else "none"


def plugin_config(node: NodeSpec, site_strategy: str) -> dict[str, Any]:
    """The device plugin config for ``node`` (a GPU node)."""
    config: dict[str, Any] = {
        "version": CONFIG_VERSION,
        "flags": {"migStrategy": mig_strategy(node, site_strategy), "failOnInitError": True},
    }
    sharing = node.sharing
    if sharing.mode == "time-slicing":
        # failRequestsGreaterThanOne (NVIDIA k8s-device-plugin README, "Shared Access to GPUs"):
        # a request for more than one replica fails admission, since replicas of one GPU give
        # no more compute than one; the site may turn it off per node.
        config["sharing"] = {"timeSlicing": {
            "failRequestsGreaterThanOne": sharing.fail_requests_greater_than_one,
            "resources": [{"name": GPU_RESOURCE, "replicas": sharing.replicas}]}}
    elif sharing.mode == "mps":
        config["sharing"] = {"mps": {"resources": [
            {"name": GPU_RESOURCE, "replicas": sharing.mps_clients}]}}
    return config


def config_key(config: dict[str, Any]) -> str:
    """A stable, readable name for ``config`` (a label value): ``whole-gpus``,
    ``time-slicing-4`` (``time-slicing-4-any`` where requests for several replicas are
    admitted), ``mps-8``, ``mig-single``, ``mig-mixed``."""
    strategy = config["flags"]["migStrategy"]
    sharing = config.get("sharing", {})
    if "timeSlicing" in sharing:
        loose = "" if sharing["timeSlicing"].get("failRequestsGreaterThanOne", True) \
            else "-any"  # requests for several replicas admitted
        return f"time-slicing-{sharing['timeSlicing']['resources'][0]['replicas']}{loose}"
    if "mps" in sharing:
        return f"mps-{sharing['mps']['resources'][0]['replicas']}"
    return f"mig-{strategy}" if strategy != "none" else "whole-gpus"


def uses_mps(config: dict[str, Any]) -> bool:
    return "mps" in config.get("sharing", {})


def expected_resources(node: NodeSpec, site_strategy: str) -> dict[str, int]:
    """``{resource: count}`` the node's allocatable must show (nvidia.com/* only)."""
    if node.gpus is None:
        return {}
    sharing = node.sharing
    count = node.gpus.count
    if sharing.mode == "time-slicing":
        return {GPU_RESOURCE: count * (sharing.replicas or 1)}
    if sharing.mode == "mps":
        return {GPU_RESOURCE: count * (sharing.mps_clients or 1)}
    if sharing.mode != "mig" or not sharing.mig_layout:
        return {GPU_RESOURCE: count}
    per_profile = instances(sharing.mig_layout)
    whole = per_profile.pop("", 0)
    if site_strategy == "single":
        # One profile on every GPU (the spec gate refuses anything else under 'single').
        return {GPU_RESOURCE: sum(per_profile.values()) + whole}
    out = {mig_resource(profile): n for profile, n in sorted(per_profile.items())}
    if whole:
        out[GPU_RESOURCE] = whole
    return out
