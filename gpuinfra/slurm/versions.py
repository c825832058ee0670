"""What each Slurm version reads, for what the roles write (knowledge audit e4dd2f2, rows 1-2).

The distributions' Slurm (the roles install the distribution's own): Debian 12 22.05.8,
Ubuntu 22.04 21.08.5, Ubuntu 24.04 23.11.4 (roles/slurm DISTRO). A feature a site asks for that
its Slurm predates is refused before any change, naming the node, its version and the fix:
Slurm would not start on such a file, or would silently ignore the setting. Beyond the cited
features, every key and plugin the role renders is checked against the parser tables of the
node's release (:func:`unread_settings`, gpuinfra/knowledge/slurm_keys.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from gpuinfra.knowledge import slurm_keys as table

# (major, minor) per distribution key (gpuinfra_deploy.facts.system.distro_key).
SLURM_VERSIONS: dict[str, tuple[int, int]] = {
    "debian-12": (22, 5),  # slurm-wlm 22.05.8-4 (bookworm)
    "debian-13": (24, 11),  # slurm-wlm 24.11.5-4+deb13u1 (trixie main, Packages 2026-12-07)
    "ubuntu-22.04": (21, 8),  # slurm-wlm 21.08.5-2ubuntu1 (jammy)
    "ubuntu-24.04": (23, 11),  # slurm-wlm 23.11.4-1.2build1 (noble)
}

# The shard GRES (GPU sharing without MPS: the time-slicing mode's GRES): SchedMD's
# CHANGELOG/slurm-22.05.md, "Add new shard plugin for sharing gpus but not with mps".
SHARD_SINCE = (22, 5)
# HealthCheckNodeState=NONDRAINED_IDLE: CHANGELOG/slurm-23.02.md, "Add
# HealthCheckNodeState=NONDRAINED_IDLE option".
NONDRAINED_IDLE_SINCE = (23, 2)


def _text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]:02d}"


def _predates(distro: str, since: tuple[int, int]) -> tuple[int, int] | None:
    """The Slurm version of ``distro`` when it is older than ``since`` (None: not older, or a
    distribution the table does not know)."""
    version = SLURM_VERSIONS.get(distro)
    return version if version is not None and version < since else None


def shard_problem(node: str, distro: str) -> str | None:
    """A time-slicing (shard GRES) node whose Slurm predates shards."""
    version = _predates(distro, SHARD_SINCE)
    if version is None:
        return None
    return (f"{node} ({distro}, Slurm {_text(version)}): gpu_sharing mode 'time-slicing' is "
            f"Slurm's shard GRES, added in Slurm {_text(SHARD_SINCE)} (SchedMD CHANGELOG "
            "slurm-22.05: 'Add new shard plugin'): its slurmd would not start. Fix: 'mps' or "
            "no sharing on this node, or a distribution with Slurm 22.05 or newer")


def node_state_problem(states: str, head: str, distro: str) -> str | None:
    """HealthCheckNodeState naming NONDRAINED_IDLE on a controller whose Slurm predates it."""
    version = _predates(distro, NONDRAINED_IDLE_SINCE)
    wanted: Iterable[str] = states.split(",")
    if version is None or "NONDRAINED_IDLE" not in wanted:
        return None
    return (f"health_check_node_state {states!r}: NONDRAINED_IDLE was added in Slurm "
            f"{_text(NONDRAINED_IDLE_SINCE)} (SchedMD CHANGELOG slurm-23.02) and the head "
            f"{head} ({distro}) runs Slurm {_text(version)}, which does not read it. Fix: IDLE "
            "(or ANY,CYCLE, the default) on this Slurm")


# topology/block (fabric_blocks): SchedMD/slurm commit 71c4762ed9 "Add topology_block
# plugin" (2023-08-22), first tagged slurm-23-11-0-0rc1; Debian 12's 22.05.8 ships no
# topology_block.so (its slurm-wlm-basic-plugins: topology_3d_torus, _hypercube, _none, _tree),
# Debian 13's 24.11.5 does (both measured in gpuinfra_lab/slurm_versions.py's images).
BLOCK_SINCE = (23, 11)


def block_problem(controller: str, distro: str) -> str | None:
    """fabric_blocks (TopologyPlugin=topology/block) on a controller whose Slurm predates it."""
    version = _predates(distro, BLOCK_SINCE)
    if version is None:
        return None
    return (f"fabric_blocks is Slurm's topology/block plugin, added in Slurm "
            f"{_text(BLOCK_SINCE)} (SchedMD/slurm 71c4762ed9 'Add topology_block plugin'), and "
            f"the controller {controller} ({distro}) runs Slurm {_text(version)}, which has no "
            "such plugin: slurmctld would not start. Fix: Ubuntu 24.04 (23.11) on the "
            "controllers, or describe the fabric with fabric_switches (topology/tree)")


# What each Slurm release's own parsers read, and the plugins it ships: gpuinfra/knowledge/
# slurm_keys.py, extracted from SchedMD's tag of each release (SOURCES there names it;
# gpuinfra_lab/slurm_keys.py writes it). The slurm role checks what it renders for a node
# against its Slurm.
KEY_VERSIONS = {(20, 11): "20.11", (21, 8): "21.08", (22, 5): "22.05", (23, 11): "23.11",
                (24, 11): "24.11"}
# slurm.conf keys whose value names a plugin (<kind>/<name>), and the kind.
_PLUGIN_KEYS = {"SelectType": "select", "SchedulerType": "sched", "TopologyPlugin": "topology",
                "ProctrackType": "proctrack", "TaskPlugin": "task", "AuthType": "auth",
                "CryptoType": "cred", "CredType": "cred", "MpiDefault": "mpi",
                "AccountingStorageType": "accounting_storage",
                "JobAcctGatherType": "jobacct_gather", "SwitchType": "switch"}


@lru_cache(maxsize=8)
def slurm_keys(version: str) -> dict[str, Any]:
    """The tables of Slurm ``version`` ("22.05"): each a sorted list of names, and "source"."""
    out: dict[str, Any] = {"source": table.SOURCES[version]}
    for name, words in table.BASE.items():
        more, less = table.DIFF.get(version, {}).get(name, ("", ""))
        out[name] = sorted((set(words.split()) | set(more.split())) - set(less.split()))
    return out


def _pairs(line: str) -> list[tuple[str, str]]:
    return [(k, v) for k, _, v in (word.partition("=") for word in line.split()) if k]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


# read_config.c's field of each kind whose "<kind>/none" a release may read as unset
# (slurm_keys' "none_is_unset": from 23.11, accounting_storage/none is no plugin any more).
_NONE_FIELD = {"accounting_storage": "accounting_storage_type",
               "jobacct_gather": "job_acct_gather_type", "mpi": "mpi_default",
               "switch": "switch_type", "task": "task_plugin", "topology": "topology_plugin"}


def _plugin(kind: str, value: str, known: set[str], unset: set[str]) -> str | None:
    """Why ``value`` of a ``kind`` key names no plugin of this Slurm (None: it does);
    ``unset``: read_config.c's fields whose "none" it reads as no plugin."""
    for item in value.split(","):
        name = item.split("/", 1)[1] if "/" in item else item
        if kind == "cred" and item == "crypto/munge":  # 22.05's name for cred/munge
            name = "munge"
        if name == "none" and (kind == "mpi" or _NONE_FIELD.get(kind) in unset):
            continue
        if f"{kind}/{name}" not in known:
            return f"{kind}/{name}"
    return None


def unread_settings(texts: Mapping[str, str], version: str) -> list[str]:
    """What of the files ``texts`` (slurm.conf, cgroup.conf, gres.conf, by file name) Slurm
    ``version``'s own parsers do not read, or whose plugin it does not ship: each as
    "<file>: <key>" or "<file>: <key>=<plugin>" (empty: it reads all of it)."""
    keys = {k: {x.lower() for x in v} if isinstance(v, list) else v
            for k, v in slurm_keys(version).items()}  # Slurm reads keys in any case
    plugins = set(slurm_keys(version)["plugins"])
    unset = set(slurm_keys(version).get("none_is_unset", []))
    out: list[str] = []
    for name, text in texts.items():
        file = name.rsplit("/", 1)[-1]
        for line in _lines(text):
            pairs = _pairs(line)
            if not pairs:
                continue
            head = pairs[0][0]
            if file == "slurm.conf":
                line_keys = keys.get(head) if head in ("NodeName", "PartitionName") else None
                if head.lower() not in keys["slurm.conf"]:
                    out.append(f"{file}: {head}")
                for key, _value in pairs[1:] if line_keys is not None else []:
                    if key.lower() not in line_keys:
                        out.append(f"{file}: {head} ... {key}=")
                kind = _PLUGIN_KEYS.get(head)
                missing = _plugin(kind, pairs[0][1], plugins, unset) if kind else None
                if head == "GresTypes":
                    missing = _plugin("gres", pairs[0][1], plugins, unset)
                if missing:
                    out.append(f"{file}: {head}={missing}")
            elif file == "cgroup.conf":
                if head.lower() not in keys["cgroup.conf"]:
                    out.append(f"{file}: {head}")
                elif head == "CgroupPlugin" and pairs[0][1] != "autodetect":
                    missing = _plugin("cgroup", pairs[0][1], plugins, unset)
                    if missing:
                        out.append(f"{file}: {head}={missing}")
            elif file == "gres.conf":
                out += [f"{file}: {k}" for k, _ in pairs
                        if k.lower() not in keys["gres.conf"] | {"nodename", "autodetect"}]
    return list(dict.fromkeys(out))


def unread_problem(node: str, distro: str, texts: Mapping[str, str]) -> str | None:
    """The files ``texts`` hold what the Slurm of ``distro`` does not read (its own parser's
    key tables, gpuinfra/knowledge/slurm_keys.py)."""
    version = SLURM_VERSIONS.get(distro)
    if version is None or version not in KEY_VERSIONS:
        return None
    unread = unread_settings(texts, KEY_VERSIONS[version])
    if not unread:
        return None
    source = slurm_keys(KEY_VERSIONS[version])["source"]
    return (f"{node} ({distro}) runs Slurm {_text(version)}, whose parsers do not read "
            f"{'; '.join(unread[:6])}{' ...' if len(unread) > 6 else ''} (its key tables: "
            f"{source}, gpuinfra/knowledge/slurm_keys.py): its daemons would refuse the files or "
            "ignore the setting. Fix: remove it (slurm_conf_extra, a site template), or run "
            "a newer Slurm there")
