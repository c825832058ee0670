"""Every node of the `monitoring` role: node_exporter on the node's cluster address (with the
node's web material from the head where ``monitoring_node_exporter_web_security``), and the
textfile directory the GPU collector and the head's Slurm node states write."""

from __future__ import annotations

from typing import Any

from pyinfra.operations import apt, files, server, systemd

from gpuinfra.monitoring.scrape import node_exporter_args
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.monitoring.units import COLLECTOR_GROUP
from gpuinfra.monitoring.web import NODE_WEB_DIR
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.from_head import files_from_head
from gpuinfra_deploy.run.site import Site
from gpuinfra_roles.monitoring.security import node_web_copies
from gpuinfra_roles.monitoring.shared import DAEMON_GROUP, TEXTFILE_DIR, daemon_args


def node_exporter(site: Site, node: NodeSpec, mon: Monitoring, distro: dict[str, Any]) -> None:
    apt.packages(name="Install node_exporter", packages=distro["node"], no_recommends=True,
                 update=True, cache_time=APT_CACHE_S)
    if mon.node_exporter_web_security:
        # The package made the prometheus user and group; node_exporter reads the files per
        # request (a new certificate or hash needs no restart).
        files.directory(name=f"{NODE_WEB_DIR}: root and the prometheus group only (0750)",
                        path=NODE_WEB_DIR, user="root", group=DAEMON_GROUP, mode="750")
        files_from_head(name="node_exporter's key, certificate and web.yml from the head",
                        head=site.host(site.spec.head[0].name), copies=node_web_copies(node))
    args = daemon_args("/etc/default/prometheus-node-exporter",
                       node_exporter_args(node, mon, TEXTFILE_DIR,
                                          distro["node_exporter_web_flag"]), "node_exporter")
    systemd.service(name="Run node_exporter", service="prometheus-node-exporter", running=True,
                    enabled=True)
    systemd.service(name="Restart node_exporter on its new arguments",
                    service="prometheus-node-exporter", restarted=True, _if=args.did_change)


def textfile_directory() -> None:
    # The GPU collector and the head's Slurm node states run as a transient user in this group
    # (gpuinfra.monitoring.units), which may write node_exporter's textfile directory: never
    # as root.
    server.group(name=f"Group {COLLECTOR_GROUP} (writes the GPU metrics)", group=COLLECTOR_GROUP,
                 system=True)
    files.directory(name=f"{TEXTFILE_DIR}: writable by group {COLLECTOR_GROUP}",
                    path=TEXTFILE_DIR, user="root", group=COLLECTOR_GROUP, mode="775")
