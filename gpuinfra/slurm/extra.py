"""What a site may add to slurm.conf (``slurm_conf_extra``): the keys the role writes itself, the
values merged with the role's, the programs that run as root; and the error every Slurm
builder raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.rules import Rule, clip, text

_SLURM_KEY = text(r"[A-Za-z][A-Za-z0-9]{0,63}", "a slurm.conf key: letters and digits")


_SLURM_VALUE = re.compile(r"[A-Za-z0-9_./:,=@+-]{1,512}")


def _extra_value(value: Any) -> str | None:
    text_ = str(value).lower() if isinstance(value, bool) else str(value)
    if not isinstance(value, (str, int, bool)) or not _SLURM_VALUE.fullmatch(text_):
        return "a value has no spaces, quotes or '#' (letters, digits and _./:,=@+-)"
    return None


# The slurm.conf keys the role writes itself (roles/slurm/templates/etc/slurm/
# slurm.conf.j2; a test holds this list to the template), and the node and partition lines:
# an extra setting may not override them (Slurm takes the last value of a key, so
# slurm_conf_extra = {"AuthType": "auth/none"} would quietly replace MUNGE). Compared without
# case, as Slurm reads keys.
MANAGED_KEYS = frozenset(k.lower() for k in (
    "AccountingStorageHost", "AccountingStorageTRES", "AccountingStorageType", "AuthType",
    "ClusterName", "CryptoType", "GresTypes", "JobAcctGatherType", "JobCompType", "MpiDefault",
    "ProctrackType", "ReturnToService", "SchedulerType", "SelectType", "SelectTypeParameters",
    "SlurmUser", "SlurmctldHost", "SlurmctldLogFile", "SlurmctldPidFile", "SlurmctldPort",
    "SlurmdLogFile", "SlurmdPidFile", "SlurmdPort", "SlurmdSpoolDir", "SlurmdTimeout",
    "StateSaveLocation", "TaskPlugin", "NodeName", "PartitionName", "Include",
    "ControlMachine", "BackupController", "AccountingStorageUser", "AuthAltTypes",
    "SlurmctldParameters", "PrologFlags", "DefMemPerGPU", "DefCpuPerGPU", "TopologyPlugin",
    "ResumeTimeout", "RebootProgram", "SlurmctldTimeout",
))


# Written by the role and open to the site too: slurm_conf_extra's values are added to the
# role's (SlurmctldParameters=enable_configless,<the site's>; PrologFlags=Contain,<the
# site's>), never replacing them.
MERGED_KEYS = frozenset({"slurmctldparameters", "prologflags"})


# Where a site sets what the role writes itself (the message of a refused extra setting).
_INSTEAD = {
    "defmempergpu": "set slurm_def_mem_per_gpu (or 'def_mem_per_gpu' on a partition)",
    "defcpupergpu": "set slurm_def_cpu_per_gpu (or 'def_cpu_per_gpu' on a partition)",
    "topologyplugin": "describe the fabric in fabric_switches (topology/tree) or the NVLink "
                      "racks in fabric_blocks (topology/block): the role writes topology.conf "
                      "and TopologyPlugin from it",
    "resumetimeout": "set slurm_resume_timeout",
    "rebootprogram": "set slurm_reboot_program",
    "statesavelocation": "set slurm_state_save_location",
    "slurmctldhost": "put the backup controllers in the 'slurm_backup' group",
    "slurmctldtimeout": "set slurm_ctld_timeout",
}


# PrologFlags the role does not allow (slurm.conf(5) PrologFlags): X11 turns on Slurm's X11
# forwarding (off: no X11 on GPU nodes here); NoHold "cannot be combined with the Contain or
# X11 flags", and the role always sets Contain.
_REFUSED_PROLOG_FLAGS = {"x11": "X11 forwarding stays off (issue 28)",
                         "nohold": "NoHold cannot be combined with Contain (slurm.conf(5)), "
                                   "which the role sets"}


# Programs slurmctld/slurmd run as root (slurm.conf(5)): only from root-owned system folders,
# never a path a user could write (the spec cannot see owners; these folders are root's on
# every distribution the roles support).
_ROOT_PROGRAMS = frozenset(k.lower() for k in (
    "Prolog", "Epilog", "PrologSlurmctld", "EpilogSlurmctld", "TaskProlog", "TaskEpilog",
    "SrunProlog", "SrunEpilog", "HealthCheckProgram", "RebootProgram", "ResumeProgram",
    "SuspendProgram", "ResvProlog", "ResvEpilog", "MailProg", "UnkillableStepProgram",
    "SlurmctldPrimaryOnProg", "SlurmctldPrimaryOffProg"))
# Files and folders the daemons load code or configuration from as root (slurm.conf(5)):
# PluginDir (a colon-separated list of folders of plugins), PlugStackConfig (the SPANK
# plugins' list): only in root-owned system folders, like the programs above.
_ROOT_PATHS = frozenset({"plugindir", "plugstackconfig"})
# The daemons' own user: slurmd runs as root (it starts every job's processes), slurmctld as
# SlurmUser (the role's). A site setting would break jobs or hand the daemon to another user.
_REFUSED_KEYS = {"slurmduser": "slurmd runs as root (it starts the jobs as their users)",
                 # Read by slurmstepd for Slurm's X11 forwarding (src/slurmd/slurmstepd/
                 # x11_forwarding.c: slurm_conf.x11_params), which stays off here.
                 "x11parameters": "X11 forwarding stays off (PrologFlags X11 is refused): it "
                                  "would configure nothing"}
# AuthInfo's socket= names the MUNGE socket Slurm trusts: only munged's own.
_MUNGE_SOCKET = "/run/munge/munge.socket.2"


_ROOT_FOLDERS = ("/etc/slurm/", "/usr/sbin/", "/usr/bin/", "/usr/lib/", "/usr/libexec/",
                 "/usr/local/sbin/", "/usr/local/lib/")


def extra_problem(key: Any, value: Any) -> str | None:
    """What is wrong with one ``slurm_conf_extra`` entry (None: fine)."""
    problem = _SLURM_KEY.problem(key) or _extra_value(value)
    if problem:
        return problem
    if key.lower() in _INSTEAD:
        return f"{key} is written by the slurm role per partition: {_INSTEAD[key.lower()]}"
    if key.lower() in MANAGED_KEYS and key.lower() not in MERGED_KEYS:
        return (f"{key} is written by the slurm role from the spec (cluster_name, the head, "
                "MUNGE, the nodes and partitions): an extra setting may not override it")
    if key.lower() == "prologflags":
        for flag in str(value).split(","):
            if flag.strip().lower() in _REFUSED_PROLOG_FLAGS:
                return f"PrologFlags {flag.strip()}: {_REFUSED_PROLOG_FLAGS[flag.strip().lower()]}"
    if key.lower() in _REFUSED_KEYS:
        return f"{key}: {_REFUSED_KEYS[key.lower()]}"
    if key.lower() in _ROOT_PROGRAMS and not _root_owned(str(value)):
        return (f"{key} runs as root: a program in a root-owned folder "
                f"({', '.join(_ROOT_FOLDERS)})")
    if key.lower() in _ROOT_PATHS and not all(_root_owned(p) for p in str(value).split(":")):
        return (f"{key}: root loads code from it: only root-owned folders "
                f"({', '.join(_ROOT_FOLDERS)})")
    if key.lower() == "authinfo":
        sockets = [p.split("=", 1)[1] for p in str(value).split(",") if p.startswith("socket=")]
        if any(sock not in (_MUNGE_SOCKET, "/var" + _MUNGE_SOCKET) for sock in sockets):
            return (f"AuthInfo socket= must be munged's own socket ({_MUNGE_SOCKET}): Slurm "
                    "trusts whoever answers there")
    return None


def _root_owned(path: str) -> bool:
    return (path.startswith(_ROOT_FOLDERS) or path.rstrip("/") + "/" in _ROOT_FOLDERS) \
        and ".." not in path


def _extra_check(extra: Any) -> str | None:
    if not isinstance(extra, Mapping):
        return "must be a dict"
    for key, value in extra.items():
        problem = extra_problem(key, value)
        if problem:
            return f"key {clip(key)}: {problem}"
    return None


CONF_EXTRA = Rule("{'Key': 'value'}, e.g. {'MaxJobCount': 20000}; not the keys the role "
                  "writes; Prolog/Epilog programs in root-owned folders", _extra_check)


def _reboot_program(value: Any) -> str | None:
    if not isinstance(value, str) or not _SLURM_VALUE.fullmatch(value) \
            or not value.startswith("/") or not _root_owned(value):
        return (f"an absolute path in a root-owned folder ({', '.join(_ROOT_FOLDERS)}): slurmd "
                "runs it as root")
    return None


# RebootProgram (slurm.conf(5) 22.05.8: "Program to be executed on each compute node to
# reboot it ... after the command "scontrol reboot""): slurmd runs it as root.
REBOOT_PROGRAM = Rule("an absolute path in a root-owned folder, e.g. '/usr/sbin/reboot'",
                      _reboot_program)


# Folders whose content is gone at each boot (tmpfs) or is the system's: never slurmctld's
# state, which must survive a reboot (slurm.conf(5) StateSaveLocation: "Slurm state will
# saved here to recover from system failures").
_NOT_STATE = ("/tmp", "/run", "/var/run", "/dev", "/proc", "/sys", "/etc", "/usr", "/boot")


def _state_dir(value: Any) -> str | None:
    if not isinstance(value, str) or not _SLURM_VALUE.fullmatch(value) \
            or not value.startswith("/") or "//" in value or ".." in value.split("/") \
            or value.rstrip("/") in ("", *_NOT_STATE) \
            or any(value.startswith(f"{folder}/") for folder in _NOT_STATE):
        return ("an absolute path kept across reboots (not under " + ", ".join(_NOT_STATE)
                + "), without '..', spaces or quotes")
    return None


# StateSaveLocation (slurm.conf(5) 22.05.8): "If you have a secondary SlurmctldHost
# configured, this location should be readable and writable by both systems."
STATE_DIR = Rule("an absolute path kept across reboots, e.g. '/var/lib/slurm/slurmctld', or "
                 "a folder on a filesystem every controller mounts ('/shared/slurm/state')",
                 _state_dir)


class SlurmConfigError(GpuinfraError):
    """A value that would make an invalid or unsafe Slurm configuration."""


def extra_lines(extra: Any) -> list[str]:
    """Site settings added to slurm.conf as ``Key=Value`` lines (``slurm_conf_extra``).

    Only the shape is checked here; Slurm itself (``slurmd -G`` on the staged file) judges
    the keys and values before any daemon sees them.
    """
    if extra is None:
        return []
    if not isinstance(extra, Mapping):
        raise SlurmConfigError(f"slurm_conf_extra = {clip(extra)}: must be a dict of "
                               f"{CONF_EXTRA.allowed}")
    for key, value in extra.items():
        problem = extra_problem(key, value)
        if problem:
            raise SlurmConfigError(f"slurm_conf_extra[{clip(key)}] = {clip(value)}: {problem} "
                                   "(a key is letters and digits)")
    return [f"{key}={str(value).lower() if isinstance(value, bool) else value}"
            for key, value in extra.items() if key.lower() not in MERGED_KEYS]


def merged_values(key: str, first: Sequence[str], extra: Any) -> list[str]:
    """A merged key's values: the role's ``first``, then the site's own (``slurm_conf_extra``),
    each once (compared without case, as Slurm reads flags)."""
    values = list(first)
    for name, value in (extra or {}).items():
        if name.lower() == key.lower():
            values += [v.strip() for v in str(value).split(",") if v.strip()]
    seen: dict[str, str] = {}
    for value in values:
        seen.setdefault(value.lower(), value)
    return list(seen.values())


def ctld_parameters(extra: Any) -> list[str]:
    """SlurmctldParameters: enable_configless (the configuration is the head's alone, see the
    configless section below), then the site's own (``slurm_conf_extra``), each once."""
    return merged_values("SlurmctldParameters", ["enable_configless"], extra)


def prolog_flags(extra: Any) -> list[str]:
    """PrologFlags: Contain (slurm.conf(5): "At job allocation time, use the ProcTrack plugin
    to create a job container on all allocated compute nodes"; it "implicitly sets the Alloc
    flag"), then the site's own; X11 and NoHold are refused (:func:`extra_problem`)."""
    return merged_values("PrologFlags", ["Contain"], extra)
