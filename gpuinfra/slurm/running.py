"""Configless Slurm: where each slurmd fetches its configuration from, the head's running files
read back (a worker left out of a run keeps its lines), and what a change of them asks of
which daemon (reconfigure, restart slurmctld, restart every daemon).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuinfra.units import unit_file

# --------------------------------------------------------------------------- configless
# One configuration, owned by the head (configless_slurm.html, Slurm 20.02+): slurmctld runs
# with SlurmctldParameters=enable_configless and serves slurm.conf, gres.conf and cgroup.conf;
# each slurmd starts with --conf-server and caches them in /run/slurm/conf (where the node's
# client commands read them too, 21.08+). No worker carries a copy, so a run limited to some
# hosts cannot leave two nodes with different files. gres.conf is then one file for the
# cluster: each node's lines carry NodeName= (gres.conf(5)).
SLURMCTLD_PORT = 6817  # the template's SlurmctldPort, and --conf-server's default port


# Where a node's slurmd keeps the files it fetched (configless_slurm.html, 21.08+): the
# configuration the node runs, read by its client commands too.
FETCHED_CONF = "/run/slurm/conf/slurm.conf"


def conf_server(controller: str, address: str | None,
                backups: Sequence[tuple[str, str | None]] = ()) -> str:
    """slurmd's ``--conf-server`` value: the controller's address (its name when unknown), then
    each backup controller's (slurmd(8) of 22.05.8: "Comma-separated list of controllers, the
    first being the primary slurmctld")."""
    return ",".join(f"{a or name}:{SLURMCTLD_PORT}"
                    for name, a in ((controller, address), *backups))


def node_gres_lines(node: str, lines: Sequence[str]) -> list[str]:
    """A node's gres.conf lines in the cluster's one gres.conf: each with ``NodeName=``."""
    return [f"NodeName={node} {line}" for line in lines]


@dataclass(frozen=True)
class RunningConfig:
    """The head's slurm.conf and gres.conf as they are: each node's ``NodeName=`` line, its
    gres.conf lines and the ``# note:`` comments of its gres.conf section (kept for a node a
    run does not reach, so a ``--limit`` run leaves that node's part of the file byte for
    byte), and the settings (key -> value)."""

    node_lines: dict[str, str] = field(default_factory=dict)
    gres_lines: dict[str, list[str]] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()
    gres_notes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.node_lines or self.settings)


def _settings(text: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(settings, node lines by name, partition lines) of a slurm.conf text."""
    settings: dict[str, str] = {}
    nodes: dict[str, str] = {}
    partitions: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        key, _, value = line.partition("=")
        if key.lower() == "nodename":
            nodes[value.split()[0]] = line
        elif key.lower() == "partitionname":
            partitions.append(line)
        else:
            settings[key.strip()] = value.strip()
    return settings, nodes, partitions


def running_config(slurm_conf_text: str, gres_conf_text: str) -> RunningConfig:
    """:class:`RunningConfig` of the head's files (empty texts: a first deploy)."""
    settings, nodes, partitions = _settings(slurm_conf_text)
    gres: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    section = None  # the node whose "# <node>" heading the lines are under (gres.conf.j2)
    for raw in gres_conf_text.splitlines():
        heading = _GRES_SECTION.match(raw)
        if heading:
            section = heading.group(1)
            continue
        note = _GRES_NOTE.match(raw)
        if note and section is not None:
            notes.setdefault(section, []).append(note.group(1))
            continue
        line = raw.split("#", 1)[0].strip()
        if line.lower().startswith("nodename="):
            gres.setdefault(line.split()[0].partition("=")[2], []).append(line)
    return RunningConfig(nodes, gres, settings, tuple(partitions), notes)


# A node's section of the cluster's gres.conf (roles/slurm/templates/.../gres.conf.j2):
# "# <node>" then its "# note: ..." lines then its NodeName= lines.
_GRES_SECTION = re.compile(r"^# ([A-Za-z0-9][A-Za-z0-9._-]*)$")


_GRES_NOTE = re.compile(r"^# note: (.*)$")


# What a changed key asks of the daemons, from slurm.conf(5) of Slurm 22.05.8 (doc/man/man5/
# slurm.conf.5 at tag slurm-22-05-8-1): "Changes to the configuration file take effect upon
# restart of Slurm daemons, daemon receipt of the SIGHUP signal, or execution of the command
# 'scontrol reconfigure' unless otherwise noted". Noted "a restart of slurmctld is required":
CTLD_RESTART_KEYS = frozenset(k.lower() for k in (
    "AccountingStorageEnforce", "CredType", "JobContainerType", "MaxJobCount", "PowerPlugin",
    "ProctrackType", "SchedulerType", "SelectTypeParameters", "SlurmctldHost",
    "SlurmctldParameters", "SlurmctldPort", "SlurmdPort", "StateSaveLocation",
))
# X11Parameters is not here (knowledge audit e4dd2f2 row 3: slurmstepd reads it, not
# slurmctld): slurm_conf_extra refuses it, X11 forwarding being off (gpuinfra.slurm.extra).


# Noted "a restart of slurmctld and the slurmd daemons" ("All Slurm daemons ... must be
# restarted": SwitchType; "the slurmd daemons": CoreSpecPlugin); and NODE CONFIGURATION:
# "Changes in node configuration (e.g. adding nodes, changing their processor count, etc.)
# require restarting both the slurmctld daemon and the slurmd daemons".
# TopologyPlugin carries no such note in 22.05.8's page, but each daemon loads its topology
# plugin once (slurm_topo_init in src/common/slurm_topology.c returns at once when a plugin is
# already loaded; slurmctld's read_slurm_conf and slurmd's start-up call it), so a plugin
# named by a reconfigure would not be the one running: the role restarts every daemon for it.
# topology.conf's own changes take effect on `scontrol reconfigure` (topology.conf(5)).
ALL_RESTART_KEYS = frozenset(k.lower() for k in (
    "GresTypes", "PluginDir", "SelectType", "SwitchType", "CoreSpecPlugin", "TopologyPlugin",
))


@dataclass(frozen=True)
class ConfChange:
    """What a new slurm.conf/gres.conf asks of the daemons: ``none``; ``reconfigure``
    (`scontrol reconfigure`: slurmctld re-reads, each slurmd fetches the new files);
    ``restart`` (slurmctld restarted, then reconfigure); with ``slurmd`` also every slurmd
    restarted (it fetches the files at its start). ``why``: what changed."""

    kind: str
    why: str = ""
    slurmd: bool = False


def conf_change(running: RunningConfig, slurm_conf_text: str,
                gres_conf_text: str) -> ConfChange:
    """How the daemons must take the new files, from the running ones (the key lists above).
    A first deploy (no running files) is ``restart``: the daemons start on the new files."""
    if running.empty:
        return ConfChange("restart", "no configuration yet", slurmd=True)
    new = running_config(slurm_conf_text, gres_conf_text)
    keys = sorted({k.lower() for k in (*running.settings, *new.settings)
                   if running.settings.get(k) != new.settings.get(k)})
    nodes = sorted(set(running.node_lines) ^ set(new.node_lines))
    if nodes:
        return ConfChange("restart", f"nodes added or removed: {', '.join(nodes)}", slurmd=True)
    changed = sorted(n for n in new.node_lines if new.node_lines[n] != running.node_lines[n])
    if changed:
        return ConfChange("restart", f"node definitions changed: {', '.join(changed)}",
                          slurmd=True)
    if new.gres_lines != running.gres_lines:
        return ConfChange("restart", "gres.conf changed", slurmd=True)
    every = [k for k in keys if k in ALL_RESTART_KEYS]
    if every:
        return ConfChange("restart", f"{', '.join(every)} changed", slurmd=True)
    ctld = [k for k in keys if k in CTLD_RESTART_KEYS]
    if ctld:
        return ConfChange("restart", f"{', '.join(ctld)} changed")
    if keys or new.partitions != running.partitions:
        return ConfChange("reconfigure", ", ".join(keys) or "partitions changed")
    return ConfChange("none")


# Debian's and Ubuntu's slurmd.service (Debian 12 22.05.8, measured in the lab; Ubuntu's 21.08
# and 23.11 units have the same lines): it starts only where a local slurm.conf exists, and
# runs `/usr/sbin/slurmd -D -s $SLURMD_OPTIONS`.
SLURMD_EXEC = "/usr/sbin/slurmd -D -s"
# Debian 13's (24.11.5-4+deb13u1, read in the trixie lab): `Type=notify` and
# `ExecStart=/usr/sbin/slurmd --systemd $SLURMD_OPTIONS` (its ConditionPathExists commented
# out). Without --systemd, slurmd never tells systemd it is up and the start times out
# (measured: "start operation timed out" after 90 s, every start).
SLURMD_EXECS = {"debian-13": "/usr/sbin/slurmd --systemd"}


CONFIGLESS_DROPIN = "/etc/systemd/system/slurmd.service.d/gpuinfra-configless.conf"


def configless_dropin(server: str, distro: str = "debian-12") -> str:
    """slurmd's drop-in: no local slurm.conf needed, the files fetched from ``server``
    (:func:`conf_server`), slurmd started as ``distro``'s own unit starts it."""
    exec_start = SLURMD_EXECS.get(distro, SLURMD_EXEC)
    return unit_file({
        "Unit": [("#", "No local slurm.conf: slurmd fetches it from slurmctld."),
                 ("ConditionPathExists", "")],
        "Service": [("ExecStart", ""),
                    ("ExecStart", f"{exec_start} --conf-server {server} $SLURMD_OPTIONS")],
    }, about="The node's Slurm configuration is the controller's (configless_slurm.html): "
             "gpuinfra_roles/slurm.")
