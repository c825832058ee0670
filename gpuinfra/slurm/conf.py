"""slurm.conf as data: the head's one configuration (every slurmd fetches it: configless),
from the spec and each node's facts, rendered by roles/slurm/templates/etc/slurm/slurm.conf.j2
(slurm.conf(5) of Slurm 22.05, Debian 12; also read by 21.08 on Ubuntu 22.04 and 23.11 on
Ubuntu 24.04; docs/hardware-reference.md section 5).

``Gres=`` per node comes from the *spec* (what was asked), CPUs, sockets, cores, threads and
memory from the node's *own hardware* (gpuinfra.slurm.nodes); a node whose hardware has fewer
GPUs than its spec registers fewer than configured and slurmctld drains it (the verify suite
names it with the cause). gres.conf: gpuinfra.slurm.gres; what a site may add:
gpuinfra.slurm.extra; what a change asks of the daemons: gpuinfra.slurm.running.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.slurm.extra import SlurmConfigError, ctld_parameters, extra_lines, prolog_flags
from gpuinfra.slurm.gres import gres_types
from gpuinfra.slurm.nodes import (
    NodeHardware,
    SlurmNodeLine,
    node_line,
    partition_lines,
    per_gpu_defaults,
)
from gpuinfra.slurm.running import RunningConfig
from gpuinfra.slurm.topology import topology_plugin
from gpuinfra.spec.model import ClusterSpec


@dataclass
class SlurmConf:
    """Everything roles/slurm/templates/etc/slurm/slurm.conf.j2 needs."""

    cluster_name: str
    controller: str
    controller_address: str | None
    gres_types: list[str]
    nodes: list[SlurmNodeLine]
    partitions: list[str]
    accounting: bool
    extra: list[str] = field(default_factory=list)
    # The node health check's lines (HealthCheckProgram..., Prolog, Epilog): health_lines().
    health: list[str] = field(default_factory=list)
    ctld_parameters: list[str] = field(default_factory=lambda: ["enable_configless"])
    prolog_flags: list[str] = field(default_factory=lambda: ["Contain"])
    per_gpu_notes: list[str] = field(default_factory=list)
    # TopologyPlugin (None: Slurm's default, no topology.conf): gpuinfra.slurm.topology.
    topology_plugin: str | None = None
    # The backup controllers (the 'slurm_backup' group), in order: (name, address or None).
    backups: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def controller_host(self) -> str:
        """``SlurmctldHost`` value: ``name(address)`` when the address is known."""
        return _ctld_host(self.controller, self.controller_address)

    @property
    def controller_hosts(self) -> list[str]:
        """Every ``SlurmctldHost`` line's value, the primary first (slurm.conf(5): "If
        specified more than once, the first hostname named will be where the daemon runs. If
        the first specified host fails, the daemon will execute on the second host")."""
        return [self.controller_host, *(_ctld_host(n, a) for n, a in self.backups)]

    @property
    def notes(self) -> list[str]:
        return [f"{n.name}: {note}" for n in self.nodes for note in n.notes] + self.per_gpu_notes


def _ctld_host(name: str, address: str | None) -> str:
    return f"{name}({address})" if address else name


# The health role's programs (roles/health: slurm.conf names a program, no arguments).
HEALTH_PROGRAMS = {"slurm": "/usr/local/sbin/gpuinfra-health-slurm",
                   "prolog": "/usr/local/sbin/gpuinfra-health-prolog",
                   "epilog": "/usr/local/sbin/gpuinfra-health-epilog"}


# The monitoring role's GPU job mapping hooks (roles/monitoring/gpujobs.py, on Slurm GPU
# nodes: which job holds each GPU, for dcgm-exporter and the GPU collector).
JOB_MAPPING_PROGRAMS = {"prolog": "/usr/local/sbin/gpuinfra-gpujobs-prolog",
                        "epilog": "/usr/local/sbin/gpuinfra-gpujobs-epilog"}


# Both at once: one glob naming every gpuinfra hook. slurm.conf(5) of 22.05 (Debian 12's
# 22.05.8, read in its man page) and of 23.11: Prolog "A glob pattern (See glob (7)) may also be
# used to specify more than one program to run (e.g. "/etc/slurm/prolog.d/*")", and the same
# for Epilog; a list with commas is newer (not in 22.05's page). A node where one of them is
# not installed (the monitoring role not yet run, a node without GPUs) runs the others: a
# glob names only what exists, where a missing named program would fail the Prolog and drain
# the node. The order between them is not promised, and nothing here depends on it.
HOOK_GLOBS = {"prolog": "/usr/local/sbin/gpuinfra-*-prolog",
              "epilog": "/usr/local/sbin/gpuinfra-*-epilog"}


def _hook(kind: str, health: bool, job_mapping: bool) -> str | None:
    """The Prolog or Epilog value: the one program, the glob of both, or none."""
    if health and job_mapping:
        return HOOK_GLOBS[kind]
    if health:
        return HEALTH_PROGRAMS[kind]
    return JOB_MAPPING_PROGRAMS[kind] if job_mapping else None


def health_lines(settings: Mapping[str, Any], job_mapping: bool = False) -> list[str]:
    """slurm.conf's health check keys from the health role's knobs (slurm.conf(5)):
    HealthCheckProgram/-Interval/-NodeState; Prolog (PrologFlags=Contain implies Alloc: run at
    allocation, before the batch script, so a bad GPU requeues the job before it starts);
    Epilog. ``job_mapping``: the monitoring role's GPU job hooks run too
    (:data:`JOB_MAPPING_PROGRAMS`, monitoring_job_mapping)."""
    health = bool(settings.get("health_enabled"))
    lines = []
    if health:
        lines += [f"HealthCheckProgram={HEALTH_PROGRAMS['slurm']}",
                  f"HealthCheckInterval={int(settings['health_check_interval'])}",
                  f"HealthCheckNodeState={settings['health_check_node_state']}"]
    # At allocation: PrologFlags=Contain, which the role always sets, "implicitly sets the
    # Alloc flag" (slurm.conf(5)).
    prolog = _hook("prolog", health and bool(settings.get("health_slurm_prolog")), job_mapping)
    epilog = _hook("epilog", health and bool(settings.get("health_slurm_epilog")), job_mapping)
    if prolog:
        lines.append(f"Prolog={prolog}")
    if epilog:
        lines.append(f"Epilog={epilog}")
    return lines


def slurm_conf(spec: ClusterSpec, addresses: Mapping[str, str | None],
               hardware: Mapping[str, NodeHardware | None], gres_type_of: Mapping[str, str],
               accounting: bool = False, extra: Any = None,
               health: Mapping[str, Any] | None = None,
               running: RunningConfig | None = None,
               def_mem_per_gpu: int | None = None,
               def_cpu_per_gpu: int | None = None,
               job_mapping: bool = False) -> SlurmConf:
    """The cluster's slurm.conf content (host names are the inventory's); ``running``: the
    head's files as they are, whose lines a node not reached in this run keeps;
    ``def_mem_per_gpu``/``def_cpu_per_gpu``: the site's per-GPU defaults (None: computed,
    :func:`per_gpu_defaults`); ``job_mapping``: the GPU job hooks in Prolog/Epilog
    (:func:`health_lines`)."""
    kept = running.node_lines if running is not None else {}
    if len(spec.head) != 1:
        raise SlurmConfigError(f"Slurm needs exactly one host in 'head', found {len(spec.head)}")
    head = spec.head[0]
    workers = [n for n in spec.nodes if n.is_worker and "slurm" in n.schedulers]
    nodes = [node_line(n, addresses.get(n.name), hardware.get(n.name), gres_type_of[n.name],
                       kept=kept.get(n.short_name)) for n in workers]
    extras = extra_lines(extra)  # checked before anything reads it
    per_gpu = per_gpu_defaults(spec, nodes, def_mem_per_gpu, def_cpu_per_gpu, extra)
    return SlurmConf(
        cluster_name=spec.name,
        controller=head.short_name,
        controller_address=addresses.get(head.name),
        gres_types=gres_types(workers),
        nodes=nodes,
        partitions=partition_lines(spec, per_gpu=per_gpu),
        accounting=accounting,
        extra=extras,
        health=health_lines(health or {}, job_mapping),
        ctld_parameters=ctld_parameters(extra),
        prolog_flags=prolog_flags(extra),
        per_gpu_notes=[note for p in per_gpu.values() for note in p.notes],
        topology_plugin=topology_plugin(spec),
        backups=[(n.short_name, addresses.get(n.name)) for n in spec.backup_controllers],
    )
