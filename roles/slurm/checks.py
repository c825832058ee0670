"""The slurm role's checks of what the site asks against the Slurm each node of the run runs,
before any host is touched: Slurm releases that work together (a site mixing distributions:
gpuinfra.slurm.mixed), one cgroup.conf for all (configless), the features the cited
version table names (gpuinfra.slurm.versions), and every key and plugin of the rendered files
by that Slurm's own parser tables (gpuinfra/knowledge/slurm_keys.py)."""

from __future__ import annotations

from collections.abc import Mapping

from pyinfra import logger
from pyinfra.facts.server import LinuxDistribution

from gpuinfra.errors import GpuinfraError
from gpuinfra.slurm.mixed import SlurmHost, daemons, mixed_release_problem
from gpuinfra.slurm.versions import (
    block_problem,
    node_state_problem,
    shard_problem,
    unread_problem,
)
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.system import distro_key
from gpuinfra_deploy.run.site import Site


def slurm_nodes(site: Site) -> list[tuple[NodeSpec, str]]:
    """(node, its distribution key) for each Slurm node this run reaches."""
    return [(n, distro_key(site.host(n.name).get_fact(LinuxDistribution)))
            for n in site.spec.nodes if "slurm" in n.schedulers and site.reached(n.name)]


def one_slurm_site(site: Site, nodes: list[tuple[NodeSpec, str]]) -> None:
    """The Slurm nodes' releases run Slurm together (gpuinfra.slurm.mixed: slurmdbd >= slurmctld
    >= slurmd and the commands, within SchedMD's window), else the run stops before any host is
    changed. ``nodes``: :func:`slurm_nodes`; a Slurm node this run does not reach is said, not
    passed over: its release was not read."""
    accounting = site.spec.slurm_accounting
    _refuse([mixed_release_problem([
        SlurmHost(node.name, key, daemons(node.is_controller, node.is_worker,
                                          accounting and node.is_head))
        for node, key in nodes])])
    unread = [n.name for n in site.spec.nodes
              if "slurm" in n.schedulers and not site.reached(n.name)]
    if unread:
        logger.warning(f"slurm: not reached by this run: {', '.join(unread)}: their "
                       "distribution was not read, so Slurm's version rules (slurmdbd >= "
                       "slurmctld >= slurmd, SchedMD's upgrade guide) were checked among the "
                       f"others only ({', '.join(sorted({key for _, key in nodes}))}); a run "
                       "that reaches every Slurm node checks them all")


def _refuse(problems: list[str | None]) -> None:
    found = [p for p in problems if p]
    if found:
        raise GpuinfraError("slurm: " + "; ".join(found))


def one_cgroup_plugin(nodes: list[tuple[NodeSpec, str]], plugin_of: Mapping[str, str]) -> None:
    """Configless serves one cgroup.conf: the Slurm nodes of this run must agree on its plugin
    (``plugin_of`` a distribution: cgroup/v1 on Ubuntu 22.04's Slurm 21.08, autodetect
    elsewhere). ``nodes``: :func:`slurm_nodes`."""
    plugins: dict[str, list[str]] = {}
    for node, key in nodes:
        plugins.setdefault(plugin_of[key], []).append(f"{node.name} ({key})")
    if len(plugins) > 1:
        listed = "; ".join(f"CgroupPlugin={k}: {', '.join(v)}" for k, v in plugins.items())
        raise GpuinfraError(f"slurm: the Slurm nodes need different cgroup.conf files ({listed}), "
                            "and the head serves one to every node (configless): run the same "
                            "distribution on every Slurm node")


def versions_read_it(site: Site, nodes: list[tuple[NodeSpec, str]]) -> None:
    """What the site asks of Slurm, read by the Slurm each node runs (gpuinfra.slurm.versions):
    shard GRES (time-slicing) from 22.05, HealthCheckNodeState=NONDRAINED_IDLE from 23.02,
    topology/block (fabric_blocks) from 23.11."""
    problems: list[str | None] = []
    head = site.spec.head[0]
    for node, key in nodes:
        if node.sharing.mode == "time-slicing":
            problems.append(shard_problem(node.name, key))
        if node.name == head.name and node.settings.get("health_enabled"):
            problems.append(node_state_problem(
                str(node.settings.get("health_check_node_state", "")), node.name, key))
        if node.is_controller and site.spec.blocks:
            problems.append(block_problem(node.name, key))
    _refuse(problems)


def every_setting_read(nodes: list[tuple[NodeSpec, str]], texts: dict[str, str]) -> None:
    """Every key and plugin of the cluster's files is one the Slurm of each node in this run
    reads (its own parser's tables: gpuinfra.slurm.versions.unread_problem), one line per
    distribution."""
    seen: dict[str, list[str]] = {}
    for node, key in nodes:
        seen.setdefault(key, []).append(node.name)
    _refuse([unread_problem(", ".join(names), key, texts) for key, names in seen.items()])
