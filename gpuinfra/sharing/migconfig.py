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

import yaml

from gpuinfra.header import HEADER
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


def mig_parted_yaml(nodes: Iterable[NodeSpec]) -> str:
    """:func:`mig_parted_config` as the file's text (YAML, keys in the documented order)."""
    return (HEADER + "# The spec's MIG layout in nvidia-mig-parted's format.\n"
            + yaml.safe_dump(mig_parted_config(nodes), sort_keys=False,
                             default_flow_style=None))


# The check the role runs on the staged file before it goes live (no mig-parted on the nodes:
# this reads the file back as mig-parted does, version and per-entry keys).
MIG_PARTED_CHECK = (
    "import sys, yaml\n"
    "c = yaml.safe_load(open(sys.argv[1]))\n"
    "assert c['version'] == 'v1', 'version must be v1'\n"
    "assert sys.argv[2] in c['mig-configs'], 'no config ' + sys.argv[2]\n"
    "for entry in c['mig-configs'][sys.argv[2]]:\n"
    "    assert set(entry) <= {'devices', 'mig-enabled', 'mig-devices', 'device-filter'}, entry\n"
    "    assert isinstance(entry['mig-enabled'], bool), entry\n"
    "    assert all(isinstance(n, int) and n > 0\n"
    "               for n in entry.get('mig-devices', {}).values()), entry\n"
)


def slurm_mig_gres(mig_devices: Sequence[Sequence[str]]) -> list[str]:
    """``Gres=`` items for the MIG devices a node really has (per GPU, the profiles
    `nvidia-smi -L` lists), in the form of gpuinfra.slurm.gres.node_gres: ``gpu:<profile>:<n>``;
    a GPU without MIG devices is not counted (a whole GPU on a MIG node is not scheduled)."""
    total: Counter[str] = Counter(p for gpu in mig_devices for p in gpu)
    return [f"gpu:{profile}:{n}" for profile, n in sorted(total.items())]
