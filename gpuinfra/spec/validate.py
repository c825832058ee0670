"""Validate pyinfra host data against the cluster spec, collecting every problem at once.

``build_cluster(hosts)`` returns a :class:`ClusterSpec` or raises :class:`SpecInvalid` holding
one :class:`SpecError` per problem: host, field, bad value, what is allowed and how to fix it.
Nothing here raises anything else on bad data: wrong types are problems, not crashes.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge import drivers
from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.knowledge.gpus import (
    GPU_MODELS,
    GpuModel,
    branch_problem,
    gpu_model,
    suggest_models,
)
from gpuinfra.knowledge.topology import PROFILES, gpu_count_problem
from gpuinfra.platforms import node_address
from gpuinfra.spec import rdma
from gpuinfra.spec.knobs import Knob
from gpuinfra.spec.model import (
    CLUSTER_KEYS,
    HEAD_GROUP,
    HOST_KEYS,
    HYPERVISOR_GROUP,
    MIG_STRATEGIES,
    NOT_DEPLOYED,
    NVLINK_FABRICS,
    RDMA_STACKS,
    REBOOT_POLICIES,
    ROLE_GROUPS,
    SCHEDULER_SHARING,
    SCHEDULERS,
    SHARING_MODES,
    SPEC_KEYS,
    WORKER_GROUP,
    ClusterSpec,
    GpuSharing,
    GpuSpec,
    HostInput,
    KubernetesSpec,
    NodeSpec,
    NvlinkGroup,
    Partition,
    RdmaNic,
    SpecWarning,
    VfioSpec,
    VmSpec,
)
from gpuinfra.spec.rules import clip, url_problem
from gpuinfra.vfio import PCI_ADDRESS, PCI_ID, normalize_address, slot_of

CLUSTER = "cluster"  # the "host" of errors about cluster-wide values
_WHERE_HOST = "in the host's data in inventory/<site>.py (or group_data/<group>.py)"
_WHERE_ALL = "once for the site, in group_data/<site>.py (or group_data/all.py)"

MPS_MIN_CLIENTS, MPS_MAX_CLIENTS = 2, 48  # Volta+ MPS: 48 clients per device [mps-doc]
# Names are matched whole (fullmatch): "$" would accept a trailing newline.
_CLUSTER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9-]+)*")
_PARTITION = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MEM_LIMIT = re.compile(r"\d{1,12}[KMGT]?B?", re.IGNORECASE)


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


class _Collector:
    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    def add(self, host: str, field: str, value: Any, problem: str, allowed: str, fix: str) -> None:
        self.errors.append(SpecError(host, field, value, problem, allowed, fix))


def validate(hosts: Sequence[HostInput], duplicate_names: Sequence[str] = (),
             knobs: Sequence[Knob] = ()) -> list[SpecError]:
    """Every problem of the spec made of ``hosts`` (empty when it is valid)."""
    try:
        build_cluster(hosts, duplicate_names, knobs)
    except SpecInvalid as exc:
        return exc.errors
    return []


def build_cluster(hosts: Sequence[HostInput], duplicate_names: Sequence[str] = (),
                  knobs: Sequence[Knob] = ()) -> ClusterSpec:
    """The typed cluster spec for ``hosts``; raises :class:`SpecInvalid` listing all problems.

    ``duplicate_names`` are host names the inventory lists more than once (the loader sees the
    raw inventory; pyinfra itself would silently merge them). ``knobs`` are the roles' data
    keys (roles/<role>/defaults.py): each host's values are checked and kept in
    ``NodeSpec.settings``; a key close to a spec key or a knob is reported as a typo.
    """
    errs = _Collector()
    for name in duplicate_names:
        errs.add(name, "inventory", name, "this host name is listed more than once",
                 "each host once per group", "remove the duplicate entry (or rename one host)")
    if not hosts:
        errs.add(CLUSTER, "inventory", [], "the inventory has no hosts",
                 "at least one host in the 'head' group", "add hosts to inventory/<site>.py")
        raise SpecInvalid(errs.errors)
    known = (*SPEC_KEYS, *(k.key for k in knobs))
    for host in hosts:
        _check_unknown_keys(host, known, errs)
        _check_host_name(host, errs)
        _check_groups(host, errs)
    cluster = _cluster_values(hosts, errs)
    settings = _knob_settings(hosts, knobs, errs)
    nodes = tuple(_node(host, cluster, settings[host.name], errs) for host in hosts)
    _check_short_names(nodes, errs)
    _check_heads(nodes, cluster["schedulers"], errs)
    _check_shared_workers(nodes, cluster["scheduler_sharing"], errs)
    if "kubernetes" in cluster["schedulers"]:
        _check_kubernetes(nodes, cluster["kubernetes"], errs)
    partitions = _partitions(cluster, nodes, errs)
    _check_rdma_stack(nodes, cluster["rdma_stack"], errs)
    if errs.errors:
        raise SpecInvalid(errs.errors)
    return ClusterSpec(
        name=cluster["cluster_name"],
        schedulers=tuple(cluster["schedulers"]),
        driver_branch=cluster["driver_branch"],
        mig_strategy=cluster["mig_strategy"],
        reboot_policy=cluster["reboot_policy"],
        apt_mirror=cluster["apt_mirror"],
        apt_proxy=cluster["apt_proxy"],
        nvidia_repo_mirror=cluster["nvidia_repo_mirror"],
        offline=cluster["offline"],
        nodes=nodes,
        partitions=partitions,
        slurm_accounting=cluster["slurm_accounting"],
        munge_key_rotation=cluster["munge_key_rotation"],
        kubernetes=cluster["kubernetes"],
        scheduler_sharing=cluster["scheduler_sharing"],
        max_fail_percent=cluster["max_fail_percent"],
        rdma_stack=cluster["rdma_stack"],
        warnings=tuple(_partial_effects(nodes) + _gpudirect_warnings(nodes,
                                                                   cluster["rdma_stack"])),
    )


# ---------------------------------------------------------------------------- keys and names

def _check_unknown_keys(host: HostInput, known: Sequence[str], errs: _Collector) -> None:
    """A key that is almost a known key (in any case) is a typo that would silently fall back
    to a default: a spec key or a role knob written ``GPU_MODEL`` or ``..._precent``."""
    lowered = {k.lower(): k for k in known}
    for key in host.data:
        if not isinstance(key, str) or key in known:
            continue
        close = [lowered[key.lower()]] if key.lower() in lowered else \
            [lowered[c] for c in get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.8)]
        if close:
            errs.add(host.name, key, host.data[key], f"unknown key (did you mean {close[0]!r}?)",
                     "the spec keys (README, 'The spec') and each role's keys "
                     "(roles/<role>/defaults.py)", f"rename {key!r} to {close[0]!r}")


def _check_nested_keys(host: str, field: str, mapping: Mapping[Any, Any],
                       allowed: Sequence[str], problem: str, errs: _Collector) -> bool:
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


def _check_groups(host: HostInput, errs: _Collector) -> None:
    """A group named almost like a role group (``worker``) deploys nothing: a typo."""
    for group in host.groups:
        if group in ROLE_GROUPS or not isinstance(group, str):
            continue
        close = get_close_matches(group.lower(), ROLE_GROUPS, n=1, cutoff=0.75)
        if close:
            errs.add(host.name, "group", group, f"unknown group (did you mean {close[0]!r}?)",
                     ", ".join(ROLE_GROUPS) + " (other groups are yours, for group_data)",
                     f"rename the group {group!r} to {close[0]!r} in inventory/<site>.py")


def _check_host_name(host: HostInput, errs: _Collector) -> None:
    if not isinstance(host.name, str) or not _HOST_NAME.fullmatch(host.name):
        errs.add(host.name, "host name", host.name, "not a valid host name",
                 "letters, digits and '-', dot-separated (RFC 1123)",
                 "rename the host in the inventory; put its address in ssh_hostname")


def _check_short_names(nodes: Sequence[NodeSpec], errs: _Collector) -> None:
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


# ---------------------------------------------------------------------------- cluster-wide

def _cluster_values(hosts: Sequence[HostInput], errs: _Collector) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for key, default in CLUSTER_KEYS.items():
        values = {h.name: h.data.get(key, default) for h in hosts}
        distinct = {repr(v) for v in values.values()}
        if len(distinct) > 1:
            errs.add(CLUSTER, key, values, "differs between hosts", "one value for the cluster",
                     f"set {key} {_WHERE_ALL} and remove the per-host overrides")
        raw[key] = next(iter(values.values()))
    return {
        "cluster_name": _cluster_name(raw["cluster_name"], errs),
        "schedulers": _schedulers(raw["schedulers"], errs),
        "driver_branch": _driver_branch(raw["driver_branch"], errs),
        "mig_strategy": _choice(CLUSTER, "mig_strategy", raw["mig_strategy"], MIG_STRATEGIES,
                                errs, _WHERE_ALL),
        "reboot_policy": _choice(CLUSTER, "reboot_policy", raw["reboot_policy"], REBOOT_POLICIES,
                                 errs, _WHERE_ALL),
        "apt_mirror": (mirrors := _apt_mirror(raw["apt_mirror"], errs)),
        "apt_proxy": _url(CLUSTER, "apt_proxy", raw["apt_proxy"], errs, proxy=True),
        "nvidia_repo_mirror": (nvidia := _url(CLUSTER, "nvidia_repo_mirror",
                                              raw["nvidia_repo_mirror"], errs)),
        "offline": _offline(raw, mirrors, nvidia, hosts, errs),
        "slurm_partitions": raw["slurm_partitions"],
        "slurm_accounting": _flag("slurm_accounting", raw["slurm_accounting"], errs,
                                  "True runs slurmdbd with MariaDB on the head"),
        "munge_key_rotation": _rotation(raw["munge_key_rotation"], errs),
        "kubernetes": _kubernetes(raw, errs),
        "scheduler_sharing": _scheduler_sharing(raw["scheduler_sharing"], errs),
        "rdma_stack": _choice(CLUSTER, "rdma_stack", raw["rdma_stack"], RDMA_STACKS, errs,
                              _WHERE_ALL),
        "max_fail_percent": _int(CLUSTER, "max_fail_percent", raw["max_fail_percent"], errs, 0,
                                 100, f"set max_fail_percent {_WHERE_ALL}: the percent of "
                                 "hosts that may fail before the whole deploy stops"),
    }


def _cluster_name(value: Any, errs: _Collector) -> str:
    if not isinstance(value, str) or not _CLUSTER_NAME.fullmatch(value):
        errs.add(CLUSTER, "cluster_name", value, "not a valid cluster name",
                 "lower-case letter first, then lower-case letters, digits, '-' or '_' (max 40)",
                 f"set cluster_name {_WHERE_ALL}, e.g. cluster_name = 'gpu1'")
        return "invalid"
    return value


def _schedulers(value: Any, errs: _Collector) -> list[str]:
    if isinstance(value, str):
        errs.add(CLUSTER, "schedulers", value, "must be a list, not a string",
                 f"a list drawn from {list(SCHEDULERS)}", f"write schedulers = [{value!r}]")
        return []
    if not isinstance(value, (list, tuple)):
        errs.add(CLUSTER, "schedulers", value, "must be a list", f"a list drawn from "
                 f"{list(SCHEDULERS)}", f"set schedulers {_WHERE_ALL}, e.g. ['slurm']")
        return []
    good = []
    deployed = [s for s in SCHEDULERS if s not in NOT_DEPLOYED]
    for item in value:
        if isinstance(item, str) and item in NOT_DEPLOYED:
            errs.add(CLUSTER, "schedulers", item, NOT_DEPLOYED[item], ", ".join(deployed),
                     f"use {deployed} in schedulers {_WHERE_ALL}")
        elif isinstance(item, str) and item in SCHEDULERS:
            good.append(item)
        else:
            errs.add(CLUSTER, "schedulers", item, "unknown scheduler", ", ".join(deployed),
                     f"use one of {deployed} in schedulers {_WHERE_ALL}")
    if len(set(good)) != len(good):
        errs.add(CLUSTER, "schedulers", value, "lists a scheduler twice", "each scheduler once",
                 "remove the duplicate")
    return list(dict.fromkeys(good))


def _driver_branch(value: Any, errs: _Collector) -> str:
    branch = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    supported = drivers.supported_branches()
    if branch is None or branch not in drivers.KNOWN_BRANCHES:
        errs.add(CLUSTER, "driver_branch", value, "unknown NVIDIA driver branch",
                 f"known branches {', '.join(drivers.KNOWN_BRANCHES)}; the roles install "
                 f"{', '.join(supported)}", f"set driver_branch = '{supported[0]}' {_WHERE_ALL}")
        return supported[0]
    if branch not in supported:
        errs.add(CLUSTER, "driver_branch", value,
                 "a real branch, but the roles cannot install it on "
                 f"{', '.join(drivers.SUPPORTED_OS)} yet",
                 ", ".join(supported), f"set driver_branch = '{supported[0]}' {_WHERE_ALL}")
    return branch


def _flag(field: str, value: Any, errs: _Collector, meaning: str) -> bool:
    if not isinstance(value, bool):
        errs.add(CLUSTER, field, value, "must be True or False", "True, False",
                 f"set {field} {_WHERE_ALL} ({meaning})")
        return False
    return value


_ROTATION = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def _rotation(value: Any, errs: _Collector) -> str | None:
    """``munge_key_rotation``: None (keep the key), or a token; a new token rotates it once."""
    if value is None:
        return None
    if not isinstance(value, str) or not _ROTATION.fullmatch(value):
        errs.add(CLUSTER, "munge_key_rotation", value, "not a rotation token",
                 "None, or 1-64 letters, digits, '.', '_', ':' or '-' (e.g. '2026-11-22')",
                 f"set munge_key_rotation {_WHERE_ALL} to a new value to rotate the key once")
        return None
    return value


def _choice(host: str, field: str, value: Any, allowed: Sequence[str], errs: _Collector,
            where: str) -> str:
    if value not in allowed:
        errs.add(host, field, value, f"unknown {field.replace('_', ' ')}", ", ".join(allowed),
                 f"set {field} to one of {list(allowed)} {where}")
        return allowed[0]
    return value


def _url(host: str, field: str, value: Any, errs: _Collector, proxy: bool = False) -> str | None:
    if value is None:
        return None
    example = "http://proxy.example:3128" if proxy else "http://mirror.example/debian"
    problem = url_problem(value, need_port=proxy)
    if problem:
        need = ("http(s)://[user:password@]host:port" if proxy else
                "an http(s)://host[:port][/path] URL (no quotes, spaces, query or fragment)")
        errs.add(host, field, value, problem, need,
                 f"set {field} {_WHERE_ALL}, e.g. {example!r}, or None to disable")
        return None
    return value


def _apt_mirror(value: Any, errs: _Collector) -> dict[str, str]:
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
             "'http://mirror/debian' or {'debian': URL, 'ubuntu': URL}", f"fix it {_WHERE_ALL}")
    return {}


def _offline(raw: Mapping[str, Any], mirrors: Mapping[str, str], nvidia: str | None,
             hosts: Sequence[HostInput], errs: _Collector) -> bool:
    """An offline site needs mirrors that are set (judged on the checked values: a mapping of
    None, or a refused URL, is no mirror)."""
    value = raw["offline"]
    if not isinstance(value, bool):
        errs.add(CLUSTER, "offline", value, "must be True or False", "True, False",
                 f"set offline = True {_WHERE_ALL} for sites without internet access")
        return False
    if not value:
        return False
    if not mirrors:
        errs.add(CLUSTER, "apt_mirror", raw["apt_mirror"],
                 "an offline site needs a local apt mirror",
                 "an http(s):// URL", f"set apt_mirror {_WHERE_ALL}, or offline = False")
    has_gpus = any(h.data.get("gpu_model") for h in hosts)
    if has_gpus and not nvidia:
        errs.add(CLUSTER, "nvidia_repo_mirror", raw["nvidia_repo_mirror"],
                 "an offline site with GPUs needs a mirror of NVIDIA's container-toolkit repo",
                 "an http(s):// URL", f"set nvidia_repo_mirror {_WHERE_ALL}, or offline = False")
    return True


# ---------------------------------------------------------------------------- per node

def _node(host: HostInput, cluster: Mapping[str, Any], settings: Mapping[str, Any],
          errs: _Collector) -> NodeSpec:
    gpus = _gpus(host, errs)
    sharing = _sharing(host, gpus, cluster["mig_strategy"], errs)
    _check_branch_drives(host.name, gpus, sharing, cluster["driver_branch"], errs)
    return NodeSpec(
        name=host.name,
        groups=tuple(host.groups),
        gpus=gpus,
        sharing=sharing,
        rdma_nics=(nics := rdma.rdma_nics(host, (soft := rdma.soft_roce(host, errs)), errs,
                                           _check_nested_keys)),
        soft_roce=soft,
        address=_address(host, errs),
        settings=settings,
        vfio=_vfio(host, gpus, nics, errs),
        schedulers=_node_schedulers(host, cluster["schedulers"], errs),
    )


def _check_branch_drives(host: str, gpus: GpuSpec | None, sharing: GpuSharing, branch: str,
                         errs: _Collector) -> None:
    """The cluster's driver branch can drive this node's GPUs (and their MIG, when used)."""
    if gpus is None or not branch.isdigit():
        return
    number, model = int(branch), gpus.model
    problem = branch_problem(model, number)
    if problem is None and sharing.mode == "mig" and number < model.mig_min_branch:
        problem = (f"MIG on {model.key} needs driver branch {model.mig_min_branch} or newer "
                   "(MIG user guide, Deployment Considerations)")
    if problem:
        fits = [b for b in drivers.supported_branches()
                if branch_problem(model, int(b)) is None and int(b) >= (
                    model.mig_min_branch if sharing.mode == "mig" else 0)]
        errs.add(host, "driver_branch", branch, problem, ", ".join(fits) or "none installable",
                 f"set driver_branch {_WHERE_ALL} to one of those, or move the node to a site "
                 "with another branch")


def _address(host: HostInput, errs: _Collector) -> str | None:
    value = host.data.get("node_address")
    if value is not None and node_address({"node_address": value}) is None:
        errs.add(host.name, "node_address", value, "not an IP address",
                 "the node's IPv4 or IPv6 address on the cluster network",
                 f"set node_address {_WHERE_HOST}, or remove it (an IP ssh_hostname is used)")
        return None
    return node_address(host.data)


# ---------------------------------------------------------------------------- role knobs

def _knob_settings(hosts: Sequence[HostInput], knobs: Sequence[Knob],
                   errs: _Collector) -> dict[str, dict[str, Any]]:
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
                     f"set {knob.key} {_WHERE_ALL} and remove the per-host overrides")
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


# ---------------------------------------------------------------------------- partial effects

def _gpudirect_warnings(nodes: Sequence[NodeSpec], stack: str) -> list[SpecWarning]:
    """GPU nodes with RDMA NICs but no GPUDirect RDMA path (gpuinfra.rdma.gpudirect_path):
    valid, but GPU memory then goes through host memory. Said now, not only at deploy."""
    from gpuinfra.knowledge.packages import open_modules_for  # imported here: no import
    from gpuinfra.rdma import gpudirect_path  # cycle through gpuinfra.spec

    found = []
    for node in nodes:
        if not node.rdma_nics or node.gpus is None or node.soft_roce:
            continue
        try:
            open_modules = open_modules_for(node.gpus.model,
                                            node.settings.get("nvidia_driver_open_modules"))
        except GpuinfraError:
            continue  # refused elsewhere
        path = gpudirect_path(stack, open_modules, node.settings.get("rdma_peermem", True))
        if path.path == "none":
            found.append(SpecWarning(node.name, "rdma_nics", f"no GPUDirect RDMA: {path.reason}"))
    return found


def _partial_effects(nodes: Sequence[NodeSpec]) -> list[SpecWarning]:
    """Valid settings that today have only part of their effect: said, never silent."""
    found = []
    for node in nodes:
        slurm, kube = "slurm" in node.schedulers, "kubernetes" in node.schedulers
        if node.sharing.mode == "mps" and kube and not slurm and (
                node.sharing.mps_thread_percentage or node.sharing.mps_pinned_mem_limit):
            found.append(SpecWarning(node.name, "gpu_sharing",
                                     "Kubernetes: the device plugin's MPS daemon gives each of "
                                     "the 'clients' replicas 1/clients of the GPU's memory and "
                                     "SMs; thread_percentage and pinned_mem_limit are applied "
                                     "by the gpu_sharing role's daemon on Slurm nodes only"))
        if node.gpus is not None and node.gpus.model.fabric_services:
            found.append(SpecWarning(node.name, "gpu_model",
                                     f"{node.gpus.model.key}'s NVSwitch fabric also needs "
                                     f"{', '.join(node.gpus.model.fabric_services)} (NVLink "
                                     "subnet manager): no role installs it yet"))
        if node.gpus is not None and node.gpus.topology.needs_nvl_domain:
            found.append(SpecWarning(node.name, "gpu_topology",
                                     "memory shared across the NVLink domain needs the IMEX "
                                     "daemon (nvidia-imex) on every compute tray: no role "
                                     "installs or configures it yet; the fabric registration "
                                     "is checked by `gpuinfra check --smi-q`"))
    return found


def _int(host: str, field: str, value: Any, errs: _Collector, minimum: int, maximum: int,
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


def _gpus(host: HostInput, errs: _Collector) -> GpuSpec | None:
    name, count, topo = (host.data.get(k) for k in ("gpu_model", "gpu_count", "gpu_topology"))
    if name is None:
        for key in ("gpu_count", "gpu_topology", "gpu_sharing"):
            if host.data.get(key) is not None:
                errs.add(host.name, key, host.data[key], "set on a host without gpu_model",
                         "only on hosts with GPUs", f"set gpu_model {_WHERE_HOST}, or remove {key}")
        return None
    model = _model(host.name, name, errs)
    if count is None:
        errs.add(host.name, "gpu_count", None, "required when gpu_model is set",
                 "an integer from 1 to 16", f"set gpu_count {_WHERE_HOST}")
        return None
    count = _int(host.name, "gpu_count", count, errs, 1, 16,
                 f"set gpu_count to the number of GPUs in the host {_WHERE_HOST}")
    profile_name = topo if topo is not None else _default_topology(model)
    if model is None:
        return None
    if profile_name is None:
        errs.add(host.name, "gpu_topology", None,
                 f"required: {model.key} can use NVLink, so say how its GPUs are joined",
                 ", ".join(PROFILES), f"set gpu_topology {_WHERE_HOST} (pcie-only if no bridges)")
        return None
    if not isinstance(profile_name, str) or profile_name not in PROFILES:
        close = get_close_matches(str(profile_name), list(PROFILES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        errs.add(host.name, "gpu_topology", profile_name, f"unknown topology profile{hint}",
                 ", ".join(PROFILES), f"set gpu_topology {_WHERE_HOST}")
        return None
    profile = PROFILES[profile_name]
    if count is None:
        return None
    problem = gpu_count_problem(profile, model, count)
    if problem:
        errs.add(host.name, "gpu_count/gpu_topology", {"gpu_count": count,
                 "gpu_topology": profile_name}, f"the profile cannot hold them: {problem}",
                 _profiles_for(model, count), "fix gpu_count, or pick the profile that matches "
                 "the hardware (see README, 'Topology profiles')")
        return None
    return GpuSpec(model=model, count=count, topology=profile)


def _model(host: str, name: Any, errs: _Collector) -> GpuModel | None:
    model = gpu_model(name) if isinstance(name, str) else None
    if model is None:
        close = suggest_models(name) if isinstance(name, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        errs.add(host, "gpu_model", name, f"unknown GPU model{hint}", ", ".join(GPU_MODELS),
                 f"set gpu_model {_WHERE_HOST} to one of the known models")
    return model


def _default_topology(model: GpuModel | None) -> str | None:
    if model is not None and not model.has_nvlink:
        return "pcie-only"
    return None


def _profiles_for(model: GpuModel, count: int) -> str:
    fits = [p.name for p in PROFILES.values() if gpu_count_problem(p, model, count) is None]
    return f"for {count} x {model.key}: {', '.join(fits) or 'none'}"


# ---------------------------------------------------------------------------- GPU sharing

_SHARING_KEYS = {
    "mig": ("mode", "mig_layout"),
    "mps": ("mode", "clients", "thread_percentage", "pinned_mem_limit"),
    "time-slicing": ("mode", "replicas"),
    "none": ("mode",),
}


# Two sharing modes on one node, said the way the device plugin's documentation says them.
_COMBINED = {
    ("mig", "replicas"): "time-slicing MIG devices is not deployed here: one sharing mode per "
                         "node (and under mig_strategy 'single' the device plugin would replicate "
                         "nvidia.com/gpu across MIG devices of one profile only)",
    ("mps", "mig_layout"): "MPS is not supported on MIG-enabled GPUs (NVIDIA device plugin)",
    ("time-slicing", "mig_layout"): "time-slicing and a MIG layout on one node: one sharing "
                                    "mode per node",
}


def _sharing(host: HostInput, gpus: GpuSpec | None, strategy: str,
             errs: _Collector) -> GpuSharing:
    raw = host.data.get("gpu_sharing")
    if raw is None:
        return GpuSharing()
    if not isinstance(raw, Mapping):
        errs.add(host.name, "gpu_sharing", raw, "must be a dict", "{'mode': 'mig'|'mps'|"
                 "'time-slicing'|'none', ...}", f"fix gpu_sharing {_WHERE_HOST}")
        return GpuSharing()
    mode = _choice(host.name, "gpu_sharing['mode']", raw.get("mode"), SHARING_MODES, errs,
                   _WHERE_HOST)
    # Two modes on one node get the device plugin's own words; other unknown keys, the hint.
    for key in [k for k in raw if (mode, k) in _COMBINED]:
        errs.add(host.name, f"gpu_sharing[{clip(key)}]", raw[key], _COMBINED[(mode, key)],
                 ", ".join(_SHARING_KEYS[mode]),
                 f"remove {clip(key)} from gpu_sharing (one sharing mode per node)")
    _check_nested_keys(host.name, "gpu_sharing",
                       {k: v for k, v in raw.items() if (mode, k) not in _COMBINED},
                       _SHARING_KEYS[mode],
                       f"not a setting of mode {mode!r} (one sharing mode per node)", errs)
    if gpus is None:
        return GpuSharing(mode=mode)
    if mode == "mig":
        return GpuSharing(mode=mode, mig_layout=_mig_layout(host.name, raw.get("mig_layout"),
                                                           gpus, strategy, errs))
    if mode == "mps":
        return _mps(host.name, raw, gpus.model, errs)
    if mode == "time-slicing":
        # The device plugin rejects fewer than 2 replicas: 1 would be no sharing at all.
        replicas = _int(host.name, "gpu_sharing['replicas']", raw.get("replicas"), errs, 2, 128,
                        "set replicas to how many workloads share each GPU (>= 2), or mode 'none'")
        return GpuSharing(mode=mode, replicas=replicas)
    return GpuSharing()


def _mps(host: str, raw: Mapping[str, Any], model: GpuModel, errs: _Collector) -> GpuSharing:
    clients = _int(host, "gpu_sharing['clients']", raw.get("clients"), errs, MPS_MIN_CLIENTS,
                   MPS_MAX_CLIENTS, "MPS serves at most 48 client contexts per GPU (Volta and "
                   "newer): set clients between 2 and 48")
    pct = raw.get("thread_percentage")
    if pct is not None:
        pct = _int(host, "gpu_sharing['thread_percentage']", pct, errs, 1, 100,
                   "set thread_percentage (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) between 1 and 100")
    limit = raw.get("pinned_mem_limit")
    if limit is not None and not (isinstance(limit, str) and _MEM_LIMIT.fullmatch(limit)):
        errs.add(host, "gpu_sharing['pinned_mem_limit']", limit, "malformed memory size",
                 "a size such as '8G' or '512M'", "write the per-client device memory limit")
        limit = None
    if not model.mps:
        errs.add(host, "gpu_sharing['mode']", "mps", f"{model.key} does not support MPS",
                 "mig, time-slicing or none", "pick another sharing mode")
    return GpuSharing(mode="mps", mps_clients=clients, mps_thread_percentage=pct,
                      mps_pinned_mem_limit=limit)


def _mig_layout(host: str, raw: Any, gpus: GpuSpec, strategy: str,
                errs: _Collector) -> tuple[Mapping[str, int], ...]:
    field = "gpu_sharing['mig_layout']"
    model = gpus.model
    if not model.mig_capable:
        errs.add(host, "gpu_sharing['mode']", "mig", f"{model.key} does not support MIG",
                 "MIG GPUs: " + ", ".join(k for k, m in GPU_MODELS.items() if m.mig_capable),
                 "use mode 'mps' or 'time-slicing' on this model")
        return ()
    if isinstance(raw, Mapping):
        layout = [raw] * gpus.count
    elif isinstance(raw, (list, tuple)) and all(isinstance(g, Mapping) for g in raw):
        layout = list(raw)
        if len(layout) != gpus.count:
            errs.add(host, field, raw, f"lists {len(layout)} GPUs but gpu_count is {gpus.count}",
                     "one {profile: count} per GPU, or one dict for every GPU",
                     "give one layout per GPU ({} for a GPU without MIG)")
            return ()
    else:
        errs.add(host, field, raw, "missing or malformed", "{'3g.40gb': 2} (every GPU) or a list "
                 "of such dicts (one per GPU)", f"set gpu_sharing['mig_layout'] {_WHERE_HOST}")
        return ()
    if isinstance(raw, Mapping):  # one layout for every GPU: report its problems once
        _check_gpu_layout(host, field, raw, model, errs)
    else:
        for index, gpu_layout in enumerate(layout):
            _check_gpu_layout(host, f"{field} GPU{index}", gpu_layout, model, errs)
    kinds = {p for g in layout for p in g} | ({"<MIG disabled>"} if any(not g for g in layout)
                                             else set())
    if strategy == "single" and len(kinds) > 1:
        errs.add(host, field, raw, "mixed MIG layout under mig_strategy 'single' (the device "
                 "plugin would advertise MIG-INVALID)", "one profile on every GPU of the node",
                 "one profile on every GPU, or mig_strategy = 'mixed' in group_data/<site>.py")
    return tuple(dict(g) for g in layout)


def _check_gpu_layout(host: str, field: str, layout: Mapping[str, Any], model: GpuModel,
                      errs: _Collector) -> None:
    compute = memory = media = 0
    for profile_name, count in layout.items():
        profile = model.mig_profiles.get(profile_name)
        if profile is None:
            errs.add(host, field, profile_name, f"{model.key} has no MIG profile {profile_name!r}",
                     ", ".join(model.mig_profiles), "use a profile of this GPU model "
                     "(names differ between 40/80/94/141 GB parts)")
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            errs.add(host, field, {profile_name: count}, "instance count must be a positive "
                     "integer", f"1..{profile.max_instances}", "write e.g. {'1g.10gb': 7}")
            continue
        if count > profile.max_instances:
            errs.add(host, field, {profile_name: count}, f"{profile_name} fits at most "
                     f"{profile.max_instances} time(s) on one {model.key}",
                     f"1..{profile.max_instances}", "lower the count")
        compute += profile.compute_slices * count
        memory += profile.memory_slices * count
        media += count if profile.media_extensions else 0
    max_compute, max_memory = model.mig_slices
    if compute > max_compute or memory > max_memory:
        errs.add(host, field, dict(layout), f"needs {compute}/{max_compute} compute and "
                 f"{memory}/{max_memory} memory slices", "a layout within one GPU",
                 "remove instances until the layout fits one GPU")
    if media > 1:
        errs.add(host, field, dict(layout), "more than one '+me' instance (media extensions "
                 "belong to one instance per GPU)", "at most one +me profile per GPU",
                 "keep a single +me instance")


# ---------------------------------------------------------------------------- NICs

def _check_rdma_stack(nodes: Sequence[NodeSpec], stack: str, errs: _Collector) -> None:
    """DOCA-OFED comes from NVIDIA's repository: its signing key must be pinned (the
    fingerprint the operator checked), as every other repository's is."""
    if stack != "doca-ofed":
        return
    for node in nodes:
        if node.rdma_nics and not node.settings.get("rdma_doca_key_fingerprint"):
            errs.add(node.name, "rdma_doca_key_fingerprint", None, "rdma_stack = 'doca-ofed' "
                     "without the fingerprint of the repository's signing key",
                     "the 40 hex digits of GPG-KEY-Mellanox.pub (long key id "
                     "A024F6F0E6D6A281), as `gpg --show-keys` prints them",
                     f"set rdma_doca_key_fingerprint {_WHERE_ALL}, or rdma_stack = 'inbox'")
            return


# ---------------------------------------------------------------------------- hypervisors (VFIO)

_VFIO_KEYS = ("vfio_devices", "vms", "vfio_nvlink")
_VM_KEYS = ("name", "devices", "vcpus", "memory_mib", "vmid", "disk")
_VM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_DISK_PATH = re.compile(r"(/[A-Za-z0-9._+-]+)+")
_ADDRESS = "a PCI address such as '0000:3b:00.0' (lspci -D)"
_DEVICE = f"{_ADDRESS}, or a vendor:device ID such as '10de:2331' (lspci -nn)"
_VM_EXAMPLE = "{'name': 'train1', 'devices': ['0000:3b:00.0'], 'vcpus': 8, 'memory_mib': 65536}"


def _vfio(host: HostInput, gpus: GpuSpec | None, nics: Sequence[RdmaNic],
          errs: _Collector) -> VfioSpec | None:
    """A hypervisor's passthrough: devices (addresses, IDs), VMs, NVLink groups; refused on
    other hosts, and wherever passthrough would take what the host itself uses or split
    GPUs that NVLink joins."""
    raw = {key: host.data.get(key) for key in _VFIO_KEYS}
    if HYPERVISOR_GROUP not in host.groups:
        for key, value in raw.items():
            if value is not None:
                errs.add(host.name, key, value, "VFIO passthrough on a host outside the "
                         f"'{HYPERVISOR_GROUP}' group", f"only on hosts in '{HYPERVISOR_GROUP}'",
                         f"add {host.name} to {HYPERVISOR_GROUP} = [...] in inventory/<site>.py,"
                         f" or remove {key}")
        return None
    addresses, ids = _vfio_devices(host.name, raw["vfio_devices"], errs)
    vms = _vms(host.name, raw["vms"], errs)
    nvlink = _nvlink_groups(host.name, raw["vfio_nvlink"], errs)
    _check_vm_devices(host.name, addresses, ids, vms, errs)
    _check_nvlink_split(host.name, vms, nvlink, errs)
    _check_host_use(host.name, addresses, ids, gpus, nics, errs)
    return VfioSpec(tuple(addresses), tuple(ids), tuple(vms), tuple(nvlink))


def _vfio_devices(host: str, raw: Any, errs: _Collector) -> tuple[list[str], list[str]]:
    if raw is None or (isinstance(raw, (list, tuple)) and not raw):
        errs.add(host, "vfio_devices", raw, f"a host in '{HYPERVISOR_GROUP}' passes nothing "
                 "through", f"a list of {_DEVICE}", f"list the devices its VMs get in "
                 f"vfio_devices {_WHERE_HOST}, or remove it from '{HYPERVISOR_GROUP}'")
        return [], []
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        errs.add(host, "vfio_devices", raw, "must be a list", f"a list of {_DEVICE}",
                 f"write vfio_devices = [{raw!r}]" if isinstance(raw, str) else
                 f"fix vfio_devices {_WHERE_HOST}")
        return [], []
    addresses: list[str] = []
    ids: list[str] = []
    for index, item in enumerate(raw):
        if isinstance(item, str) and PCI_ADDRESS.fullmatch(item):
            addresses.append(normalize_address(item))
        elif isinstance(item, str) and PCI_ID.fullmatch(item):
            ids.append(item.lower())
        else:
            errs.add(host, f"vfio_devices[{index}]", item, "malformed PCI address or "
                     "vendor:device ID", _DEVICE, "copy the address from `lspci -D` or the "
                     "[vendor:device] from `lspci -nn`")
    for value, count in Counter(addresses + ids).items():
        if count > 1:
            errs.add(host, "vfio_devices", value, "listed twice", "each device once",
                     "remove the duplicate")
    return list(dict.fromkeys(addresses)), list(dict.fromkeys(ids))


def _vms(host: str, raw: Any, errs: _Collector) -> list[VmSpec]:
    if raw is None:
        return []
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        errs.add(host, "vms", raw, "must be a list of dicts", f"[{_VM_EXAMPLE}]",
                 f"fix vms {_WHERE_HOST}")
        return []
    vms = [vm for vm in (_vm(host, i, item, errs) for i, item in enumerate(raw)) if vm]
    for what, values in (("name", [vm.name for vm in vms]),
                         ("vmid", [vm.vmid for vm in vms if vm.vmid is not None])):
        for value, count in Counter(values).items():
            if count > 1:
                errs.add(host, "vms", value, f"two VMs with the {what} {value!r}",
                         f"a unique {what} per VM", "rename or renumber one of them")
    owner: dict[str, str] = {}
    for vm in vms:
        for device in vm.devices:
            other = owner.setdefault(slot_of(device), vm.name)
            if other != vm.name:
                errs.add(host, "vms", device, f"the device is in two VMs: {other!r} and "
                         f"{vm.name!r}", "each device in one VM at most",
                         f"remove {device} from one of the two VMs")
    return vms


def _vm(host: str, index: int, item: Any, errs: _Collector) -> VmSpec | None:
    field = f"vms[{index}]"
    if not isinstance(item, Mapping):
        errs.add(host, field, item, "must be a dict", _VM_EXAMPLE, "fix the entry")
        return None
    ok = True
    for key in item:
        if key not in _VM_KEYS:
            close = get_close_matches(str(key), _VM_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            errs.add(host, f"{field}[{key!r}]", item[key], f"unknown VM setting{hint}",
                     ", ".join(_VM_KEYS), f"remove or rename {key!r}")
            ok = False
    name = item.get("name")
    if not isinstance(name, str) or not _VM_NAME.fullmatch(name):
        errs.add(host, f"{field}['name']", name, "missing or malformed VM name",
                 "letters, digits, '_', '.' and '-', a letter or digit first (max 64)",
                 "name the VM as libvirt/Proxmox should know it")
        ok = False
    devices = item.get("devices")
    if isinstance(devices, (str, bytes)) or not isinstance(devices, (list, tuple)) or not devices:
        errs.add(host, f"{field}['devices']", devices, "missing or empty device list",
                 f"a non-empty list of {_ADDRESS}", "list the PCI addresses the VM gets")
        devices, ok = [], False
    good = []
    for device in devices:
        if isinstance(device, str) and PCI_ADDRESS.fullmatch(device):
            good.append(normalize_address(device))
        else:
            problem = "a vendor:device ID: a VM gets devices by address (libvirt hostdev, qm " \
                "hostpci)" if isinstance(device, str) and PCI_ID.fullmatch(device) else \
                "malformed PCI address"
            errs.add(host, f"{field}['devices']", device, problem, _ADDRESS,
                     "copy the address from `lspci -D`")
            ok = False
    vcpus = _int(host, f"{field}['vcpus']", item.get("vcpus", 4), errs, 1, 1024,
                 "set the VM's virtual CPUs")
    memory = _int(host, f"{field}['memory_mib']", item.get("memory_mib", 16384), errs, 256,
                  2**24, "set the VM's memory in MiB")
    vmid = item.get("vmid")
    if vmid is not None:
        vmid = _int(host, f"{field}['vmid']", vmid, errs, 100, 999999999,
                    "set the Proxmox VE VM id (qm list), or remove vmid")
    disk = item.get("disk")
    if disk is not None and not (isinstance(disk, str) and _DISK_PATH.fullmatch(disk)):
        errs.add(host, f"{field}['disk']", disk, "not an absolute path",
                 "the path of the VM's disk image, e.g. '/var/lib/libvirt/images/train1.qcow2'",
                 "fix the path, or remove disk")
        ok = False
    if not ok or None in (vcpus, memory) or (item.get("vmid") is not None and vmid is None):
        return None
    return VmSpec(name, tuple(dict.fromkeys(good)), vcpus, memory, vmid, disk)


def _nvlink_groups(host: str, raw: Any, errs: _Collector) -> list[NvlinkGroup]:
    if raw is None:
        return []
    example = "[{'gpus': ['0000:3b:00.0', '0000:3c:00.0'], 'fabric': 'bridge'}]"
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)):
        errs.add(host, "vfio_nvlink", raw, "must be a list of dicts", example,
                 f"fix vfio_nvlink {_WHERE_HOST}")
        return []
    groups = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw):
        field = f"vfio_nvlink[{index}]"
        gpus = item.get("gpus") if isinstance(item, Mapping) else None
        fabric = item.get("fabric", "bridge") if isinstance(item, Mapping) else None
        extra = sorted(set(item) - {"gpus", "fabric"}) if isinstance(item, Mapping) else []
        if not isinstance(item, Mapping) or extra:
            errs.add(host, field, item, "must be a dict of 'gpus' and 'fabric'", example,
                     "fix the entry")
            continue
        if fabric not in NVLINK_FABRICS:
            errs.add(host, f"{field}['fabric']", fabric, "unknown NVLink fabric",
                     ", ".join(NVLINK_FABRICS), "'bridge' for bridged or directly linked GPUs,"
                     " 'nvswitch' for an NVSwitch board")
            continue
        if isinstance(gpus, (str, bytes)) or not isinstance(gpus, (list, tuple)) or \
                len(gpus) < 2 or not all(isinstance(g, str) and PCI_ADDRESS.fullmatch(g)
                                         for g in gpus):
            errs.add(host, f"{field}['gpus']", gpus, "needs two or more GPU addresses",
                     f"a list of {_ADDRESS}", "list the GPUs NVLink joins")
            continue
        addresses = tuple(normalize_address(g) for g in gpus)
        for gpu in addresses:
            if gpu in seen:
                errs.add(host, f"{field}['gpus']", gpu, f"already in vfio_nvlink[{seen[gpu]}]",
                         "each GPU in one NVLink group", "merge the two groups")
            seen.setdefault(gpu, index)
        groups.append(NvlinkGroup(addresses, fabric))
    return groups


def _check_vm_devices(host: str, addresses: Sequence[str], ids: Sequence[str],
                      vms: Sequence[VmSpec], errs: _Collector) -> None:
    """Every VM device is passed through: listed (the card, any function), or left to the
    deploy to match against the listed IDs on the hardware."""
    slots = {slot_of(a) for a in addresses}
    for vm in vms:
        for device in vm.devices:
            if slot_of(device) not in slots and not ids:
                errs.add(host, "vms", device, f"VM {vm.name!r} gets a device vfio_devices does "
                         "not pass through", "devices listed in vfio_devices",
                         f"add {device!r} to vfio_devices")


def _check_nvlink_split(host: str, vms: Sequence[VmSpec], groups: Sequence[NvlinkGroup],
                        errs: _Collector) -> None:
    """GPUs joined by NVLink go to the same VM, or the guest sees no NV# link to its peer
    (docs/hardware-reference.md 4); part of an NVSwitch board needs Fabric Manager's
    shared-NVSwitch mode, which no role deploys."""
    owner = {slot_of(d): vm.name for vm in vms for d in vm.devices}
    for index, group in enumerate(groups):
        owners = [owner.get(slot_of(gpu)) for gpu in group.gpus]
        if len(set(owners)) == 1:
            continue
        where = ", ".join(f"{gpu} ({f'VM {o!r}' if o else 'no VM'})"
                          for gpu, o in zip(group.gpus, owners, strict=True))
        if group.fabric == "nvswitch":
            errs.add(host, f"vfio_nvlink[{index}]", list(group.gpus),
                     f"part of an NVSwitch board goes to a VM ({where}): that needs Fabric "
                     "Manager's shared-NVSwitch mode (a service VM driving the switches), "
                     "which gpuinfra does not deploy", "the whole board in one VM",
                     f"give all {len(group.gpus)} GPUs of the board (and its NVSwitches) to "
                     "one VM")
        else:
            errs.add(host, f"vfio_nvlink[{index}]", list(group.gpus),
                     f"GPUs joined by NVLink are split ({where}): a guest sees no NV# link to "
                     "a peer outside it", "every GPU of an NVLink group in the same VM",
                     "give the GPUs of the group to one VM")


def _check_host_use(host: str, addresses: Sequence[str], ids: Sequence[str],
                    gpus: GpuSpec | None, nics: Sequence[RdmaNic], errs: _Collector) -> None:
    """Nothing the host itself counts (its GPUs for the driver and the schedulers, its RDMA
    NICs) is passed through."""
    if gpus is not None:
        model_ids = {f"10de:{pid}" for pid in gpus.model.pci_ids}
        for pci_id in ids:
            if pci_id in model_ids:
                errs.add(host, "vfio_devices", pci_id, f"vfio-pci ids={pci_id} claims every "
                         f"{gpus.model.key} of the host, including the gpu_count = "
                         f"{gpus.count} GPUs its driver and Slurm/Kubernetes count",
                         "the GPUs that go to VMs by PCI address",
                         "list those GPUs by address (the rest stay the host's), or remove "
                         "gpu_model/gpu_count when every GPU goes to VMs")
    slots = {slot_of(a) for a in addresses}
    for nic in nics:
        if nic.pci and slot_of(normalize_address(nic.pci)) in slots:
            errs.add(host, "vfio_devices", nic.pci, f"the host's RDMA NIC {nic.name} is also "
                     "passed through", "devices the host does not use itself",
                     f"remove it from vfio_devices, or {nic.name} from rdma_nics")


# ---------------------------------------------------------------------------- schedulers

def _scheduler_sharing(value: Any, errs: _Collector) -> str | None:
    if value is None or value in SCHEDULER_SHARING:
        return value
    errs.add(CLUSTER, "scheduler_sharing", value, "unknown way of sharing a worker",
             "None (a worker belongs to one scheduler), or 'drain' (it runs both; the "
             "operator drains it in one before the other uses it)",
             f"set scheduler_sharing {_WHERE_ALL}, or give each worker node_schedulers")
    return None


def _node_schedulers(host: HostInput, site: Sequence[str], errs: _Collector) -> tuple[str, ...]:
    raw = host.data.get("node_schedulers")
    if raw is None:
        return tuple(site)
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)) or not raw:
        errs.add(host.name, "node_schedulers", raw, "must be a non-empty list",
                 f"a list drawn from the site's schedulers {list(site)}",
                 f"set node_schedulers {_WHERE_HOST}, e.g. ['kubernetes']")
        return tuple(site)
    bad = [s for s in raw if s not in site]
    if bad:
        errs.add(host.name, "node_schedulers", raw, f"names {bad}, which the site does not run",
                 f"a list drawn from the site's schedulers {list(site)}",
                 f"add {bad} to schedulers {_WHERE_ALL}, or remove them from node_schedulers")
    return tuple(s for s in site if s in raw)


def _check_shared_workers(nodes: Sequence[NodeSpec], sharing: str | None,
                          errs: _Collector) -> None:
    """A worker in Slurm and Kubernetes at once: both would hand out the same GPUs."""
    if sharing is not None:
        return
    for node in nodes:
        if node.is_worker and {"slurm", "kubernetes"} <= set(node.schedulers):
            errs.add(node.name, "node_schedulers", list(node.schedulers),
                     "this worker is in Slurm and in Kubernetes: both would hand out its GPUs "
                     "to different jobs at once",
                     "one scheduler per worker, unless the site says how they share it",
                     "set node_schedulers = ['slurm'] or ['kubernetes'] for the host, or "
                     f"scheduler_sharing = 'drain' {_WHERE_ALL} (you drain it in one scheduler "
                     "before the other uses it)")


# ---------------------------------------------------------------------------- Kubernetes

def _kubernetes(raw: Mapping[str, Any], errs: _Collector) -> KubernetesSpec:
    version = raw["kubernetes_version"]
    try:
        k8s.release(version)
    except GpuinfraError as exc:
        errs.add(CLUSTER, "kubernetes_version", version, str(exc),
                 ", ".join(f"{m}.x" for m in k8s.SUPPORTED_MINORS) + f" (e.g. "
                 f"{k8s.DEFAULT_VERSION!r}: Kubernetes 1.36+ needs containerd 2, which Debian 12 "
                 "and Ubuntu 22.04/24.04 do not ship)",
                 f"set kubernetes_version {_WHERE_ALL}")
        version = k8s.DEFAULT_VERSION
    cni = raw["kubernetes_cni"]
    if cni not in k8s.CNIS:
        errs.add(CLUSTER, "kubernetes_cni", cni, "not a CNI the kubernetes role deploys",
                 ", ".join(k8s.CNIS), f"set kubernetes_cni {_WHERE_ALL}")
        cni = k8s.DEFAULT_CNI
    plugin = raw["kubernetes_device_plugin_version"]
    if not isinstance(plugin, str) or not k8s.DEVICE_PLUGIN_VERSION.fullmatch(plugin):
        errs.add(CLUSTER, "kubernetes_device_plugin_version", plugin,
                 "not a device plugin release the role's config format suits",
                 "v0.15.0 or later 0.x, written with its 'v' (MPS sharing and GPU Feature "
                 f"Discovery are in one image since v0.15.0), e.g. "
                 f"{k8s.DEFAULT_DEVICE_PLUGIN_VERSION!r}",
                 f"set kubernetes_device_plugin_version {_WHERE_ALL}")
        plugin = k8s.DEFAULT_DEVICE_PLUGIN_VERSION
    repository = raw["kubernetes_image_repository"]
    if not isinstance(repository, str) or not k8s.IMAGE_REPOSITORY.fullmatch(repository):
        errs.add(CLUSTER, "kubernetes_image_repository", repository,
                 "not an image repository", "host[:port][/path], e.g. 'registry.k8s.io' or "
                 "'registry.example:5000/k8s' (the site's mirror of registry.k8s.io)",
                 f"set kubernetes_image_repository {_WHERE_ALL}")
        repository = k8s.DEFAULT_IMAGE_REPOSITORY
    return KubernetesSpec(
        version=version, image_repository=repository,
        pod_cidr=_cidr("kubernetes_pod_cidr", raw["kubernetes_pod_cidr"], errs),
        service_cidr=_cidr("kubernetes_service_cidr", raw["kubernetes_service_cidr"], errs),
        cni=cni, device_plugin_version=plugin)


def _cidr(field: str, value: Any, errs: _Collector) -> str:
    """The network ``value`` as text ("" after reporting it)."""
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_network(value, strict=True))
        except ValueError as exc:
            problem = f"not a network address: {exc}"
    else:
        problem = "must be a string"
    errs.add(CLUSTER, field, value, problem,
             "a CIDR whose host bits are zero, e.g. '10.244.0.0/16'",
             f"set {field} {_WHERE_ALL}")
    return ""


def _check_kubernetes(nodes: Sequence[NodeSpec], spec: KubernetesSpec, errs: _Collector) -> None:
    """Networks kubeadm and the CNI can use, apart from each other and from the nodes."""
    members = [n for n in nodes if "kubernetes" in n.schedulers]
    heads = [n for n in members if n.is_head]
    if len(heads) == 1 and heads[0].address is None:
        errs.add(heads[0].name, "node_address", None, "the control plane needs its address "
                 "(the API server advertises it; workers join it)",
                 "the head's IP on the cluster network",
                 f"set node_address {_WHERE_HOST} (or an IP ssh_hostname)")
    if not spec.pod_cidr or not spec.service_cidr:
        return  # already reported
    pods, services = ipaddress.ip_network(spec.pod_cidr), ipaddress.ip_network(spec.service_cidr)
    where = f"set kubernetes_pod_cidr / kubernetes_service_cidr {_WHERE_ALL}"
    if pods.overlaps(services):
        errs.add(CLUSTER, "kubernetes_pod_cidr/kubernetes_service_cidr",
                 [spec.pod_cidr, spec.service_cidr], "the pod and service networks overlap",
                 "two disjoint networks (kubeadm's defaults: 10.244.0.0/16 and 10.96.0.0/12)",
                 where)
    for node in nodes:
        if node.address is None:
            continue
        address = ipaddress.ip_address(node.address)
        for field, net in (("kubernetes_pod_cidr", pods), ("kubernetes_service_cidr", services)):
            if address in net:
                errs.add(node.name, field, str(net), f"contains the node's address "
                         f"{node.address}: traffic to the node would be routed into the "
                         "cluster network", "a network apart from every node's address",
                         f"move {field} {_WHERE_ALL} away from the hosts' network")
    service_bits = services.max_prefixlen - services.prefixlen
    if service_bits > k8s.MAX_SERVICE_SUBNET_BITS or services.num_addresses < \
            k8s.MIN_SERVICE_ADDRESSES:
        errs.add(CLUSTER, "kubernetes_service_cidr", spec.service_cidr,
                 "kubeadm refuses this size of service network",
                 f"at most 2^{k8s.MAX_SERVICE_SUBNET_BITS} addresses (/12 for IPv4) and at "
                 f"least {k8s.MIN_SERVICE_ADDRESSES} (e.g. '10.96.0.0/12')", where)
    _check_pod_cidr_for_cni(pods, spec, len(members), errs)


def _check_pod_cidr_for_cni(pods: ipaddress.IPv4Network | ipaddress.IPv6Network,
                            spec: KubernetesSpec, members: int, errs: _Collector) -> None:
    cni = k8s.CNIS[spec.cni]
    fix = f"set kubernetes_pod_cidr {_WHERE_ALL}, e.g. '10.244.0.0/16'"
    if cni.ipv4_only and pods.version != 4:
        errs.add(CLUSTER, "kubernetes_pod_cidr", spec.pod_cidr,
                 f"{cni.name} as deployed here uses IPv4 pod networks", "an IPv4 CIDR", fix)
        return
    if pods.prefixlen >= cni.subnet_len or \
            cni.subnet_len - pods.prefixlen > k8s.NODE_MASK_MAX_DIFF:
        errs.add(CLUSTER, "kubernetes_pod_cidr", spec.pod_cidr,
                 f"{cni.name} gives every node a /{cni.subnet_len} out of the pod network: it "
                 f"must be larger than /{cni.subnet_len} (and kubeadm allows at most "
                 f"{k8s.NODE_MASK_MAX_DIFF} bits between the two)",
                 f"a prefix from /{cni.subnet_len - k8s.NODE_MASK_MAX_DIFF} to "
                 f"/{cni.subnet_len - 1}", fix)
        return
    subnets = 2 ** (cni.subnet_len - pods.prefixlen)
    if subnets < members:
        errs.add(CLUSTER, "kubernetes_pod_cidr", spec.pod_cidr,
                 f"holds {subnets} node subnets (/{cni.subnet_len}) for {members} Kubernetes "
                 "nodes", f"a pod network with a /{cni.subnet_len} for every node", fix)


# ---------------------------------------------------------------------------- roles, partitions

def _check_heads(nodes: Sequence[NodeSpec], schedulers: Sequence[str], errs: _Collector) -> None:
    heads = [n.name for n in nodes if n.is_head]
    if "slurm" in schedulers and len(heads) != 1:
        problem = "no Slurm controller" if not heads else f"{len(heads)} Slurm controllers"
        errs.add(CLUSTER, f"group '{HEAD_GROUP}'", heads, problem,
                 "exactly one host in the 'head' group (it runs slurmctld)",
                 "list exactly one host in head = [...] in inventory/<site>.py")
    if "slurm" in schedulers and not any(n.is_worker and "slurm" in n.schedulers
                                         for n in nodes):
        errs.add(CLUSTER, f"group '{WORKER_GROUP}'", [], "no Slurm worker: slurmd would run "
                 "nowhere and no job could start", "at least one host in the 'workers' group "
                 "whose node_schedulers include 'slurm'",
                 "list the compute nodes in workers = [...] in inventory/<site>.py")
    if "kubernetes" in schedulers and len(heads) != 1:
        problem = "no Kubernetes control plane" if not heads else \
            f"{len(heads)} control-plane hosts (the kubernetes role makes one, no HA yet)"
        errs.add(CLUSTER, f"group '{HEAD_GROUP}'", heads, problem,
                 "exactly one host in the 'head' group (it runs the control plane)",
                 "list exactly one host in head = [...] in inventory/<site>.py")


def _partitions(cluster: Mapping[str, Any], nodes: Sequence[NodeSpec],
                errs: _Collector) -> tuple[Partition, ...]:
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
                 "[{'name': 'gpu', 'nodes': [...], 'default': True, 'gpu': True}]",
                 f"fix slurm_partitions {_WHERE_ALL}")
        return ()
    if not raw:
        errs.add(CLUSTER, "slurm_partitions", raw, "no partition: Slurm would accept no job",
                 "at least one partition, or None for one partition of every worker",
                 f"list the partitions {_WHERE_ALL}, or remove slurm_partitions")
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


_PARTITION_KEYS = ("name", "nodes", "default", "gpu")


def _partition(index: int, item: Any, nodes: Mapping[str, NodeSpec],
               errs: _Collector) -> Partition | None:
    field = f"slurm_partitions[{index}]"
    if not isinstance(item, Mapping):
        errs.add(CLUSTER, field, item, "must be a dict", "{'name': ..., 'nodes': [...]}",
                 "fix the entry")
        return None
    _check_nested_keys(CLUSTER, field, item, _PARTITION_KEYS, "unknown partition setting",
                       errs)
    name, members = item.get("name"), item.get("nodes")
    if not isinstance(name, str) or not _PARTITION.fullmatch(name):
        errs.add(CLUSTER, f"{field}['name']", name, "missing or malformed partition name",
                 "letters, digits, '-' and '_'", "name the partition")
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
    return Partition(name, tuple(members), bool(item.get("default", False)), bool(gpu)) \
        if ok else None


# ---------------------------------------------------------------------------- reporting

def format_errors(errors: Sequence[SpecError], source: str = "the cluster spec") -> str:
    """Every spec problem, one block each: host, field, value, problem, allowed, fix."""
    lines = [f"gpuinfra: {source} has {len(errors)} problem(s); no host was touched."]
    for err in errors:
        lines.append(f"  [{err.host}] {err.field} = {clip(err.value)}: {err.problem}")
        lines.append(f"      allowed: {err.allowed}")
        lines.append(f"      fix:     {err.fix}")
    return "\n".join(lines)


def format_warnings(warnings: Sequence[SpecWarning]) -> str:
    """Settings that are valid but have only part of their effect today, one line each."""
    return "\n".join(f"gpuinfra: warning: [{w.host}] {w.field}: {w.message}" for w in warnings)


__all__ = ["SpecError", "SpecInvalid", "build_cluster", "validate", "HOST_KEYS",
           "format_errors", "format_warnings"]
