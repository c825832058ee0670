"""Role knobs: the data keys each role reads, with their default and their rule.

Each role declares its knobs in ``roles/<role>/defaults.py`` as a tuple of :class:`Knob`.
The spec validator checks every host's value of every knob (its data over the default) before any
host is touched, with the same error shape as the spec's own keys, and the typed spec then
carries the checked values (``NodeSpec.settings``): roles read nothing raw from host data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuinfra.spec.checks import CLUSTER, WHERE_ALL, Collector
from gpuinfra.spec.model import HostInput
from gpuinfra.spec.rules import Rule, clip


@dataclass(frozen=True)
class Knob:
    """One data key of a role.

    key: role-prefixed data key (``slurm_db_name``).
    default: the safest value; what a host gets when no data sets it.
    rule: what the value may be.
    meaning: one line, said in the fix of an error ("memory kept from jobs, percent").
    site_wide: must be the same on every host (it lands in a file every node shares).
    """

    key: str
    default: Any
    rule: Rule
    meaning: str
    site_wide: bool = False


def defaults(knobs: Iterable[Knob]) -> dict[str, Any]:
    """{key: default} of ``knobs``."""
    return {k.key: k.default for k in knobs}


def settings(knobs: Iterable[Knob], data: Mapping[str, Any]) -> dict[str, Any]:
    """Every knob's value for a host: ``data`` over the defaults (unchecked)."""
    return {k.key: data.get(k.key, k.default) for k in knobs}


def knob_settings(hosts: Sequence[HostInput], knobs: Sequence[Knob],
                  errs: Collector) -> dict[str, dict[str, Any]]:
    """Each host's value of every knob, checked. One error per distinct bad value, naming
    every host that has it (a bad value in group_data/all.py is one problem, not N)."""
    out: dict[str, dict[str, Any]] = {h.name: {} for h in hosts}
    for knob in knobs:
        by_value: dict[str, list[str]] = {}
        values: dict[str, Any] = {}
        for host in hosts:
            value = host.data.get(knob.key, knob.default)
            out[host.name][knob.key] = value
            by_value.setdefault(repr(value), []).append(host.name)
            values[repr(value)] = value
        if knob.site_wide and len(by_value) > 1:
            errs.add(CLUSTER, knob.key, {h.name: out[h.name][knob.key] for h in hosts},
                     "differs between hosts", "one value for the cluster (every node's "
                     "copy of the file it lands in must be the same)",
                     f"set {knob.key} {WHERE_ALL} and remove the per-host overrides")
        for text, names in by_value.items():
            problem = knob.rule.problem(values[text])
            if problem:
                where = names[0] if len(names) == 1 else \
                    ("every host" if len(names) == len(hosts) else ", ".join(names))
                errs.add(where, knob.key, values[text], problem, knob.rule.allowed,
                         f"set {knob.key} in group_data/<site>.py, group_data/<group>.py or "
                         f"the host's data ({knob.meaning}), or remove it for the default "
                         f"{clip(knob.default)}")
    return out
