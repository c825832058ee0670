"""The MIG layout of the spec as nvidia-mig-parted's config, and the instances it makes.

One builder for everything that needs to know what MIG devices a node will have: the role that
partitions the GPUs writes :data:`MIG_PARTED_CONFIG` from :func:`mig_parted_config` and applies
the node's :func:`config_name`; the Kubernetes side derives the device plugin's resources from
:func:`instances` (docs/hardware-reference.md 6.6, 7.1).

Format (mig-parted ``version: v1``) [migparted] [migparted-ex]::

    version: v1
    mig-configs:
      gpuinfra-lab-worker1:
        - devices: [0, 1]
          mig-enabled: true
          mig-devices: {"3g.40gb": 2}
        - devices: [2]
          mig-enabled: false
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuinfra.spec.model import NodeSpec

MIG_PARTED_CONFIG = "/etc/nvidia-mig-manager/config.yaml"
MIG_PARTED_VERSION = "v1"


def config_name(node: NodeSpec) -> str:
    """The name of ``node``'s layout in the config file (one layout per node)."""
    return f"gpuinfra-{node.short_name}"


def node_layout(layout: Sequence[Mapping[str, int]]) -> list[dict[str, Any]]:
    """One node's per-GPU layout as mig-parted entries: GPUs with the same layout share one
    entry (``devices: [i, j]``); a GPU without MIG (``{}``) gets ``mig-enabled: false``."""
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for index, gpu in enumerate(layout):
        groups.setdefault(tuple(sorted(gpu.items())), []).append(index)
    entries = []
    for key, devices in groups.items():
        if key:
            entries.append({"devices": devices, "mig-enabled": True,
                            "mig-devices": dict(key)})
        else:
            entries.append({"devices": devices, "mig-enabled": False})
    return entries


def mig_parted_config(nodes: Iterable[NodeSpec]) -> dict[str, Any]:
    """The mig-parted config holding the layout of every MIG node among ``nodes``."""
    configs = {config_name(n): node_layout(n.sharing.mig_layout) for n in nodes
               if n.sharing.mode == "mig" and n.sharing.mig_layout}
    return {"version": MIG_PARTED_VERSION, "mig-configs": configs}


def instances(layout: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """MIG instances per profile over a node's GPUs (``{"3g.40gb": 4}``); GPUs without MIG
    are counted under ``""``."""
    total: Counter[str] = Counter()
    for gpu in layout:
        if not gpu:
            total[""] += 1
        for profile, count in gpu.items():
            total[profile] += count
    return dict(total)
