"""The spec's cluster-wide keys (``CLUSTER_KEYS``): one value for the whole site, each checked
(cluster name, schedulers, driver branch, mirrors and proxy, offline, MUNGE key rotation...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.knowledge import drivers
from gpuinfra.spec.checks import CLUSTER, WHERE_ALL, Collector, choice_value, int_value
from gpuinfra.spec.kubernetes import kubernetes_spec
from gpuinfra.spec.model import (
    CLUSTER_KEYS,
    MIG_STRATEGIES,
    NOT_DEPLOYED,
    RDMA_STACKS,
    REBOOT_POLICIES,
    SCHEDULER_SHARING,
    SCHEDULERS,
    HostInput,
)
from gpuinfra.spec.rules import url_problem

# Names are matched whole (fullmatch): "$" would accept a trailing newline.
_CLUSTER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")


def cluster_values(hosts: Sequence[HostInput], errs: Collector,
                   default_schedulers: Sequence[str] | None = None) -> dict[str, Any]:
    """Each cluster-wide key's value, checked (one value on every host); ``default_schedulers``
    replaces the default of ``schedulers``."""
    defaults = dict(CLUSTER_KEYS)
    if default_schedulers is not None:
        defaults["schedulers"] = list(default_schedulers)
    raw: dict[str, Any] = {}
    for key, default in defaults.items():
        values = {h.name: h.data.get(key, default) for h in hosts}
        distinct = {repr(v) for v in values.values()}
        if len(distinct) > 1:
            errs.add(CLUSTER, key, values, "differs between hosts", "one value for the cluster",
                     f"set {key} {WHERE_ALL} and remove the per-host overrides")
        raw[key] = next(iter(values.values()))
    return {
        "cluster_name": _cluster_name(raw["cluster_name"], errs),
        "schedulers": _schedulers(raw["schedulers"], errs),
        "driver_branch": _driver_branch(raw["driver_branch"], errs),
        "mig_strategy": choice_value(CLUSTER, "mig_strategy", raw["mig_strategy"],
                                     MIG_STRATEGIES, errs, WHERE_ALL),
        "reboot_policy": choice_value(CLUSTER, "reboot_policy", raw["reboot_policy"],
                                      REBOOT_POLICIES, errs, WHERE_ALL),
        "apt_mirror": (mirrors := _apt_mirror(raw["apt_mirror"], errs)),
        "apt_proxy": _url(CLUSTER, "apt_proxy", raw["apt_proxy"], errs, proxy=True),
        "nvidia_repo_mirror": (nvidia := _url(CLUSTER, "nvidia_repo_mirror",
                                              raw["nvidia_repo_mirror"], errs)),
        "offline": _offline(raw, mirrors, nvidia, hosts, errs),
        "slurm_partitions": raw["slurm_partitions"],
        "fabric_switches": raw["fabric_switches"],  # judged with the nodes: spec/fabric.py
        "fabric_blocks": raw["fabric_blocks"],  # judged with the nodes: spec/blocks.py
        "slurm_accounting": _flag("slurm_accounting", raw["slurm_accounting"], errs,
                                  "True runs slurmdbd with MariaDB on the head"),
        "munge_key_rotation": _rotation(raw["munge_key_rotation"], errs),
        "kubernetes": kubernetes_spec(raw, errs),
        "scheduler_sharing": _scheduler_sharing(raw["scheduler_sharing"], errs),
        "rdma_stack": choice_value(CLUSTER, "rdma_stack", raw["rdma_stack"], RDMA_STACKS, errs,
                                   WHERE_ALL),
        "max_fail_percent": int_value(CLUSTER, "max_fail_percent", raw["max_fail_percent"], errs,
                                      0, 100, f"set max_fail_percent {WHERE_ALL}: the percent "
                                      "of hosts that may fail before the whole deploy stops"),
    }


def _cluster_name(value: Any, errs: Collector) -> str:
    if not isinstance(value, str) or not _CLUSTER_NAME.fullmatch(value):
        errs.add(CLUSTER, "cluster_name", value, "not a valid cluster name",
                 "lower-case letter first, then lower-case letters, digits, '-' or '_' (max 40)",
                 f"set cluster_name {WHERE_ALL}, e.g. cluster_name = 'gpu1'")
        return "invalid"
    return value


def _schedulers(value: Any, errs: Collector) -> list[str]:
    if isinstance(value, str):
        errs.add(CLUSTER, "schedulers", value, "must be a list, not a string",
                 f"a list drawn from {list(SCHEDULERS)}", f"write schedulers = [{value!r}]")
        return []
    if not isinstance(value, (list, tuple)):
        errs.add(CLUSTER, "schedulers", value, "must be a list", f"a list drawn from "
                 f"{list(SCHEDULERS)}", f"set schedulers {WHERE_ALL}, e.g. ['slurm']")
        return []
    good = []
    deployed = [s for s in SCHEDULERS if s not in NOT_DEPLOYED]
    for item in value:
        if isinstance(item, str) and item in NOT_DEPLOYED:
            errs.add(CLUSTER, "schedulers", item, NOT_DEPLOYED[item], ", ".join(deployed),
                     f"use {deployed} in schedulers {WHERE_ALL}")
        elif isinstance(item, str) and item in SCHEDULERS:
            good.append(item)
        else:
            errs.add(CLUSTER, "schedulers", item, "unknown scheduler", ", ".join(deployed),
                     f"use one of {deployed} in schedulers {WHERE_ALL}")
    if len(set(good)) != len(good):
        errs.add(CLUSTER, "schedulers", value, "lists a scheduler twice", "each scheduler once",
                 "remove the duplicate")
    return list(dict.fromkeys(good))


def _driver_branch(value: Any, errs: Collector) -> str:
    branch = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    supported = drivers.supported_branches()
    if branch is None or branch not in drivers.KNOWN_BRANCHES:
        errs.add(CLUSTER, "driver_branch", value, "unknown NVIDIA driver branch",
                 f"known branches {', '.join(drivers.KNOWN_BRANCHES)}; the roles install "
                 f"{', '.join(supported)}", f"set driver_branch = '{supported[0]}' {WHERE_ALL}")
        return supported[0]
    if branch not in supported:
        # The nearest newer branch the roles install (a site asking 560 wants new, not 535).
        newer = [b for b in supported if b.isdigit() and int(b) > int(branch)]
        pick = min(newer, key=int) if newer else supported[-1]
        errs.add(CLUSTER, "driver_branch", value,
                 "a real branch, but the roles cannot install it on "
                 f"{', '.join(drivers.SUPPORTED_OS)} yet",
                 ", ".join(supported), f"set driver_branch = '{pick}' {WHERE_ALL}")
    return branch


def _flag(field: str, value: Any, errs: Collector, meaning: str) -> bool:
    if not isinstance(value, bool):
        errs.add(CLUSTER, field, value, "must be True or False", "True, False",
                 f"set {field} {WHERE_ALL} ({meaning})")
        return False
    return value


_ROTATION = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def _rotation(value: Any, errs: Collector) -> str | None:
    """``munge_key_rotation``: None (keep the key), or a token; a new token rotates it once."""
    if value is None:
        return None
    if not isinstance(value, str) or not _ROTATION.fullmatch(value):
        errs.add(CLUSTER, "munge_key_rotation", value, "not a rotation token",
                 "None, or 1-64 letters, digits, '.', '_', ':' or '-' (e.g. '2026-11-22')",
                 f"set munge_key_rotation {WHERE_ALL} to a new value to rotate the key once")
        return None
    return value


def _url(host: str, field: str, value: Any, errs: Collector, proxy: bool = False) -> str | None:
    if value is None:
        return None
    example = "http://proxy.example:3128" if proxy else "http://mirror.example/debian"
    problem = url_problem(value, need_port=proxy)
    if problem:
        need = ("http(s)://[user:password@]host:port" if proxy else
                "an http(s)://host[:port][/path] URL (no quotes, spaces, query or fragment)")
        errs.add(host, field, value, problem, need,
                 f"set {field} {WHERE_ALL}, e.g. {example!r}, or None to disable")
        return None
    return value


def _apt_mirror(value: Any, errs: Collector) -> dict[str, str]:
    """One URL for the site's distribution, or {distribution: URL} for mixed sites."""
    if value is None:
        return {}
    if isinstance(value, str):
        url = _url(CLUSTER, "apt_mirror", value, errs)
        return {"default": url} if url else {}
    if isinstance(value, Mapping):
        out = {}
        for distro, url in value.items():
            if distro not in ("debian", "ubuntu", "default"):
                errs.add(CLUSTER, f"apt_mirror[{distro!r}]", url, "unknown distribution",
                         "debian, ubuntu, default", "key the mirrors by 'debian' or 'ubuntu'")
                continue
            good = _url(CLUSTER, f"apt_mirror[{distro!r}]", url, errs)
            if good:
                out[distro] = good
        return out
    errs.add(CLUSTER, "apt_mirror", value, "must be a URL or a mapping of URLs",
             "'http://mirror/debian' or {'debian': URL, 'ubuntu': URL}", f"fix it {WHERE_ALL}")
    return {}


def _offline(raw: Mapping[str, Any], mirrors: Mapping[str, str], nvidia: str | None,
             hosts: Sequence[HostInput], errs: Collector) -> bool:
    """An offline site needs mirrors that are set (judged on the checked values: a mapping of
    None, or a refused URL, is no mirror)."""
    value = raw["offline"]
    if not isinstance(value, bool):
        errs.add(CLUSTER, "offline", value, "must be True or False", "True, False",
                 f"set offline = True {WHERE_ALL} for sites without internet access")
        return False
    if not value:
        return False
    if not mirrors:
        errs.add(CLUSTER, "apt_mirror", raw["apt_mirror"],
                 "an offline site needs a local apt mirror",
                 "an http(s):// URL", f"set apt_mirror {WHERE_ALL}, or offline = False")
    has_gpus = any(h.data.get("gpu_model") for h in hosts)
    if has_gpus and not nvidia:
        errs.add(CLUSTER, "nvidia_repo_mirror", raw["nvidia_repo_mirror"],
                 "an offline site with GPUs needs a mirror of NVIDIA's container-toolkit repo",
                 "an http(s):// URL", f"set nvidia_repo_mirror {WHERE_ALL}, or offline = False")
    return True



def _scheduler_sharing(value: Any, errs: Collector) -> str | None:
    if value is None or value in SCHEDULER_SHARING:
        return value
    errs.add(CLUSTER, "scheduler_sharing", value, "unknown way of sharing a worker",
             "None (a worker belongs to one scheduler), or 'drain' (it runs both; the "
             "operator drains it in one before the other uses it)",
             f"set scheduler_sharing {WHERE_ALL}, or give each worker node_schedulers")
    return None

