"""Pure judgements of the Slurm and munge checks (gpuinfra_verify/test_slurm.py, test_munge.py).

Nothing here connects to a host: tests/unit/test_verify_slurm.py shows each judgement failing
on broken input. Messages follow the suite's form: what was seen, then cause and fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuinfra.parsers.slurm import GresRecord, SlurmNode
from gpuinfra.parsers.topo import TopoMatrix
from gpuinfra_verify.expect import problem

# Slurm states in which a node takes jobs.
USABLE_STATES = ("idle", "mixed", "allocated", "completing")

# What slurmctld's drain/down reasons mean, and what to do: (words in the reason, cause, fix).
REASONS: tuple[tuple[str, str, str], ...] = (
    ("gres/gpu count", "the node registered fewer GPUs than slurm.conf gives it: the spec's "
     "gpu_count disagrees with the hardware (a GPU missing from nvidia-smi: fallen off the bus, "
     "Xid 79, not seated, or the spec is wrong)",
     "compare `nvidia-smi -L` on the node with gpu_count in the inventory; fix the hardware or "
     "the spec, deploy, then `scontrol update nodename=NODE state=resume`"),
    ("Low RealMemory", "the node registered less memory than slurm.conf gives it",
     "deploy again (RealMemory is read from the node), or raise slurm_memory_reserve_percent"),
    ("Low socket*core*thread count", "the node has fewer CPUs than slurm.conf says",
     "deploy again so slurm.conf takes the node's lscpu; check SMT/BIOS settings"),
    ("Not responding", "slurmctld cannot reach slurmd on the node",
     "check `systemctl status slurmd` on the node, the network and the munge key"),
    ("Kill task failed", "a job step could not be killed (hung GPU process?)",
     "check `nvidia-smi` for stuck processes, reboot the node if needed, then resume it"),
)


def reason_advice(reason: str) -> tuple[str, str]:
    """(cause, fix) for a Slurm drain/down reason."""
    for words, cause, fix in REASONS:
        if words.lower() in reason.lower():
            return cause, fix
    return ("slurmctld set the node unusable (see the reason)",
            "read `scontrol show node NODE`; fix the cause, then "
            "`scontrol update nodename=NODE state=resume`")


def node_state_problem(name: str, seen: SlurmNode | None) -> str | None:
    """Why the node does not take jobs, or None when it is idle/mixed/allocated."""
    if seen is None:
        return problem(name, "the controller does not know this node (not in sinfo)",
                       "the node is missing from slurm.conf on the head, or the head's "
                       "slurm.conf is older than the node's",
                       "deploy (slurm role) so every node has the same slurm.conf, then check "
                       "`sinfo -N` on the head")
    if seen.base_state in USABLE_STATES and seen.responding and "drain" not in seen.state:
        return None
    cause, fix = reason_advice(seen.reason)
    if not seen.responding and seen.reason in ("", "none"):
        cause, fix = reason_advice("Not responding")
    return problem(name, f"Slurm state {seen.state!r} (reason: {seen.reason})", cause,
                   fix.replace("NODE", name))


# GRES that share a GPU: Slurm 22.05 reports them typed with the GPU's type
# (``mps:h100-pcie-80gb:200`` in sinfo, seen in the lab), while slurm.conf counts them untyped.
SHARED_GRES = ("mps", "shard")


def _untyped_sharing(seen: Mapping[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, count in seen.items():
        name = key.split(":", 1)[0]
        key = name if name in SHARED_GRES else key
        out[key] = out.get(key, 0) + count
    return out


def gres_problems(expected: Mapping[str, int], seen: Mapping[str, int]) -> list[str]:
    """``gpu:h100: expected 8, Slurm has 7`` per GRES whose count differs (both ways); shared
    GRES (mps, shard) are compared untyped, as slurm.conf counts them."""
    seen = _untyped_sharing(seen)
    out = []
    for key in sorted(set(expected) | set(seen)):
        if expected.get(key, 0) != seen.get(key, 0):
            out.append(f"{key}: expected {expected.get(key, 0)}, Slurm has {seen.get(key, 0)}")
    return out


def expected_gres(items: Sequence[str]) -> dict[str, int]:
    """``["gpu:h100:8", "mps:800"]`` (slurmconf.node_gres) as ``{"gpu:h100": 8, "mps": 800}``."""
    out: dict[str, int] = {}
    for item in items:
        key, _, count = item.rpartition(":")
        out[key] = out.get(key, 0) + int(count)
    return out


def links_problems(records: Sequence[GresRecord], topo: TopoMatrix) -> list[str]:
    """Differences between slurmd's GPU Links= and the NVLink counts of ``nvidia-smi topo -m``.

    Slurm numbers GPUs by PCI bus order, as nvidia-smi's index does: record i is GPU i."""
    gpus = sorted((r for r in records if r.name == "gpu"), key=lambda r: r.index or 0)
    if len(gpus) != topo.gpu_count:
        return [f"slurmd has {len(gpus)} GPU records, nvidia-smi topo -m shows "
                f"{topo.gpu_count} GPUs"]
    out = []
    for record in gpus:
        i = record.index or 0
        want = tuple(-1 if i == j else topo.nvlink_count(i, j) for j in range(topo.gpu_count))
        if record.links != want:
            shown = ",".join(map(str, record.links)) if record.links else "none"
            out.append(f"GPU{i}: Links={shown}, topology says {','.join(map(str, want))}")
    return out


def isolation_problems(results: Mapping[str, str], allocated: str) -> list[str]:
    """ConstrainDevices judged from what a job saw opening each /dev/nvidiaN.

    ``results``: device -> the open() outcome inside a job given one GPU ("ok", or the error:
    "Operation not permitted" is the cgroup's refusal; "No such device or address" means the
    open reached the kernel, as on a host without a loaded driver)."""
    out = []
    for device, outcome in sorted(results.items()):
        refused = outcome == "Operation not permitted"
        if device == allocated and refused:
            out.append(f"{device}: the job's own GPU is refused ({outcome})")
        if device != allocated and not refused:
            out.append(f"{device}: a GPU the job was not given is reachable ({outcome})")
    return out
