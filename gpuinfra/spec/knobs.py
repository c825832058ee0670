"""Role knobs: the data keys each role reads, with their default and their rule.

Each role declares its knobs in ``roles/<role>/defaults.py`` as a tuple of :class:`Knob`.
The spec validator checks every host's value of every knob (its data over the default) before any
host is touched, with the same error shape as the spec's own keys, and the typed spec then
carries the checked values (``NodeSpec.settings``): roles read nothing raw from host data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuinfra.spec.rules import Rule


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
