"""Validate pyinfra host data against the cluster spec, collecting every problem at once.

``build_cluster(hosts)`` returns a :class:`ClusterSpec` or raises :class:`SpecInvalid` holding
one :class:`SpecError` per problem: host, field, bad value, what is allowed and how to fix it.
Nothing here raises anything else on bad data: wrong types are problems, not crashes.
Keys with more to check have their own modules (``gpus``, ``sharing``, ``rdma``, ``vfio``,
``kubernetes``; warnings in ``effects``), on what ``checks`` shares (errors, value checks).
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from difflib import get_close_matches
from typing import Any

from gpuinfra.knowledge import drivers
from gpuinfra.platforms import node_address
from gpuinfra.spec import rdma
from gpuinfra.spec.checks import (
    CLUSTER,
    WHERE_ALL,
    WHERE_HOST,
    Collector,
    SpecError,
    SpecInvalid,
    check_nested_keys,
    choice_value,
    int_value,
)
from gpuinfra.spec.cross import check_cross_keys, merge_repeated
from gpuinfra.spec.effects import driver_branch_warnings, gpudirect_warnings, partial_effects
from gpuinfra.spec.gpus import check_branch_drives, gpu_spec
from gpuinfra.spec.knobs import Knob
from gpuinfra.spec.kubernetes import check_kubernetes, kubernetes_spec
from gpuinfra.spec.model import (
    CLUSTER_KEYS,
    HEAD_GROUP,
    HOST_KEYS,
    MIG_STRATEGIES,
    NOT_DEPLOYED,
    RDMA_STACKS,
    REBOOT_POLICIES,
    ROLE_GROUPS,
    SCHEDULER_SHARING,
    SCHEDULERS,
    SPEC_KEYS,
    WORKER_GROUP,
    ClusterSpec,
    HostInput,
    NodeSpec,
    Partition,
    SpecWarning,
)
from gpuinfra.spec.partitions import PARTITION_KEYS, partition_settings
from gpuinfra.spec.rules import clip, url_problem
from gpuinfra.spec.sharing import gpu_sharing
from gpuinfra.spec.vfio import check_acs_kept, vfio_spec
from gpuinfra.vfio import LIBVIRT_IMAGES

# Names are matched whole (fullmatch): "$" would accept a trailing newline.
_CLUSTER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9-]+)*")
_PARTITION = re.compile(r"[A-Za-z0-9_-]{1,64}")


def validate(hosts: Sequence[HostInput], duplicate_names: Sequence[str] = (),
             knobs: Sequence[Knob] = ()) -> list[SpecError]:
    """Every problem of the spec made of ``hosts`` (empty when it is valid)."""
    try:
        build_cluster(hosts, duplicate_names, knobs)
    except SpecInvalid as exc:
        return exc.errors
    return []


def build_cluster(hosts: Sequence[HostInput], duplicate_names: Sequence[str] = (),
                  knobs: Sequence[Knob] = (), *, groups: Mapping[str, str] | None = None,
                  only_roles: Sequence[str] | None = None,
                  default_schedulers: Sequence[str] | None = None) -> ClusterSpec:
    """The typed cluster spec for ``hosts``; raises :class:`SpecInvalid` listing all problems.

    ``duplicate_names`` are host names the inventory lists more than once (the loader sees the
    raw inventory; pyinfra itself would silently merge them). ``knobs`` are the roles' data
    keys (roles/<role>/defaults.py): each host's values are checked and kept in
    ``NodeSpec.settings``; a key close to a spec key or a knob is reported as a typo.

    ``groups`` names the operator's own groups for gpuinfra's (``{"head": "slurmctld",
    "workers": "compute"}``; default: the groups are called head, workers, hypervisors).
    ``only_roles``: the deploy runs only these roles (another project's deploy): the typo
    check then covers only keys with these roles' prefixes (and spec keys written in another
    case), the operator's own groups are not judged, and ``default_schedulers`` replaces the
    default of ``schedulers``.
    """
    errs = Collector()
    hosts = _with_role_groups(hosts, groups, errs)
    prefixes = None if only_roles is None else tuple(f"{r}_" for r in only_roles)
    for name in duplicate_names:
        errs.add(name, "inventory", name, "this host name is listed more than once",
                 "each host once per group", "remove the duplicate entry (or rename one host)")
    if not hosts:
        errs.add(CLUSTER, "inventory", [], "the inventory has no hosts",
                 "at least one host in the 'head' group", "add hosts to inventory/<site>.py")
        raise SpecInvalid(errs.errors)
    known = (*SPEC_KEYS, *(k.key for k in knobs))
    for host in hosts:
        _check_unknown_keys(host, known, errs, prefixes)
        _check_host_name(host, errs)
        if only_roles is None:
            _check_groups(host, errs)
    cluster = _cluster_values(hosts, errs, default_schedulers)
    settings = _knob_settings(hosts, knobs, errs)
    nodes = tuple(_node(host, cluster, settings[host.name], errs) for host in hosts)
    _check_short_names(nodes, errs)
    _check_unique_addresses(nodes, errs)
    _check_heads(nodes, cluster["schedulers"], errs)
    _check_shared_workers(nodes, cluster["scheduler_sharing"], errs)
    if "kubernetes" in cluster["schedulers"]:
        check_kubernetes(nodes, cluster["kubernetes"], errs)
    partitions = _partitions(cluster, nodes, errs)
    rdma.check_stack(nodes, cluster["rdma_stack"], errs)
    check_acs_kept(nodes, errs)
    check_cross_keys(nodes, cluster["schedulers"], errs, cluster["slurm_accounting"])
    if errs.errors:
        raise SpecInvalid(merge_repeated(errs.errors, [h.name for h in hosts]))
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
        warnings=tuple(driver_branch_warnings(cluster["driver_branch"]) + partial_effects(nodes)
                       + gpudirect_warnings(nodes, cluster["rdma_stack"])),
    )


# ---------------------------------------------------------------------------- keys and names

def _with_role_groups(hosts: Sequence[HostInput], groups: Mapping[str, str] | None,
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
    return [HostInput(h.name, (*h.groups, *(o for o, g in mapping.items()
                                           if g in h.groups and o not in h.groups)), h.data)
            for h in hosts]


def _check_unknown_keys(host: HostInput, known: Sequence[str], errs: Collector,
                        prefixes: tuple[str, ...] | None = None) -> None:
    """A key that is almost a known key (in any case) is a typo that would silently fall back
    to a default: a spec key or a role knob written ``GPU_MODEL`` or ``..._precent``.

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
            [lowered[c] for c in get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.8)]
        if close:
            errs.add(host.name, key, host.data[key], f"unknown key (did you mean {close[0]!r}?)",
                     "the spec keys (docs/spec.md) and each role's keys "
                     "(roles/<role>/defaults.py)", f"rename {key!r} to {close[0]!r}")


def _check_groups(host: HostInput, errs: Collector) -> None:
    """A group named almost like a role group (``worker``) deploys nothing: a typo."""
    for group in host.groups:
        if group in ROLE_GROUPS or not isinstance(group, str):
            continue
        close = get_close_matches(group.lower(), ROLE_GROUPS, n=1, cutoff=0.75)
        if close:
            errs.add(host.name, "group", group, f"unknown group (did you mean {close[0]!r}?)",
                     ", ".join(ROLE_GROUPS) + " (other groups are yours, for group_data)",
                     f"rename the group {group!r} to {close[0]!r} in inventory/<site>.py")


def _check_host_name(host: HostInput, errs: Collector) -> None:
    if not isinstance(host.name, str) or not _HOST_NAME.fullmatch(host.name):
        errs.add(host.name, "host name", host.name, "not a valid host name",
                 "letters, digits and '-', dot-separated (RFC 1123)",
                 "rename the host in the inventory; put its address in ssh_hostname")


def _check_short_names(nodes: Sequence[NodeSpec], errs: Collector) -> None:
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

def _cluster_values(hosts: Sequence[HostInput], errs: Collector,
                    default_schedulers: Sequence[str] | None = None) -> dict[str, Any]:
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


# ---------------------------------------------------------------------------- per node

def _node(host: HostInput, cluster: Mapping[str, Any], settings: Mapping[str, Any],
          errs: Collector) -> NodeSpec:
    gpus, known = gpu_spec(host, errs)
    sharing = gpu_sharing(host, known, cluster["mig_strategy"], errs)
    check_branch_drives(host.name, known, sharing, cluster["driver_branch"], errs)
    return NodeSpec(
        name=host.name,
        groups=tuple(host.groups),
        gpus=gpus,
        sharing=sharing,
        rdma_nics=(nics := rdma.rdma_nics(host, (soft := rdma.soft_roce(host, errs)), errs)),
        soft_roce=soft,
        address=_address(host, errs),
        settings=settings,
        vfio=vfio_spec(host, gpus, nics, errs,
                       settings.get("vfio_image_dir", LIBVIRT_IMAGES)),
        schedulers=_node_schedulers(host, cluster["schedulers"], errs),
    )


def _address(host: HostInput, errs: Collector) -> str | None:
    value = host.data.get("node_address")
    if value is not None and node_address({"node_address": value}) is None:
        errs.add(host.name, "node_address", value, "not an IP address",
                 "the node's IPv4 or IPv6 address on the cluster network",
                 f"set node_address {WHERE_HOST}, or remove it (an IP ssh_hostname is used)")
        return None
    address = node_address(host.data)
    problem = _not_a_node_address(address)
    if address is not None and problem:
        field = "node_address" if value is not None else "ssh_hostname"
        errs.add(host.name, field, host.data.get(field), problem,
                 "one unicast address of this node on the cluster network",
                 f"set node_address {WHERE_HOST} to the node's own address")
        return None
    return address


def _not_a_node_address(address: str | None) -> str | None:
    """Why ``address`` cannot be one node's address on the cluster network (every daemon of the
    node listens there, /etc/hosts and slurm.conf name it): None when it can."""
    if address is None:
        return None
    ip = ipaddress.ip_address(address)
    if ip.is_unspecified:
        return "the unspecified address: every daemon would listen on every interface"
    if ip.is_loopback:
        return "a loopback address: no other node reaches it"
    if ip.is_multicast:
        return "a multicast address, not one node's"
    if isinstance(ip, ipaddress.IPv4Address) and ip == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address, not one node's"
    if ip.is_link_local:
        return "a link-local address: valid on one link only, and not in /etc/hosts"
    return None


def _check_unique_addresses(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """Two hosts at one address would be one machine deployed as two (and /etc/hosts would
    name it twice)."""
    by_address: dict[str, list[str]] = {}
    for node in nodes:
        if node.address is not None:
            by_address.setdefault(node.address, []).append(node.name)
    for address, names in by_address.items():
        if len(names) > 1:
            errs.add(names[0], "node_address", address,
                     f"{len(names)} hosts have this address: {', '.join(names)}",
                     "one address per host", "give each host its own node_address "
                     f"{WHERE_HOST}")


# ---------------------------------------------------------------------------- role knobs

def _knob_settings(hosts: Sequence[HostInput], knobs: Sequence[Knob],
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


# ---------------------------------------------------------------------------- schedulers

def _scheduler_sharing(value: Any, errs: Collector) -> str | None:
    if value is None or value in SCHEDULER_SHARING:
        return value
    errs.add(CLUSTER, "scheduler_sharing", value, "unknown way of sharing a worker",
             "None (a worker belongs to one scheduler), or 'drain' (it runs both; the "
             "operator drains it in one before the other uses it)",
             f"set scheduler_sharing {WHERE_ALL}, or give each worker node_schedulers")
    return None


def _node_schedulers(host: HostInput, site: Sequence[str], errs: Collector) -> tuple[str, ...]:
    raw = host.data.get("node_schedulers")
    if raw is None:
        return tuple(site)
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)) or not raw:
        errs.add(host.name, "node_schedulers", raw, "must be a non-empty list",
                 f"a list drawn from the site's schedulers {list(site)}",
                 f"set node_schedulers {WHERE_HOST}, e.g. ['kubernetes']")
        return tuple(site)
    bad = [s for s in raw if s not in site]
    if bad:
        errs.add(host.name, "node_schedulers", raw, f"names {bad}, which the site does not run",
                 f"a list drawn from the site's schedulers {list(site)}",
                 f"add {bad} to schedulers {WHERE_ALL}, or remove them from node_schedulers")
    return tuple(s for s in site if s in raw)


def _check_shared_workers(nodes: Sequence[NodeSpec], sharing: str | None,
                          errs: Collector) -> None:
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
                     f"scheduler_sharing = 'drain' {WHERE_ALL} (you drain it in one scheduler "
                     "before the other uses it)")

# ---------------------------------------------------------------------------- roles, partitions

def _check_heads(nodes: Sequence[NodeSpec], schedulers: Sequence[str], errs: Collector) -> None:
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
                errs: Collector) -> tuple[Partition, ...]:
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
    settings, per_gpu = partition_settings(field, name, item, errs)
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
    hosts: dict[tuple[str, str], list[str]] = {}
    for w in warnings:  # one line per cause, naming every host it concerns
        hosts.setdefault((w.field, w.message), []).append(w.host)
    return "\n".join(f"gpuinfra: warning: [{', '.join(dict.fromkeys(names))}] {field}: {message}"
                     for (field, message), names in hosts.items())


__all__ = ["SpecError", "SpecInvalid", "build_cluster", "validate", "HOST_KEYS",
           "format_errors", "format_warnings"]
