"""The spec's Slurm partitions (``slurm_partitions``): the list, each partition's name and
hosts (:func:`slurm_partitions`), and its settings in Slurm's own formats.

Formats from slurm.conf(5), PARTITION CONFIGURATION, of Slurm 22.05.8 (Debian 12's
slurm-wlm-doc, /usr/share/doc/slurm-wlm/html/slurm.conf.html); the same keys and formats are
in 21.08 (Ubuntu 22.04) and 23.11 (Ubuntu 24.04). Each spec key (lower case, like the
partition's ``name``/``nodes``/``default``) is written as its Slurm key on the partition's
``PartitionName=`` line; a value is checked here, before any host is touched, with what is
allowed and how to fix it:

- ``max_time``/``default_time`` (MaxTime, DefaultTime): "minutes, minutes:seconds,
  hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds or
  UNLIMITED" (INFINITE is Slurm's other word for it); an integer is minutes. DefaultTime
  "Run time limit used for jobs that don't specify a value"; it may not exceed MaxTime here.
- ``allow_accounts``/``allow_groups`` (AllowAccounts, AllowGroups): "Comma-separated list"
  of account or group names; a list in the spec.
- ``qos`` (QOS): a QOS name; ``priority_tier`` (PriorityTier): "may not exceed 65533".
- ``oversubscribe`` (OverSubscribe): EXCLUSIVE, FORCE[:count], YES[:count] or NO.
- ``state`` (State): UP, DOWN, DRAIN or INACTIVE.
- ``features`` instead of ``nodes``: the partition is every Slurm worker that has all of them
  (the features gpuinfra.slurm.features gives each node, e.g. ``['h100', 'infiniband']``).
- ``def_mem_per_gpu``/``def_cpu_per_gpu`` (DefMemPerGPU in megabytes, DefCpuPerGPU): the
  partition's own values over the site's and the computed ones (gpuinfra.slurm.conf
  ``per_gpu_defaults``); 0 leaves the key out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.spec.checks import CLUSTER, WHERE_ALL, Collector, check_nested_keys
from gpuinfra.spec.model import NodeSpec, Partition
from gpuinfra.spec.rules import clip

# spec key -> Slurm key, in the order they are written on the PartitionName= line.
SETTING_KEYS = {
    "max_time": "MaxTime", "default_time": "DefaultTime", "allow_accounts": "AllowAccounts",
    "allow_groups": "AllowGroups", "qos": "QOS", "priority_tier": "PriorityTier",
    "oversubscribe": "OverSubscribe", "state": "State",
}
PER_GPU_KEYS = ("def_mem_per_gpu", "def_cpu_per_gpu")
# The partition's keys in the spec: the node list and its name, then its Slurm settings.
PARTITION_KEYS = ("name", "nodes", "features", "default", "gpu", *SETTING_KEYS, *PER_GPU_KEYS)

UNLIMITED = ("UNLIMITED", "INFINITE")
TIME_FORMATS = ("minutes (an integer, or '90'), 'minutes:seconds', 'hours:minutes:seconds', "
                "'days-hours', 'days-hours:minutes', 'days-hours:minutes:seconds', "
                "'UNLIMITED' or 'INFINITE'")
_NUMBERS = re.compile(r"\d{1,9}(?::\d{1,9}){0,2}")
_DAYS = re.compile(r"(\d{1,6})-(\d{1,9}(?::\d{1,9}){0,2})")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# A partition's own name, matched whole (fullmatch: "$" would accept a trailing newline).
_PARTITION = re.compile(r"[A-Za-z0-9_-]{1,64}")
NAME_ALLOWED = "names of letters, digits, '_', '.' and '-' (no spaces or commas)"
_OVERSUBSCRIBE = re.compile(r"(NO|EXCLUSIVE|(YES|FORCE)(?::(\d{1,5}))?)", re.IGNORECASE)
OVERSUBSCRIBE_ALLOWED = "'NO', 'EXCLUSIVE', 'YES', 'YES:<count>', 'FORCE' or 'FORCE:<count>'"
OVERSUBSCRIBE_MAX = 32767  # the count shares a 16-bit field with the FORCE flag
STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")
PRIORITY_TIER_MAX = 65533
DEF_MEM_MAX = 2**31 - 1  # megabytes
DEF_CPU_MAX = 65533


def time_minutes(value: Any) -> float | None:
    """Minutes of a Slurm time value (``inf`` for UNLIMITED); None when it is not one.

    Seconds count as a fraction ("Time resolution is one minute and second values are rounded
    up to the next minute", slurm.conf(5) MaxTime): only used to compare two values."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if value >= 0 else None
    if not isinstance(value, str):
        return None
    if value.upper() in UNLIMITED:
        return float("inf")
    days = _DAYS.fullmatch(value)
    if days:
        # days-hours, days-hours:minutes, days-hours:minutes:seconds
        parts = [int(p) for p in days.group(2).split(":")]
        hours, minutes, seconds = (parts + [0, 0])[:3]
        if hours > 23 or minutes > 59 or seconds > 59:
            return None
        return int(days.group(1)) * 1440 + hours * 60 + minutes + seconds / 60
    if not _NUMBERS.fullmatch(value):
        return None
    parts = [int(p) for p in value.split(":")]
    if len(parts) == 1:  # minutes
        return float(parts[0])
    if len(parts) == 2:  # minutes:seconds
        return None if parts[1] > 59 else parts[0] + parts[1] / 60
    hours, minutes, seconds = parts  # hours:minutes:seconds
    return None if minutes > 59 or seconds > 59 else hours * 60 + minutes + seconds / 60


def partition_settings(field: str, name: str, item: Mapping[str, Any],
                       errs: Collector) -> tuple[tuple[tuple[str, str], ...], dict[str, int]]:
    """(Slurm key, value) pairs of the partition's settings, and its per-GPU defaults
    (``def_mem_per_gpu``/``def_cpu_per_gpu`` as given); every bad value is added to ``errs``."""
    out: list[tuple[str, str]] = []

    def bad(key: str, problem: str, allowed: str, fix: str) -> None:
        errs.add(CLUSTER, f"{field}[{key!r}]", item[key], f"partition {name!r}: {problem}",
                 allowed, f"{fix} {WHERE_ALL}")

    minutes: dict[str, float] = {}
    for key in ("max_time", "default_time"):
        if key not in item:
            continue
        value = item[key]
        got = time_minutes(value)
        if got is None:
            bad(key, f"not a Slurm time ({SETTING_KEYS[key]})", TIME_FORMATS,
                f"write e.g. '{key}': '2-00:00:00' (two days) or '{key}': 90 (minutes)")
            continue
        minutes[key] = got
        out.append((SETTING_KEYS[key], str(value).upper() if isinstance(value, str)
                    and value.upper() in UNLIMITED else str(value)))
    if len(minutes) == 2 and minutes["default_time"] > minutes["max_time"]:
        bad("default_time", f"longer than its max_time ({clip(item['max_time'])}): a job "
            "without --time would ask for more than the partition allows",
            "a default_time no longer than max_time", "shorten default_time, or raise max_time")
    for key in ("allow_accounts", "allow_groups"):
        if key not in item:
            continue
        value = item[key]
        what = key.removeprefix("allow_")
        if not isinstance(value, (list, tuple)) or not value:
            bad(key, f"must be a non-empty list of {what}", NAME_ALLOWED,
                f"write '{key}': ['{what[:-1]}1', '{what[:-1]}2']")
            continue
        wrong = [v for v in value if not isinstance(v, str) or not _NAME.fullmatch(v)]
        if wrong:
            bad(key, f"{clip(wrong[0])} is not a Slurm {what[:-1]} name", NAME_ALLOWED,
                f"fix or remove {clip(wrong[0])}")
            continue
        out.append((SETTING_KEYS[key], ",".join(value)))
    if "qos" in item:
        value = item["qos"]
        if not isinstance(value, str) or not _NAME.fullmatch(value):
            bad("qos", "not a QOS name", NAME_ALLOWED.replace("names", "a name"),
                "name a QOS made with `sacctmgr add qos`")
        else:
            out.append(("QOS", value))
    if "priority_tier" in item:
        value = item["priority_tier"]
        if isinstance(value, bool) or not isinstance(value, int) \
                or not 0 <= value <= PRIORITY_TIER_MAX:
            bad("priority_tier", "not a PriorityTier (an integer, at most 65533)",
                f"an integer from 0 to {PRIORITY_TIER_MAX}", "write e.g. 'priority_tier': 10")
        else:
            out.append(("PriorityTier", str(value)))
    if "oversubscribe" in item:
        value = item["oversubscribe"]
        match = _OVERSUBSCRIBE.fullmatch(value) if isinstance(value, str) else None
        if match is None or (match.group(3) is not None
                             and not 1 <= int(match.group(3)) <= OVERSUBSCRIBE_MAX):
            bad("oversubscribe", "not an OverSubscribe value",
                f"{OVERSUBSCRIBE_ALLOWED} (count 1..{OVERSUBSCRIBE_MAX})",
                "write e.g. 'oversubscribe': 'NO' (the default) or 'FORCE:2'")
        else:
            out.append(("OverSubscribe", value.upper()))
    if "state" in item:
        value = item["state"]
        if not isinstance(value, str) or value.upper() not in STATES:
            bad("state", "not a partition State", ", ".join(repr(s) for s in STATES),
                "write e.g. 'state': 'UP' (the default)")
        else:
            out.append(("State", value.upper()))
    per_gpu: dict[str, int] = {}
    for key, top in (("def_mem_per_gpu", DEF_MEM_MAX), ("def_cpu_per_gpu", DEF_CPU_MAX)):
        if key not in item:
            continue
        value = item[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            unit = "megabytes" if key == "def_mem_per_gpu" else "CPUs"
            bad(key, f"not a count of {unit} per GPU", f"an integer from 0 (left out) to {top}",
                f"write e.g. '{key}': {16384 if unit == 'megabytes' else 8}, or remove it "
                "(computed from the nodes)")
        else:
            per_gpu[key] = value
    return tuple(out), per_gpu


def slurm_partitions(cluster: Mapping[str, Any], nodes: Sequence[NodeSpec],
                     errs: Collector) -> tuple[Partition, ...]:
    """The site's Slurm partitions, checked (none without Slurm; without ``slurm_partitions``,
    one default partition of every Slurm worker)."""
    raw = cluster["slurm_partitions"]
    if "slurm" not in cluster["schedulers"]:
        return ()
    if raw is None:
        members = [n for n in nodes if n.is_worker and "slurm" in n.schedulers]
        workers = tuple(n.name for n in members)
        has_gpu = bool(workers) and all(n.gpus for n in members)
        return (Partition("gpu" if has_gpu else "batch", workers, True, has_gpu),) if workers \
            else ()
    if not isinstance(raw, (list, tuple)):
        errs.add(CLUSTER, "slurm_partitions", raw, "must be a list of dicts",
                 "[{'name': 'gpu', 'nodes': [...], 'default': True, 'max_time': '2-00:00:00'}]",
                 f"fix slurm_partitions {WHERE_ALL}")
        return ()
    if not raw:
        errs.add(CLUSTER, "slurm_partitions", raw, "no partition: Slurm would accept no job",
                 "at least one partition, or None for one partition of every worker",
                 f"list the partitions {WHERE_ALL}, or remove slurm_partitions")
        return ()
    by_name = {n.name: n for n in nodes}
    parts = [p for p in (_partition(i, item, by_name, errs) for i, item in enumerate(raw)) if p]
    for name, count in Counter(p.name for p in parts).items():
        if count > 1:
            errs.add(CLUSTER, "slurm_partitions", name, "partition defined twice",
                     "unique partition names", "merge or rename the partitions")
    defaults = [p.name for p in parts if p.default]
    if len(defaults) > 1:
        errs.add(CLUSTER, "slurm_partitions", defaults, "more than one default partition",
                 "at most one partition with 'default': True", "keep one default")
    return tuple(parts)


def _partition(index: int, item: Any, nodes: Mapping[str, NodeSpec],
               errs: Collector) -> Partition | None:
    field = f"slurm_partitions[{index}]"
    if not isinstance(item, Mapping):
        errs.add(CLUSTER, field, item, "must be a dict", "{'name': ..., 'nodes': [...]}",
                 "fix the entry")
        return None
    check_nested_keys(CLUSTER, field, item, PARTITION_KEYS, "unknown partition setting",
                      errs)
    name, members = item.get("name"), item.get("nodes")
    if not isinstance(name, str) or not _PARTITION.fullmatch(name):
        errs.add(CLUSTER, f"{field}['name']", name, "missing or malformed partition name",
                 "letters, digits, '-' and '_'", "name the partition")
        return None
    if name.upper() == "DEFAULT":
        # slurm.conf(5): "PartitionName=DEFAULT" only sets the defaults of the lines after it;
        # no partition of that name exists, so its nodes would be in none.
        errs.add(CLUSTER, f"{field}['name']", name, "PartitionName=DEFAULT only sets defaults "
                 "for the other partitions in slurm.conf: this partition would not exist",
                 "any other name", "rename the partition (e.g. 'gpu')")
        return None
    flags_ok = True
    for flag in ("default", "gpu"):
        if flag in item and not isinstance(item[flag], bool):
            errs.add(CLUSTER, f"{field}[{flag!r}]", item[flag], f"partition {name!r}: must be "
                     "True or False (a string such as 'false' would count as true)",
                     "True or False", f"write {flag!r}: True or False, without quotes")
            flags_ok = False
    settings, per_gpu = partition_settings(field, name, item, errs)
    if not flags_ok:
        return None
    if "features" in item:
        members = _by_features(field, name, item, nodes, errs)
        if members is None:
            return None
    if not isinstance(members, (list, tuple)) or not members:
        errs.add(CLUSTER, f"{field}['nodes']", members, f"partition {name!r} has no node list",
                 "a non-empty list of inventory host names", "list its hosts")
        return None
    ok = True
    gpu = item.get("gpu", False)
    for member in members:
        node = nodes.get(member) if isinstance(member, str) else None
        if not isinstance(member, str):
            errs.add(CLUSTER, f"{field}['nodes']", member, f"partition {name!r}: each node is "
                     "one host name (a string), not a nested list", ", ".join(nodes),
                     "write 'nodes': ['w1', 'w2']")
            ok = False
        elif node is None:
            errs.add(CLUSTER, f"{field}['nodes']", member, f"partition {name!r} names a host "
                     "that is not in the inventory", ", ".join(nodes), "fix the host name")
            ok = False
        elif not node.is_worker:
            errs.add(CLUSTER, f"{field}['nodes']", member, f"partition {name!r} names "
                     f"{member}, which is not a worker (no slurmd runs there)",
                     ", ".join(n for n, s in nodes.items() if s.is_worker),
                     f"remove {member} from {name!r}, or add it to the 'workers' group")
            ok = False
        elif "slurm" not in node.schedulers:
            errs.add(member, f"{field}['nodes']", member, f"partition {name!r} names a host "
                     "that is not a Slurm node (node_schedulers)", "hosts Slurm runs on",
                     f"remove {member} from {name!r}, or add 'slurm' to its node_schedulers")
            ok = False
        elif gpu and node.gpus is None:
            errs.add(member, f"{field}['nodes']", member, f"GPU partition {name!r} names a host "
                     "without GPUs", "hosts with gpu_model set", f"remove {member} from "
                     f"{name!r}, or set 'gpu': False on the partition")
            ok = False
    return Partition(name, tuple(members), bool(item.get("default", False)), bool(gpu),
                     settings, per_gpu.get("def_mem_per_gpu"),
                     per_gpu.get("def_cpu_per_gpu")) if ok else None


def _by_features(field: str, name: str, item: Mapping[str, Any],
                 nodes: Mapping[str, NodeSpec], errs: Collector) -> list[str] | None:
    """The Slurm workers that have every feature the partition names (``'features': ['h100',
    'infiniband']``: gpuinfra.slurm.features), in the inventory's order; None when refused."""
    # Here, not at the top: gpuinfra.slurm reads the spec's model, which this package makes.
    from gpuinfra.slurm.features import FEATURES, node_features

    wanted = item["features"]
    if "nodes" in item:
        errs.add(CLUSTER, f"{field}['features']", wanted, f"partition {name!r} names both "
                 "nodes and features", "'nodes' (a list of hosts) or 'features' (the nodes "
                 "that have them)", f"keep one of the two {WHERE_ALL}")
        return None
    problem = FEATURES.problem(wanted) if isinstance(wanted, list) and wanted else \
        "must be a non-empty list of features"
    if problem:
        errs.add(CLUSTER, f"{field}['features']", wanted, f"partition {name!r}: {problem}",
                 FEATURES.allowed, "write e.g. 'features': ['h100']")
        return None
    workers = [n for n in nodes.values() if n.is_worker and "slurm" in n.schedulers]
    chosen = [n.name for n in workers if set(wanted) <= set(node_features(n))]
    if not chosen:
        known = sorted({f for n in workers for f in node_features(n)})
        errs.add(CLUSTER, f"{field}['features']", wanted, f"partition {name!r}: no Slurm node "
                 f"has all of {', '.join(wanted)}", "features of the site's nodes: "
                 + ", ".join(known), "name features some node has (the GPU family such as "
                 "'h100', 'nvswitch', 'infiniband', or a node's slurm_node_features)")
        return None
    return chosen


def check_partition_accounting(parts: Sequence[Partition], accounting: bool,
                               accounts: Any, errs: Collector) -> None:
    """A partition's QOS and AllowAccounts live in the accounting database: without
    slurm_accounting slurmctld knows none of them, and with it an account gpuinfra does not
    make (slurm_accounts) does not exist on a new cluster (no job could run there)."""
    made = {"root", *(a for a in (accounts or []) if isinstance(a, str))}
    for part in parts:
        settings = dict(part.settings)
        if "QOS" in settings and not accounting:
            errs.add(CLUSTER, "slurm_partitions", part.name, f"partition {part.name!r} names QOS "
                     f"{settings['QOS']!r}, and QOS live in the accounting database: without "
                     "slurm_accounting slurmctld knows none", "a QOS with slurm_accounting = "
                     "True", f"set slurm_accounting = True {WHERE_ALL} (and make the QOS with "
                     "sacctmgr), or remove 'qos' from the partition")
        listed = [a for a in settings.get("AllowAccounts", "").split(",") if a]
        if listed and not accounting:
            errs.add(CLUSTER, "slurm_partitions", part.name, f"partition {part.name!r} allows "
                     "accounts, and accounts live in the accounting database: without "
                     "slurm_accounting no job would match them", "allow_accounts with "
                     "slurm_accounting = True", f"set slurm_accounting = True {WHERE_ALL}, or "
                     "remove 'allow_accounts'")
        elif listed:
            never = [a for a in listed if a not in made]
            if never:
                errs.add(CLUSTER, "slurm_partitions", part.name, f"partition {part.name!r} "
                         f"allows account(s) {', '.join(never)}, which the site never makes "
                         "(slurm_accounts): no job of theirs could run", "accounts listed in "
                         "slurm_accounts", f"add {', '.join(never)} to slurm_accounts "
                         f"{WHERE_ALL}, or correct allow_accounts")

