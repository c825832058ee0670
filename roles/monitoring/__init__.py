"""The `monitoring` role: Prometheus and Alertmanager on the head, node_exporter everywhere, GPU
metrics from every GPU node, the site's alert rules; Grafana, DCGM and the Slurm exporter where
their repositories are reachable.

Table of contents (``monitoring()``), every host: node_exporter on the node's cluster address
with the GPU collector's textfile directory and the state of the units the alerts watch
(nodes.py). GPU nodes: the GPU collector (roles/monitoring/collector.py with the library modules
it needs, a systemd timer), the GPU job mapping of Slurm GPU workers, and NVIDIA's DCGM exporter
when ``monitoring_dcgm`` (gpus.py). The head: the web secrets (security.py), Prometheus
(prometheus.yml and the rule file from the spec, judged by ``promtool check config`` before
they replace the live files, then a reload) and Alertmanager (alertmanager.yml judged by
``amtool check-config``) (head.py), Grafana with its datasource and dashboard (grafana.py),
Slurm's node states and the Slurm exporter (slurm_metrics.py). What they share: shared.py.
Daemons are reloaded or restarted only where their files changed. Data keys: defaults.py;
per-distribution values: :data:`DISTRO`.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.api import deploy

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.repositories import CUDA_REPOS
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra.spec.cross import unaddressed
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.boot import BootNeeds, boot_order
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_roles.monitoring.gpus import (
    DCGM_DROPIN,
    DCGM_PIN_FILE,
    GPUJOBS,
    JOB_MAPPING_TMPFILES,
    collector_files,
    dcgm,
    gpu_collector,
    job_mapping,
)
from gpuinfra_roles.monitoring.grafana import (
    GRAFANA_DASHBOARDS,
    GRAFANA_DB,
    GRAFANA_PIN_FILE,
    grafana_server,
)
from gpuinfra_roles.monitoring.head import (
    ALERTMANAGER_STAGE,
    PROMETHEUS_STAGE,
    alertmanager,
    alertmanager_check,
    head_packages,
    prometheus,
    prometheus_check,
    prometheus_files,
)
from gpuinfra_roles.monitoring.kubernetes_metrics import kubernetes_gpus, kubernetes_head
from gpuinfra_roles.monitoring.nodes import node_exporter, textfile_directory
from gpuinfra_roles.monitoring.security import (
    WEB_TOOLS,
    exporter_ca_command,
    exporter_credentials,
    node_cert_command,
    node_web_check,
    tls_command,
    web_check,
)
from gpuinfra_roles.monitoring.shared import UNIT_STAGE, yaml_with_header
from gpuinfra_roles.monitoring.slurm_metrics import slurm_exporter, slurm_node_states

# What the role's entry points, deploy.py, the tests and the lab take from here: the role, and
# the paths and builders of its parts (each defined in the module of its part).
__all__ = [
    "ALERTMANAGER_STAGE", "DCGM_DROPIN", "DCGM_PIN_FILE", "DISTRO", "GPUJOBS", "GRAFANA_DASHBOARDS",
    "GRAFANA_DB", "GRAFANA_PIN_FILE", "JOB_MAPPING_TMPFILES", "PROMETHEUS_STAGE", "ROLE",
    "UNIT_STAGE", "alertmanager_check", "applies", "apply", "boot_needs", "collector_files",
    "exporter_ca_command", "job_mapping_on", "monitoring", "node_cert_command", "node_web_check",
    "packages", "pod_mapping_on", "prometheus_check", "prometheus_files", "settings_of",
    "slurm_exporter_on", "slurm_head", "tls_command", "web_check", "yaml_with_header",
]

# Per-distribution values: the task list below has no distro conditionals. node_exporter's
# web-config flag was --web.config until 1.5.0 renamed it (prometheus/node_exporter#2535, #2540):
# Ubuntu 22.04 ships 1.3.1, Debian 12 1.5.0, Ubuntu 24.04 1.7.0.
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {  # Prometheus 2.42, Alertmanager 0.25, node_exporter 1.5 (bookworm main)
        "node": ["prometheus-node-exporter", "dbus", "python3"],
        "node_exporter_web_flag": "--web.config.file",
        "head": ["prometheus", "prometheus-alertmanager", *WEB_TOOLS],
        "cuda_repo": CUDA_REPOS["debian-12"],
    },
    # Prometheus 2.53.3+ds1-2, Alertmanager 0.28.1+ds-1, node_exporter 1.9.0-1+b4, python3-bcrypt
    # (trixie main Packages, 2026-12-07). The flags gpuinfra.monitoring.scrape passes are in
    # the .debs' --help (alertmanager: --cluster.listen-address, --web.config.file; node
    # exporter: --web.config.file, --collector.systemd.unit-include, --collector.textfile.
    # directory); their units still read ARGS from /etc/default. DCGM: no CUDA repository for
    # trixie (gpuinfra.knowledge.drivers.NARROWER): monitoring_dcgm_repo_url, or no DCGM.
    "debian-13": {
        "node": ["prometheus-node-exporter", "dbus", "python3"],
        "node_exporter_web_flag": "--web.config.file",
        "head": ["prometheus", "prometheus-alertmanager", *WEB_TOOLS],
        "cuda_repo": None,
    },
    "ubuntu-22.04": {  # the same packages, from universe (node_exporter 1.3.1)
        "node": ["prometheus-node-exporter", "dbus", "python3"],
        "node_exporter_web_flag": "--web.config",
        "head": ["prometheus", "prometheus-alertmanager", *WEB_TOOLS],
        "cuda_repo": CUDA_REPOS["ubuntu-22.04"],
    },
    "ubuntu-24.04": {  # the same packages, from universe (node_exporter 1.7.0)
        "node": ["prometheus-node-exporter", "dbus", "python3"],
        "node_exporter_web_flag": "--web.config.file",
        "head": ["prometheus", "prometheus-alertmanager", *WEB_TOOLS],
        "cuda_repo": CUDA_REPOS["ubuntu-24.04"],
    },
}


def settings_of(node: NodeSpec) -> Monitoring:
    return Monitoring.from_settings(node.settings)


@deploy("monitoring")
def monitoring(site: Site, node: NodeSpec) -> None:
    data = node.settings
    if not data["monitoring_enabled"]:
        host.noop("monitoring disabled (monitoring_enabled = False)")
        return
    spec, mon = site.spec, settings_of(node)
    missing = _unaddressed(site)  # refused at the gate; a plan without it stops here
    if missing:
        raise GpuinfraError(f"monitoring: no cluster-network address for {', '.join(missing)}: "
                            "Prometheus scrapes nodes there and every exporter listens only "
                            "there. Set node_address (or an IP ssh_hostname) for them, or "
                            "monitoring_enabled = False")
    distro = DISTRO[host_distro()]

    if node.is_head:
        # First on the head: promtool, openssl and bcrypt make and judge the nodes' exporter
        # credentials, which every node copies in the next step (a copy from the head waits
        # for the head's operations before it: gpuinfra_deploy/ops/from_head.py).
        head_packages(distro)
        if mon.node_exporter_web_security:
            exporter_credentials(spec)
    node_exporter(site, node, mon, distro)
    if node.gpus is not None or slurm_head(spec, node) or kubernetes_head(spec, node):
        textfile_directory()
    if node.gpus is not None:
        mapped = job_mapping_on(node, mon)
        if mapped:
            job_mapping()
        gpu_collector(node, mapped)
        if mon.dcgm:
            dcgm(site, node, data, distro, mapped, pod_mapping_on(node, mon))
    if slurm_head(spec, node):
        slurm_node_states()
    if kubernetes_head(spec, node):
        kubernetes_gpus(spec)
    if node.is_head:
        renewed = prometheus(spec, mon)
        alertmanager(spec, mon)
        if mon.grafana:
            grafana_server(spec, mon, data, renewed)
        if slurm_exporter_on(spec, data):
            slurm_exporter(node, data["monitoring_slurm_exporter"])
    boot_order(boot_needs(spec, node, mon, data))


def job_mapping_on(node: NodeSpec, mon: Monitoring) -> bool:
    """Slurm keeps which job holds each GPU of this node (monitoring_job_mapping, a Slurm GPU
    worker): the same condition makes the slurm role name the hooks in slurm.conf."""
    return mon.job_mapping and node.gpus is not None and node.is_worker \
        and "slurm" in node.schedulers


def pod_mapping_on(node: NodeSpec, mon: Monitoring) -> bool:
    """dcgm-exporter labels this node's GPU metrics with the Kubernetes pod holding each GPU
    (monitoring_job_mapping, a Kubernetes GPU worker: the kubelet's pod-resources API)."""
    return mon.job_mapping and node.gpus is not None and node.is_worker \
        and "kubernetes" in node.schedulers


def slurm_head(spec: ClusterSpec, node: NodeSpec) -> bool:
    """The head of a Slurm site writes Slurm's node states (SlurmNodesDrained reads them)."""
    return node.is_head and "slurm" in spec.schedulers


def slurm_exporter_on(spec: ClusterSpec, data: Any) -> bool:
    return data["monitoring_slurm_exporter"] is not None and "slurm" in spec.schedulers


def boot_needs(spec: ClusterSpec, node: NodeSpec, mon: Monitoring,
               data: Any) -> list[BootNeeds]:
    """Each daemon of this node listens on the node's cluster address, which exists only once
    the network is up: started after network-online.target, restarted when it still fails."""
    daemons = ["prometheus-node-exporter"]
    if node.gpus is not None and mon.dcgm:
        daemons.append("nvidia-dcgm-exporter")
    if node.is_head:
        daemons += ["prometheus", "prometheus-alertmanager"]
        if mon.grafana:
            daemons.append("grafana-server")
        if slurm_exporter_on(spec, data):
            daemons.append("prometheus-slurm-exporter")
    return [BootNeeds(f"{d}.service", "the node's cluster address, to listen on",
                      ("network-online.target",), ("network-online.target",)) for d in daemons]


def _unaddressed(site: Site) -> list[str]:
    """The site's nodes without a cluster address (gpuinfra.spec.cross.unaddressed), found
    once per run: every host asks, and each look is at every node."""
    return site.once("monitoring: unaddressed", lambda: unaddressed(site.spec.nodes))


def packages(site: Site, node: NodeSpec) -> list[str]:
    """Prometheus and Alertmanager with their web tools on the head, node_exporter on every
    node: the distribution's, as the role installs them (Grafana, DCGM and the Slurm exporter
    come from their own repositories or releases, installed by the role)."""
    if not node.settings["monitoring_enabled"] or _unaddressed(site):
        return []
    distro = DISTRO[host_distro()]
    return list(dict.fromkeys([*(distro["head"] if node.is_head else []), *distro["node"]]))


def applies(site: Site, node: NodeSpec) -> bool:
    """Every host (the role itself says where monitoring_enabled is False)."""
    return True



# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
# Other roles' knobs it reads: the driver's, the health check's (its alerts), the logs role's
# (logs_loki: Grafana's Loki data source).
ROLE = Role("monitoring", monitoring, applies, reads=("nvidia_driver", "health", "logs"),
            packages=packages)
apply = ROLE.apply
