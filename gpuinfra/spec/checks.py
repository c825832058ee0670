"""What every part of the spec check shares: the error type, the collector of errors, where a
fix goes, and checks of a single value (an integer in range, a choice, a nested dict's keys)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.rules import clip

CLUSTER = "cluster"  # the "host" of errors about cluster-wide values
WHERE_HOST = "in the host's data in inventory/<site>.py (or group_data/<group>.py)"
WHERE_ALL = "once for the site, in group_data/<site>.py (or group_data/all.py)"


@dataclass(frozen=True)
class SpecError:
    host: str
    field: str
    value: Any
    problem: str
    allowed: str
    fix: str

    def __str__(self) -> str:
        return (
            f"{self.host}: {self.field} = {clip(self.value)}: {self.problem}. "
            f"Allowed: {self.allowed}. Fix: {self.fix}"
        )


class SpecInvalid(GpuinfraError):
    """The spec has problems; ``errors`` lists every one of them."""

    def __init__(self, errors: Sequence[SpecError]):
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"the cluster spec has {len(self.errors)} problem(s):\n{lines}")


class Collector:
    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    def add(self, host: str, field: str, value: Any, problem: str, allowed: str, fix: str) -> None:
        self.errors.append(SpecError(host, field, value, problem, allowed, fix))


def check_nested_keys(host: str, field: str, mapping: Mapping[Any, Any],
                      allowed: Sequence[str], problem: str, errs: Collector) -> bool:
    """Keys of a nested dict (a partition, gpu_sharing, an rdma_nics entry) outside
    ``allowed``: each is refused, with the known key it is close to (in any case) when there
    is one. True when every key is known."""
    lowered = {k.lower(): k for k in allowed}
    ok = True
    for key in mapping:
        if key in allowed:
            continue
        ok = False
        text = key.lower() if isinstance(key, str) else ""
        close = [lowered[text]] if text in lowered else \
            [lowered[c] for c in get_close_matches(text, list(lowered), n=1, cutoff=0.75)]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        errs.add(host, f"{field}[{clip(key)}]", mapping[key], f"{problem}{hint}",
                 ", ".join(allowed),
                 f"rename {clip(key)} to {close[0]!r}" if close else f"remove {clip(key)}")
    return ok


def int_value(host: str, field: str, value: Any, errs: Collector, minimum: int, maximum: int,
              fix: str) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        hint = f" (write {value} without quotes)" if isinstance(value, str) and value.isdigit() \
            else ""
        errs.add(host, field, value, f"must be an integer{hint}", f"{minimum}..{maximum}", fix)
        return None
    if not minimum <= value <= maximum:
        errs.add(host, field, value, "out of range", f"an integer from {minimum} to {maximum}", fix)
        return None
    return value


def choice_value(host: str, field: str, value: Any, allowed: Sequence[str], errs: Collector,
                 where: str) -> str:
    if value not in allowed:
        errs.add(host, field, value, f"unknown {field.replace('_', ' ')}", ", ".join(allowed),
                 f"set {field} to one of {list(allowed)} {where}")
        return allowed[0]
    return value
