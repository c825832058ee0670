"""Validate pyinfra host data against the cluster spec, collecting every problem at once.

``build_cluster(hosts)`` returns a :class:`ClusterSpec` or raises :class:`SpecInvalid` holding
one :class:`SpecError` per problem: host, field, bad value, what is allowed and how to fix it.
Nothing here raises anything else on bad data: wrong types are problems, not crashes.
The checks live by subject, on what ``checks`` shares (errors, value checks): ``names``
(keys, groups, host names), ``cluster`` (the cluster-wide keys), ``knobs`` (the roles' keys),
``nodes`` (each host as a node, the head and the schedulers' workers), ``partitions``
(Slurm's), ``gpus``, ``sharing``, ``rdma``, ``vfio``, ``kubernetes``, ``cross`` (keys that
must agree); warnings in ``effects``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuinfra.spec import rdma
from gpuinfra.spec.blocks import blocks
from gpuinfra.spec.checks import CLUSTER, Collector, SpecError, SpecInvalid
from gpuinfra.spec.cluster import cluster_values
from gpuinfra.spec.controllers import check_hosts_of_their_own
from gpuinfra.spec.cross import check_cross_keys, merge_repeated
from gpuinfra.spec.effects import (
    alert_warnings,
    driver_branch_warnings,
    gpudirect_warnings,
    partial_effects,
    ssh_warnings,
)
from gpuinfra.spec.fabric import fabric
from gpuinfra.spec.knobs import Knob, knob_settings
from gpuinfra.spec.kubernetes import check_control_planes, check_kubernetes
from gpuinfra.spec.model import (
    HOST_KEYS,
    PYINFRA_SSH_KEYS,
    SPEC_KEYS,
    ClusterSpec,
    HostInput,
    SpecWarning,
)
from gpuinfra.spec.names import (
    check_groups,
    check_host_name,
    check_short_names,
    check_unknown_keys,
    with_role_groups,
)
from gpuinfra.spec.nodes import check_heads, check_shared_workers, check_unique_addresses, node_spec
from gpuinfra.spec.partitions import check_partition_accounting, slurm_partitions
from gpuinfra.spec.rules import clip
from gpuinfra.spec.vfio import check_acs_kept


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
                  default_schedulers: Sequence[str] | None = None,
                  owned_prefixes: Sequence[str] = ()) -> ClusterSpec:
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
    default of ``schedulers``. ``owned_prefixes`` (the whole site): key prefixes gpuinfra owns
    (``<role>_``, ``ssh_``): an unknown key with one of them is refused.
    """
    errs = Collector()
    hosts = with_role_groups(hosts, groups, errs)
    prefixes = None if only_roles is None else tuple(f"{r}_" for r in only_roles)
    for name in duplicate_names:
        errs.add(name, "inventory", name, "this host name is listed more than once",
                 "each host once per group", "remove the duplicate entry (or rename one host)")
    if not hosts:
        errs.add(CLUSTER, "inventory", [], "the inventory has no hosts",
                 "at least one host in the 'head' group", "add hosts to inventory/<site>.py")
        raise SpecInvalid(errs.errors)
    known = (*SPEC_KEYS, *PYINFRA_SSH_KEYS, *(k.key for k in knobs))
    owned = tuple(owned_prefixes) if only_roles is None else ()
    for host in hosts:
        check_unknown_keys(host, known, errs, prefixes, owned)
        check_host_name(host, errs)
        if only_roles is None:
            check_groups(host, errs)
    cluster = cluster_values(hosts, errs, default_schedulers)
    settings = knob_settings(hosts, knobs, errs)
    nodes = tuple(node_spec(host, cluster, settings[host.name], errs) for host in hosts)
    check_short_names(nodes, errs)
    check_unique_addresses(nodes, errs)
    check_heads(nodes, cluster["schedulers"], errs)
    check_hosts_of_their_own(nodes, cluster["schedulers"], errs)
    check_shared_workers(nodes, cluster["scheduler_sharing"], errs)
    check_control_planes(nodes, cluster["schedulers"], cluster["kubernetes"], errs)
    if "kubernetes" in cluster["schedulers"]:
        check_kubernetes(nodes, cluster["kubernetes"], errs)
    partitions = slurm_partitions(cluster, nodes, errs)
    switches, fabric_warnings = fabric(cluster["fabric_switches"], cluster["schedulers"], nodes,
                                       errs)
    nvlink_blocks = blocks(cluster["fabric_blocks"], cluster["fabric_switches"],
                           cluster["schedulers"], nodes, errs)
    first = settings.get(hosts[0].name, {})
    if partitions and "slurm_accounts" in first:  # the slurm role's knobs are judged
        check_partition_accounting(partitions, bool(cluster["slurm_accounting"]),
                                   first["slurm_accounts"], errs)
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
        fabric=switches,
        blocks=nvlink_blocks,
        warnings=tuple(fabric_warnings + driver_branch_warnings(cluster["driver_branch"])
                       + partial_effects(nodes)
                       + gpudirect_warnings(nodes, cluster["rdma_stack"])
                       + ssh_warnings(hosts) + alert_warnings(nodes)),
    )


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
