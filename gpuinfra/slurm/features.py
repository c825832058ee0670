"""Each Slurm node's ``Features`` and ``Weight`` (issue 45, item 2), from the spec.

slurm.conf(5) of Slurm 22.05.8 (Debian 12's slurm-wlm-doc; the same text in 21.08, 23.11 and
24.11): "Features: A comma-delimited list of arbitrary strings indicative of some
characteristic associated with the node ... Features are intended to be used to filter nodes
eligible to run jobs via the --constraint argument"; "Weight: The priority of the node for
scheduling purposes. All things being equal, jobs will be allocated the nodes with the lowest
weight which satisfies their requirements ... larger weights should be assigned to nodes with
more processors, memory ... The default value is 1."

What the role gives every node, so that users can ask ``sbatch -C h100`` or ``-C 'ib&nvswitch'``:
- the GPU model's family (``h100``, ``a100``, ``l40s``, ``rtx-4090``) and its exact model
  (``h100-sxm5-80gb``, the GRES type's default), and the GPU count (``gpus8``);
- how its GPUs are joined: ``nvswitch`` (an NVSwitch board), ``nvlink`` (bridges or direct
  links), ``nvlink-domain`` (a rack-scale NVLink domain, GB200 NVL72);
- its RDMA fabric: ``infiniband`` and/or ``roce``;
- the site's own (``slurm_node_features``, per host or group).

Weight, unless the site gives one (``slurm_node_weight``): 1 + the node's GPU memory in GB
(8x H100 80 GB: 641; 4x L40S 48 GB: 193; a node without GPUs: 1), so the scheduler fills the
nodes with less GPU memory first and keeps the big boards for the jobs that ask for them.
"""

from __future__ import annotations

from gpuinfra.spec.model import NodeSpec
from gpuinfra.spec.rules import integer, list_of, optional, text

# A feature as Slurm reads one in slurm.conf and in --constraint: no ',' (the list), '&', '|',
# '*', '[', ']' or '!' (constraint operators), no spaces.
FEATURE = text(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", "a feature: letters, digits, '.', '_' or "
               "'-' (no commas, spaces or the constraint operators & | * [ ] !), at most 64 "
               "characters", "a node feature")
FEATURES = list_of(FEATURE, "a list of features, e.g. ['bigmem', 'rack12']")
WEIGHT_MAX = 2**31 - 1
WEIGHT = optional(integer(1, WEIGHT_MAX))


def gpu_family(model_key: str) -> str:
    """``H100-SXM5-80GB`` -> ``h100``; an RTX model keeps its number (``rtx-4090``)."""
    parts = model_key.lower().split("-")
    return "-".join(parts[:2]) if parts[0] == "rtx" and len(parts) > 1 else parts[0]


def auto_features(node: NodeSpec) -> tuple[str, ...]:
    """What the spec says of the node, as features (see the module's text)."""
    out: list[str] = []
    if node.gpus is not None:
        key = node.gpus.model.key
        out += [gpu_family(key), key.lower(), f"gpus{node.gpus.count}"]
        topology = node.gpus.topology
        if topology.needs_nvl_domain:
            out.append("nvlink-domain")
        elif topology.needs_nvswitch:
            out.append("nvswitch")
        elif topology.checks_pairs:
            out.append("nvlink")
    layers = {nic.link_layer for nic in node.rdma_nics}
    out += [name for layer, name in (("infiniband", "infiniband"), ("ethernet", "roce"))
            if layer in layers]
    return tuple(dict.fromkeys(out))


def node_features(node: NodeSpec) -> tuple[str, ...]:
    """The node's ``Features=``: the spec's, then the site's own (each once)."""
    own = node.settings.get("slurm_node_features") or ()
    if FEATURES.problem(own):  # refused by the spec gate; never half-read here
        own = ()
    return tuple(dict.fromkeys((*auto_features(node), *own)))


def node_weight(node: NodeSpec) -> int:
    """The node's ``Weight=``: the site's, else 1 + its GPU memory in GB."""
    given = node.settings.get("slurm_node_weight")
    if given is not None and not WEIGHT.problem(given):
        return int(given)
    if node.gpus is None:
        return 1
    return 1 + node.gpus.count * node.gpus.model.memory_gb
