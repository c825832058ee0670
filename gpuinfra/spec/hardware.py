"""A node's CPUs and memory as the spec gives them (``node_hardware``, per host or group):
what a preview (``gpuinfra render`` without recorded facts) writes into slurm.conf, never
another machine's. With the node's own facts (a deploy, or ``render --facts``), the facts win
and the slurm role reports where they differ from the spec (issue 45, item 4)::

    node_hardware = {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2,
                     "memory_gb": 2048}

CPUs are sockets x cores x threads (``slurmd -C``'s CPUs=); memory is the node's installed
memory in GB (MemTotal, before slurm_memory_reserve_percent).
"""

from __future__ import annotations

from typing import Any

from gpuinfra.spec.checks import WHERE_HOST, Collector
from gpuinfra.spec.model import HardwareSpec, HostInput
from gpuinfra.spec.rules import clip

FIELD = "node_hardware"
# key -> (smallest, largest): a bound each, so that a typo (cores for CPUs, MB for GB) is
# caught rather than written into slurm.conf.
LIMITS = {"sockets": (1, 64), "cores_per_socket": (1, 1024), "threads_per_core": (1, 8),
          "memory_gb": (1, 1 << 20)}
EXAMPLE = ("node_hardware = {'sockets': 2, 'cores_per_socket': 56, 'threads_per_core': 2, "
           "'memory_gb': 2048}")


def hardware_spec(host: HostInput, errs: Collector) -> HardwareSpec | None:
    """The host's ``node_hardware``, checked (None: not given, or refused)."""
    raw = host.data.get(FIELD)
    if raw is None:
        return None
    allowed = ", ".join(f"{k} ({low}..{high})" for k, (low, high) in LIMITS.items())
    if not isinstance(raw, dict):
        errs.add(host.name, FIELD, raw, "must be a dict of the node's CPUs and memory",
                 allowed, f"write {EXAMPLE} {WHERE_HOST}")
        return None
    unknown = [k for k in raw if k not in LIMITS]
    missing = [k for k in LIMITS if k not in raw]
    if unknown or missing:
        what = (f"unknown key {clip(unknown[0])}" if unknown
                else f"{', '.join(missing)} missing (slurm.conf needs all four)")
        errs.add(host.name, FIELD, raw, what, allowed, f"write {EXAMPLE} {WHERE_HOST}")
        return None
    values: dict[str, int] = {}
    for key, (low, high) in LIMITS.items():
        value: Any = raw[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errs.add(host.name, f"{FIELD}[{key!r}]", value, f"not a count from {low} to {high}",
                     allowed, f"give the node's {key.replace('_', ' ')} as an integer "
                     f"{WHERE_HOST} (`lscpu` and `free -g` on the node say them)")
            return None
        values[key] = value
    return HardwareSpec(**values)
