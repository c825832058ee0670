"""The spec's keys and names: every data key known (a near miss of one is a typo), the
operator's own groups standing for gpuinfra's, host names valid and their short names unique.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from difflib import get_close_matches
from functools import lru_cache

from gpuinfra.spec.checks import CLUSTER, Collector
from gpuinfra.spec.model import ROLE_GROUPS, HostInput, NodeSpec
from gpuinfra.spec.rules import clip

# Names are matched whole (fullmatch): "$" would accept a trailing newline.
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9-]+)*")


def with_role_groups(hosts: Sequence[HostInput], groups: Mapping[str, str] | None,
                     errs: Collector) -> Sequence[HostInput]:
    """``hosts`` with gpuinfra's group added where the operator's own group stands for it."""
    if not groups:
        return hosts
    if not isinstance(groups, Mapping):
        errs.add(CLUSTER, "groups", groups, "not a mapping", "{gpuinfra group: your group}",
                 "pass groups={'head': 'slurmctld', 'workers': 'compute'}")
        return hosts
    mapping: dict[str, str] = {}
    for ours, theirs in groups.items():
        if ours not in ROLE_GROUPS:
            errs.add(CLUSTER, f"groups[{clip(ours)}]", theirs, "not a gpuinfra group",
                     ", ".join(ROLE_GROUPS), f"use one of {', '.join(ROLE_GROUPS)} as the key")
        elif not isinstance(theirs, str) or not theirs:
            errs.add(CLUSTER, f"groups[{ours!r}]", theirs, "not a group name",
                     "the name of a group of your inventory", "give the group's name as text")
        else:
            mapping[ours] = theirs
    # An operator's group named like one of gpuinfra's but mapped to another (docs/reuse.md:
    # their "login" group is gpuinfra's head) is theirs, not gpuinfra's group of that name.
    theirs = {g for o, g in mapping.items() if g in ROLE_GROUPS and g != o}
    return [HostInput(h.name, (*(g for g in h.groups if g not in theirs),
                               *(o for o, g in mapping.items()
                                 if g in h.groups and o not in h.groups)), h.data)
            for h in hosts]


def check_unknown_keys(host: HostInput, known: Sequence[str], errs: Collector,
                       prefixes: tuple[str, ...] | None = None,
                       owned: tuple[str, ...] = ()) -> None:
    """A key that is almost a known key (in any case) is a typo that would silently fall back
    to a default: a spec key or a role knob written ``GPU_MODEL`` or ``..._precent``. A key
    with a prefix gpuinfra owns (``owned``: each role's ``<role>_``, pyinfra's ``ssh_``) that
    is no known key is refused too, however far from one (``monitoring_tls_cert``), naming the
    nearest key of that prefix.

    ``prefixes`` (a deploy running only some roles): only keys starting with one of them, or
    equal to a known key but for case, are judged; the operator's other keys are theirs."""
    lowered = {k.lower(): k for k in known}
    for key in host.data:
        if not isinstance(key, str) or key in known:
            continue
        if prefixes is not None and key.lower() not in lowered \
                and not key.lower().startswith(prefixes):
            continue
        close = [lowered[key.lower()]] if key.lower() in lowered else \
            [lowered[c] for c in _nearest(key.lower(), tuple(lowered))]
        if close:
            errs.add(host.name, key, host.data[key], f"unknown key (did you mean {close[0]!r}?)",
                     "the spec keys (docs/spec.md) and each role's keys "
                     "(roles/<role>/defaults.py)", f"rename {key!r} to {close[0]!r}")
            continue
        prefix = next((p for p in sorted(owned, key=len, reverse=True)
                       if key.lower().startswith(p)), None)
        if prefix is None:
            continue
        family = [k for k in known if k.lower().startswith(prefix)]
        near = get_close_matches(key.lower(), [k.lower() for k in family], n=1, cutoff=0.0)
        where = ("pyinfra's SSH connector keys" if prefix == "ssh_" else
                 f"roles/{prefix[:-1]}/defaults.py")
        errs.add(host.name, key, host.data[key],
                 f"unknown key: {prefix} keys are {where}'s and none is {key!r}"
                 + (f" (the nearest: {lowered[near[0]]!r})" if near else ""),
                 f"the keys of {where}", f"rename {key!r} to the key meant, or remove it "
                 f"(a key with another prefix is yours)")


@lru_cache(maxsize=256)
def _nearest(key: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """The known key ``key`` is almost (a typo), if any: every host of a site has the same
    keys, so a 10,000-host spec asks the same question 10,000 times."""
    return tuple(get_close_matches(key, known, n=1, cutoff=0.8))


def check_groups(host: HostInput, errs: Collector) -> None:
    """A group named almost like a role group (``worker``) deploys nothing: a typo."""
    for group in host.groups:
        if group in ROLE_GROUPS or not isinstance(group, str):
            continue
        close = get_close_matches(group.lower(), ROLE_GROUPS, n=1, cutoff=0.75)
        if close:
            errs.add(host.name, "group", group, f"unknown group (did you mean {close[0]!r}?)",
                     ", ".join(ROLE_GROUPS) + " (other groups are yours, for group_data)",
                     f"rename the group {group!r} to {close[0]!r} in inventory/<site>.py")


def check_host_name(host: HostInput, errs: Collector) -> None:
    if not isinstance(host.name, str) or not _HOST_NAME.fullmatch(host.name):
        errs.add(host.name, "host name", host.name, "not a valid host name",
                 "letters, digits and '-', dot-separated (RFC 1123)",
                 "rename the host in the inventory; put its address in ssh_hostname")


def check_short_names(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """Short names must be unique, in any case: DNS, /etc/hosts and Slurm do not tell ``W1``
    from ``w1``, so two such hosts would be one node deployed twice."""
    counts = Counter(n.short_name.lower() for n in nodes)
    for short, count in counts.items():
        if count > 1:
            names = sorted(n.name for n in nodes if n.short_name.lower() == short)
            same = {n.short_name for n in nodes if n.short_name.lower() == short}
            problem = (f"{count} host names differ only in case ({short!r} to DNS and Slurm)"
                       if len(same) > 1 else f"{count} hosts share the short name {short!r}")
            errs.add(names[0], "host name", names, problem,
                     "unique short host names, in any case (Slurm and /etc/hosts use them)",
                     "rename one of the hosts")

