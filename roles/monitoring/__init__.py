"""The `monitoring` role: Prometheus and Alertmanager on the head, node_exporter everywhere, GPU
metrics from every GPU node, the site's alert rules; Grafana, DCGM and the Slurm exporter where
their repositories are reachable.

Table of contents (``monitoring()``), every host: node_exporter on the node's cluster address
with the GPU collector's textfile directory and the state of the units the alerts watch. GPU
nodes: the GPU collector (roles/monitoring/collector.py with the library modules it needs,
a systemd timer), and NVIDIA's DCGM exporter when ``monitoring_dcgm``. The head: Prometheus
(prometheus.yml and the rule file from the spec, judged by ``promtool check config`` before
they replace the live files, then a reload), Alertmanager (alertmanager.yml judged by
``amtool check-config``), Grafana with its datasource and dashboard, the Slurm exporter.
Daemons are reloaded or restarted only where their files changed. Data keys: defaults.py;
per-distribution values: :data:`DISTRO`.
"""

from __future__ import annotations

import json
import shlex
from io import BytesIO, StringIO
from pathlib import Path
from typing import Any

import yaml
from pyinfra import host
from pyinfra.api import StringCommand, deploy, operation
from pyinfra.facts.files import File
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER
from gpuinfra.knowledge.gpus import AMPERE_OR_OLDER
from gpuinfra.knowledge.packages import SIGNING_KEYS, PinnedPackages
from gpuinfra.knowledge.repositories import (
    CUDA_REPOS,
    GRAFANA_KEYRING,
    GRAFANA_LIST,
    grafana_apt_line,
)
from gpuinfra.logs.loki import DASHBOARD_NAME as LOKI_DASHBOARD
from gpuinfra.logs.loki import DATASOURCE_FILE as LOKI_DATASOURCE_FILE
from gpuinfra.logs.loki import grafana_datasource as loki_datasource
from gpuinfra.logs.loki import node_logs_dashboard
from gpuinfra.monitoring.alertmanager import ALERTMANAGER_CONFIG, alertmanager_config
from gpuinfra.monitoring.alerts import rules
from gpuinfra.monitoring.grafana import (
    DATASOURCE_UID,
    GRAFANA_ADMIN_PASSWORD,
    GRAFANA_PROMETHEUS_CA,
    GRAFANA_PROMETHEUS_PASSWORD,
    GRAFANA_SECRETS,
    grafana_dashboard,
    grafana_dashboards_provider,
    grafana_datasource,
)
from gpuinfra.monitoring.jobmap import JOB_MAPPING_DIR
from gpuinfra.monitoring.knobs import slurm_exporter_url
from gpuinfra.monitoring.scrape import (
    DCGM_EXPORTER_PORT,
    PROMETHEUS_CONFIG,
    RULES_PATH,
    SLURM_EXPORTER_PORT,
    alertmanager_args,
    node_exporter_args,
    prometheus_args,
    prometheus_config,
    target,
)
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.monitoring.slurmnodes import PROM_NAME as SLURM_NODES_PROM
from gpuinfra.monitoring.units import (
    COLLECTOR_GROUP,
    TEXTFILE_DIRECTORY,
    collector_service,
    collector_timer,
    dcgm_exporter_dropin,
    grafana_dropin,
    job_mapping_tmpfiles,
    slurm_exporter_unit,
    slurm_nodes_service,
    slurm_nodes_timer,
)
from gpuinfra.monitoring.web import (
    BCRYPT_COST,
    CERT_DAYS,
    EXPORTER_CA_CERT,
    EXPORTER_CA_KEY,
    EXPORTER_DIR,
    EXPORTER_HASH_TOKEN,
    EXPORTER_NODES,
    EXPORTER_PASSWORD,
    EXPORTER_PASSWORD_HASH,
    HASH_TOKEN,
    NODE_WEB_DIR,
    NODE_WEB_FILES,
    WEB_CERT,
    WEB_CONFIG,
    WEB_DIR,
    WEB_KEY,
    WEB_PASSWORD,
    WEB_PASSWORD_HASH,
    exporter_web_config,
    node_material_dir,
    web_config,
)
from gpuinfra.slurm.conf import JOB_MAPPING_PROGRAMS
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra.spec.cross import unaddressed
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.nodecode import ZIP_NAME, node_zip
from gpuinfra_deploy.ops.apt import APT_CACHE_S, apt_keyring, install_pinned, require_available
from gpuinfra_deploy.ops.boot import BootNeeds, boot_order
from gpuinfra_deploy.ops.checked import check_script, checked_files
from gpuinfra_deploy.ops.cuda_repo import cuda_repository, key_url_for
from gpuinfra_deploy.ops.from_head import Copy, files_from_head
from gpuinfra_deploy.ops.gpu import node_driver
from gpuinfra_deploy.ops.made_on_host import copied_file, filled_file, secret_files
from gpuinfra_deploy.ops.service import restart_or_reload
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import role_file, text

HERE = Path(__file__).resolve().parent
TEXTFILE_DIR = TEXTFILE_DIRECTORY  # Debian's and Ubuntu's default (gpuinfra.monitoring.units)
COLLECTOR_LIB = "/usr/local/lib/gpuinfra-gpu-metrics"
COLLECTOR_OUT = f"{TEXTFILE_DIR}/gpuinfra-gpu.prom"
UNIT_DIR = "/etc/systemd/system"
COLLECTOR_UNITS = ("gpuinfra-gpu-metrics.service", "gpuinfra-gpu-metrics.timer")
# Slurm GPU nodes: the Prolog and Epilog keeping which job holds each GPU (gpujobs.py, beside
# the collector; slurm.conf names them: gpuinfra.slurm.conf.JOB_MAPPING_PROGRAMS).
GPUJOBS = f"{COLLECTOR_LIB}/gpujobs.py"
JOB_MAPPING_TMPFILES = "/etc/tmpfiles.d/gpuinfra-gpu-jobs.conf"
# The head of a Slurm site: Slurm's node states every minute (gpuinfra.monitoring.slurmnodes).
SLURM_NODES_LIB = "/usr/local/lib/gpuinfra-slurm-nodes"
SLURM_NODES_OUT = f"{TEXTFILE_DIR}/{SLURM_NODES_PROM}"
SLURM_NODES_UNITS = ("gpuinfra-slurm-nodes.service", "gpuinfra-slurm-nodes.timer")
UNIT_STAGE = "/etc/systemd/system/.gpuinfra-staged"
PROMETHEUS_STAGE = "/etc/prometheus/.gpuinfra-staged"
ALERTMANAGER_STAGE = "/etc/prometheus/.gpuinfra-staged-alertmanager"
WEB_STAGE = "/etc/prometheus/.gpuinfra-staged-web"
DAEMON_GROUP = "prometheus"  # Debian's and Ubuntu's units run every Prometheus daemon as it
GRAFANA_GROUP = "grafana"  # Grafana's package runs grafana-server as grafana:grafana
GRAFANA_DB = "/var/lib/grafana/grafana.db"  # the package's default [paths] data, sqlite
RULES_FILE = Path(RULES_PATH).name  # relative: promtool resolves it beside the config
DCGM_PIN_FILE = "/etc/apt/preferences.d/gpuinfra-dcgm"
DCGM_DROPIN = f"{UNIT_DIR}/nvidia-dcgm-exporter.service.d/gpuinfra.conf"
GRAFANA_PIN_FILE = "/etc/apt/preferences.d/gpuinfra-grafana"
GRAFANA_DROPIN = f"{UNIT_DIR}/grafana-server.service.d/gpuinfra.conf"
GRAFANA_PROVISIONING = "/etc/grafana/provisioning"
GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards/gpuinfra"
SLURM_EXPORTER_DIR = "/usr/local/lib/gpuinfra-slurm-exporter"
SLURM_EXPORTER_UNIT = f"{UNIT_DIR}/prometheus-slurm-exporter.service"

# What the head makes its web secrets with: openssl (the certificate and key) and python3-bcrypt
# (the password's hash): bookworm has python3-bcrypt 3.2.2-1 and openssl 3.0 (apt-cache policy);
# Ubuntu ships both in main (python3-bcrypt is python3-paramiko's dependency).
WEB_TOOLS = ["openssl", "python3-bcrypt"]

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
    missing = unaddressed(spec.nodes)  # refused at the gate; a plan without it stops here
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
        _head_packages(distro)
        if mon.node_exporter_web_security:
            _exporter_credentials(spec)
    _node_exporter(site, node, mon, distro)
    if node.gpus is not None or slurm_head(spec, node):
        _textfile_directory()
    if node.gpus is not None:
        mapped = job_mapping_on(node, mon)
        if mapped:
            _job_mapping()
        _gpu_collector(node, mapped)
        if mon.dcgm:
            _dcgm(site, node, data, distro, mapped, pod_mapping_on(node, mon))
    if slurm_head(spec, node):
        _slurm_nodes()
    if node.is_head:
        renewed = _prometheus(spec, mon)
        _alertmanager(spec, mon)
        if mon.grafana:
            _grafana(spec, mon, data, renewed)
        if slurm_exporter_on(spec, data):
            _slurm_exporter(node, data["monitoring_slurm_exporter"])
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


def _daemon_args(path: str, args: str, what: str) -> Any:
    return files.put(name=f"{what}'s arguments in {path}", dest=path,
                     src=StringIO(role_file("monitoring", "/etc/default/prometheus-daemon",
                                         args=args)), mode="644")


def node_web_copies(node: NodeSpec) -> list[Copy]:
    """node_exporter's key, certificate and web.yml: from the head's directory of this node to
    the node's NODE_WEB_DIR, root:prometheus (the certificate 0644, the others 0640)."""
    folder = node_material_dir(node.short_name)
    return [Copy(f"{folder}/{name}", f"{NODE_WEB_DIR}/{name}", DAEMON_GROUP,
                 "0644" if name == "tls.crt" else "0640") for name in NODE_WEB_FILES]


def _node_exporter(site: Site, node: NodeSpec, mon: Monitoring, distro: dict[str, Any]) -> None:
    apt.packages(name="Install node_exporter", packages=distro["node"], no_recommends=True,
                 update=True, cache_time=APT_CACHE_S)
    if mon.node_exporter_web_security:
        # The package made the prometheus user and group; node_exporter reads the files per
        # request (a new certificate or hash needs no restart).
        files.directory(name=f"{NODE_WEB_DIR}: root and the prometheus group only (0750)",
                        path=NODE_WEB_DIR, user="root", group=DAEMON_GROUP, mode="750")
        files_from_head(name="node_exporter's key, certificate and web.yml from the head",
                        head=site.host(site.spec.head[0].name), copies=node_web_copies(node))
    args = _daemon_args("/etc/default/prometheus-node-exporter",
                        node_exporter_args(node, mon, TEXTFILE_DIR,
                                           distro["node_exporter_web_flag"]), "node_exporter")
    systemd.service(name="Run node_exporter", service="prometheus-node-exporter", running=True,
                    enabled=True)
    systemd.service(name="Restart node_exporter on its new arguments",
                    service="prometheus-node-exporter", restarted=True, _if=args.did_change)


# ---------------------------------------------------------------------------- GPU metrics

def collector_files() -> dict[str, bytes]:
    """The collector as installed: collect.py and the library with its node-side runner
    (gpuinfra_deploy.nodecode: the same zip the health check runs on)."""
    return {f"{COLLECTOR_LIB}/collect.py": (HERE / "collector.py").read_bytes(),
            f"{COLLECTOR_LIB}/{ZIP_NAME}": node_zip()}


def _textfile_directory() -> None:
    # The GPU collector and the head's Slurm node states run as a transient user in this group
    # (gpuinfra.monitoring.units), which may write node_exporter's textfile directory: never
    # as root.
    server.group(name=f"Group {COLLECTOR_GROUP} (writes the GPU metrics)", group=COLLECTOR_GROUP,
                 system=True)
    files.directory(name=f"{TEXTFILE_DIR}: writable by group {COLLECTOR_GROUP}",
                    path=TEXTFILE_DIR, user="root", group=COLLECTOR_GROUP, mode="775")


def gpujobs_entry_point(mode: str) -> str:
    """The shell script slurm.conf's Prolog or Epilog names: gpujobs.py, isolated, in ``mode``."""
    return (f"#!/bin/sh\n{HEADER}# GPU job mapping (gpuinfra_roles/monitoring/gpujobs.py).\n"
            f"exec /usr/bin/python3 -I {GPUJOBS} {mode}\n")


def _job_mapping() -> None:
    """The folder made at boot, and the Prolog and Epilog that keep it (gpujobs.py, with the
    collector's zip beside it)."""
    files.put(name=f"{JOB_MAPPING_DIR} made at boot (tmpfiles.d)", dest=JOB_MAPPING_TMPFILES,
              src=StringIO(job_mapping_tmpfiles(JOB_MAPPING_DIR)), mode="644")
    files.directory(name=f"{JOB_MAPPING_DIR} exists (0755)", path=JOB_MAPPING_DIR, user="root",
                    group="root", mode="755")
    files.put(name=f"GPU job mapping: {GPUJOBS}", dest=GPUJOBS,
              src=BytesIO((HERE / "gpujobs.py").read_bytes()), mode="644",
              create_remote_dir=True)
    for mode, path in JOB_MAPPING_PROGRAMS.items():
        files.put(name=f"Slurm's {mode.capitalize()} for the GPU job mapping: {path}",
                  dest=path, src=StringIO(gpujobs_entry_point(mode)), user="root",
                  group="root", mode="755")


def _gpu_collector(node: NodeSpec, mapped: bool = False) -> None:
    # The collector once shipped the library as loose modules: gone, the zip holds it now.
    files.directory(name=f"{COLLECTOR_LIB}/gpuinfra absent (the library is in {ZIP_NAME})",
                    path=f"{COLLECTOR_LIB}/gpuinfra", present=False)
    changed = []
    for path, data in collector_files().items():
        changed.append(files.put(name=f"GPU collector: {path}", dest=path, src=BytesIO(data),
                                 mode="644", create_remote_dir=True))
    service, timer = COLLECTOR_UNITS
    units = {f"{UNIT_DIR}/{service}": collector_service(
        COLLECTOR_LIB, COLLECTOR_OUT, TEXTFILE_DIR, node.settings["nvidia_driver_device_group"],
        JOB_MAPPING_DIR if mapped else None),
             f"{UNIT_DIR}/{timer}": collector_timer()}
    verify = " ".join(shlex.quote(f"{UNIT_STAGE}/{unit}") for unit in COLLECTOR_UNITS)
    installed = checked_files(
        name="GPU collector units, checked by systemd-analyze", files=units, stage=UNIT_STAGE,
        check=check_script(f"systemd-analyze verify {verify}", "systemd", UNIT_STAGE))
    systemd.daemon_reload(name="systemd reads the collector's units", _if=installed.did_change)
    systemd.service(name="Run the GPU collector every minute", service=COLLECTOR_UNITS[1],
                    running=True, enabled=True)
    systemd.service(name="Collect GPU metrics now (new collector)", service=COLLECTOR_UNITS[0],
                    running=True, _if=any_changed(installed, *changed))


def dcgm_repo(site: Site, node: NodeSpec, data: Any, distro: dict[str, Any]) -> str:
    """DCGM's repository: the driver's (NVIDIA's CUDA repository, or the site's mirror), else
    monitoring_dcgm_repo_url, else the distribution's CUDA repository."""
    return (node_driver(site, node).repo or data["monitoring_dcgm_repo_url"]
            or distro["cuda_repo"]).rstrip("/")


def dcgm_packages(data: Any, node: NodeSpec | None = None) -> PinnedPackages:
    """DCGM and its exporter; on Ampere and older GPUs also DCGM's proprietary package, which
    their profiling metrics need (gpuinfra.knowledge.gpus.AMPERE_OR_OLDER), at DCGM's own
    version (one DCGM release builds both: installs pin them together, e.g. Azure's HPC image
    scripts `datacenter-gpu-manager-4-core=${DCGM_VERSION}
    datacenter-gpu-manager-4-proprietary=${DCGM_VERSION}`)."""
    versions = {"datacenter-gpu-manager-4-core": data["monitoring_dcgm_version"],
                "datacenter-gpu-manager-exporter": data["monitoring_dcgm_exporter_version"]}
    if node is not None and node.gpus is not None and node.gpus.model.key in AMPERE_OR_OLDER:
        versions["datacenter-gpu-manager-4-proprietary"] = data["monitoring_dcgm_version"]
    return PinnedPackages(packages=dict(versions), pins=dict(versions))


def _slurm_nodes() -> None:
    """The head: Slurm's node states every minute (slurm_nodes.py and the library zip, a
    timer), for the SlurmNodesDrained alert without the Slurm exporter."""
    changed = [files.put(name=f"Slurm node states: {path}", dest=path, src=BytesIO(data),
                         mode="644", create_remote_dir=True)
               for path, data in slurm_nodes_files().items()]
    service, timer = SLURM_NODES_UNITS
    units = {f"{UNIT_DIR}/{service}": slurm_nodes_service(SLURM_NODES_LIB, SLURM_NODES_OUT,
                                                          TEXTFILE_DIR),
             f"{UNIT_DIR}/{timer}": slurm_nodes_timer()}
    verify = " ".join(shlex.quote(f"{UNIT_STAGE}/{unit}") for unit in SLURM_NODES_UNITS)
    installed = checked_files(
        name="Slurm node states' units, checked by systemd-analyze", files=units,
        stage=UNIT_STAGE, check=check_script(f"systemd-analyze verify {verify}", "systemd",
                                             UNIT_STAGE))
    systemd.daemon_reload(name="systemd reads the Slurm node states' units",
                          _if=installed.did_change)
    systemd.service(name="Ask Slurm for its node states every minute", service=timer,
                    running=True, enabled=True)
    systemd.service(name="Ask Slurm for its node states now (new program)", service=service,
                    running=True, _if=any_changed(installed, *changed))


def slurm_nodes_files() -> dict[str, bytes]:
    """The head's Slurm node states program as installed, with the library zip."""
    return {f"{SLURM_NODES_LIB}/slurm_nodes.py": (HERE / "slurm_nodes.py").read_bytes(),
            f"{SLURM_NODES_LIB}/{ZIP_NAME}": node_zip()}


def _dcgm(site: Site, node: NodeSpec, data: Any, distro: dict[str, Any],
          mapped: bool = False, pods: bool = False) -> None:
    url = dcgm_repo(site, node, data, distro)
    cuda_repository(url, key_url_for(url, None), "DCGM")
    pinned = dcgm_packages(data, node)
    require_available("DCGM", pinned, "monitoring_dcgm_version / "
                      "monitoring_dcgm_exporter_version")
    install_pinned("DCGM and its exporter", pinned, DCGM_PIN_FILE)
    listen = target(node, DCGM_EXPORTER_PORT)
    dropin = files.put(name="DCGM exporter listens on the cluster network", dest=DCGM_DROPIN,
                       src=StringIO(text(dcgm_exporter_dropin(
                           listen, JOB_MAPPING_DIR if mapped else None, pods))),
                       mode="644", create_remote_dir=True)
    systemd.daemon_reload(name="systemd reads the DCGM exporter's drop-in",
                          _if=dropin.did_change)
    systemd.service(name="Run the DCGM host engine", service="nvidia-dcgm", running=True,
                    enabled=True)
    systemd.service(name="Run the DCGM exporter", service="nvidia-dcgm-exporter", running=True,
                    enabled=True)
    systemd.service(name="Restart the DCGM exporter on its new address",
                    service="nvidia-dcgm-exporter", restarted=True, _if=dropin.did_change)


# ---------------------------------------------------------------------------- the head

def yaml_with_header(data: Any) -> str:
    """``data`` as the text of a YAML file (pyyaml, keys in their order, block style), under
    the managed-by header and a line saying it is built from the site's spec."""
    return HEADER + "# Built from the site's spec (monitoring role).\n" + yaml.safe_dump(
        data, sort_keys=False, default_flow_style=False)


def prometheus_files(spec: ClusterSpec, mon: Monitoring) -> dict[str, str]:
    return {PROMETHEUS_CONFIG: yaml_with_header(prometheus_config(spec, mon, RULES_FILE)),
            RULES_PATH: yaml_with_header(rules(spec, mon))}


def prometheus_check(stage: str) -> str:
    """promtool judges the staged config and, through its rule_files, the staged rules."""
    config = shlex.quote(f"{stage}/{Path(PROMETHEUS_CONFIG).name}")
    return check_script(f"promtool check config {config}", "promtool", stage)


# ---------------------------------------------------------------------------- web security

def password_command(path: str, hash_path: str, group: str) -> str:
    """Shell (root): a random password in ``path`` and its bcrypt hash in ``hash_path``, both
    root:``group`` 0640, written under umask 077 beside their targets and renamed into place.
    The password goes from one command's file to the next one's standard input only."""
    new, hash_new = f"{path}.gpuinfra-new", f"{hash_path}.gpuinfra-new"
    make = "import secrets, sys; sys.stdout.write(secrets.token_urlsafe(32))"
    digest = ("import bcrypt, sys; sys.stdout.write(bcrypt.hashpw(sys.stdin.buffer.read()"
              f".strip(), bcrypt.gensalt({BCRYPT_COST})).decode())")
    q = shlex.quote
    return (f"umask 077 && python3 -I -c {q(make)} > {q(new)} && "
            f"python3 -I -c {q(digest)} < {q(new)} > {q(hash_new)} && "
            f"chgrp {q(group)} {q(new)} {q(hash_new)} && chmod 0640 {q(new)} {q(hash_new)} && "
            f"mv -f {q(hash_new)} {q(hash_path)} && mv -f {q(new)} {q(path)}")


def tls_command(node: NodeSpec, key: str, cert: str, group: str) -> str:
    """Shell (root): a self-signed certificate (its own CA) for the node's cluster address, an
    EC P-256 key root:``group`` 0640 (written 0600 under umask 077 first), the certificate
    0644; ``openssl req -addext`` (OpenSSL 1.1.1 and later: 3.0 on every distribution here)."""
    return _self_signed(key, cert, "/CN=" + node.short_name,
                        ["subjectAltName=IP:" + str(node.address)], key_group=group)


def web_check(stage: str) -> str:
    """promtool judges the staged web.yml: the certificate and key load, each hash parses."""
    config = shlex.quote(f"{stage}/{Path(WEB_CONFIG).name}")
    return check_script(f"promtool check web-config {config}", "promtool", stage)


def _web_security(head: NodeSpec) -> bool:
    """The head's web secrets (made once, kept) and web.yml built from them (no daemon needs
    telling: both read it on every request). True when this run makes any of them again."""
    files.directory(name=f"{WEB_DIR}: root and the prometheus group only (0750)", path=WEB_DIR,
                    user="root", group=DAEMON_GROUP, mode="750")
    password = secret_files(name="The web password and its bcrypt hash, made on the head",
                 paths=[WEB_PASSWORD, WEB_PASSWORD_HASH], what="the web password",
                 command=password_command(WEB_PASSWORD, WEB_PASSWORD_HASH, DAEMON_GROUP))
    tls = secret_files(name="The web TLS key and certificate, made on the head",
                 paths=[WEB_KEY, WEB_CERT], what="the web TLS key and certificate",
                 command=tls_command(head, WEB_KEY, WEB_CERT, DAEMON_GROUP))
    filled_file(name="web.yml of Prometheus and Alertmanager (the head's hash), judged "
                            "by promtool check web-config",
                       template=yaml_with_header(web_config()),
                       fills={HASH_TOKEN: WEB_PASSWORD_HASH}, dest=WEB_CONFIG, stage=WEB_STAGE,
                       check=web_check(WEB_STAGE), group=DAEMON_GROUP,
                       refresh=password.will_change)
    return password.will_change or tls.will_change


def _head_packages(distro: dict[str, Any]) -> None:
    apt.packages(name="Install Prometheus and Alertmanager", packages=distro["head"],
                 no_recommends=True, update=True, cache_time=APT_CACHE_S)


def exporter_ca_command(spec: ClusterSpec, key: str, cert: str) -> str:
    """Shell (root): the exporters' CA, an EC P-256 key root 0600 and its self-signed
    certificate (10 years, ``CA:TRUE`` with ``pathlen:0``: it signs node certificates only),
    written under umask 077 beside their targets and renamed into place."""
    return _self_signed(key, cert, "/CN=gpuinfra node_exporter CA of " + spec.name,
                        ["basicConstraints=critical,CA:TRUE,pathlen:0",
                         "keyUsage=critical,keyCertSign,cRLSign"])


def _self_signed(key: str, cert: str, subject: str, extensions: list[str],
                 key_group: str | None = None) -> str:
    """Shell (root): an EC P-256 key and its self-signed certificate (``CERT_DAYS``), written
    under umask 077 beside their targets (``.gpuinfra-new``) and renamed into place; the key
    0600, or root:``key_group`` 0640; the certificate 0644."""
    q = shlex.quote
    key_new, cert_new = f"{key}.gpuinfra-new", f"{cert}.gpuinfra-new"
    adds = " ".join(f"-addext {q(e)}" for e in extensions)
    share = f"chgrp {q(key_group)} {q(key_new)} && chmod 0640 {q(key_new)} && " \
        if key_group else ""
    return (f"umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
            f"-nodes -keyout {q(key_new)} -out {q(cert_new)} -days {CERT_DAYS} "
            f"-subj {q(subject)} {adds} 2>&1 && {share}"
            f"chmod 0644 {q(cert_new)} && mv -f {q(key_new)} {q(key)} && "
            f"mv -f {q(cert_new)} {q(cert)}")


def node_cert_command(node: NodeSpec, folder: str, ca_key: str = EXPORTER_CA_KEY,
                      ca_cert: str = EXPORTER_CA_CERT) -> str:
    """Shell (root): ``node``'s node_exporter key (EC P-256) and its certificate signed by the
    exporters' CA (``openssl req -x509 -CA``, OpenSSL 3.0 and later: every distribution here),
    for the node's cluster address, ``CA:FALSE`` (a node cannot sign for another), server
    authentication only; both root 0600 on the head (the node's copies get their group there),
    written under umask 077 and renamed into place."""
    q = shlex.quote
    key, cert = f"{folder}/tls.key", f"{folder}/tls.crt"
    key_new, cert_new = f"{key}.gpuinfra-new", f"{cert}.gpuinfra-new"
    return (f"umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
            f"-nodes -keyout {q(key_new)} -out {q(cert_new)} -days {CERT_DAYS} "
            f"-subj {q('/CN=' + node.short_name)} -CA {q(ca_cert)} -CAkey {q(ca_key)} "
            f"-addext {q('subjectAltName=IP:' + str(node.address))} "
            f"-addext {q('basicConstraints=critical,CA:FALSE')} "
            f"-addext {q('extendedKeyUsage=serverAuth')} 2>&1 && "
            f"mv -f {q(key_new)} {q(key)} && mv -f {q(cert_new)} {q(cert)}")


def node_web_check(folder: str, stage: str) -> str:
    """promtool judges a node's staged web.yml with that node's key and certificate beside it
    (web.yml names them relative to itself): the pair loads, the hash parses."""
    q = shlex.quote
    return check_script(f"cp {q(folder + '/tls.crt')} {q(folder + '/tls.key')} {q(stage)}/ && "
                        f"promtool check web-config {q(stage + '/web.yml')}", "promtool", stage)


def _exporter_credentials(spec: ClusterSpec) -> None:
    """On the head: the exporters' password and hash, their CA, and for every node its key, its
    certificate and its web.yml, judged by promtool (made once, kept; a node's certificate made
    again when the CA or the node's address is new)."""
    files.directory(name=f"{EXPORTER_DIR}: root and the prometheus group only (0750)",
                    path=EXPORTER_DIR, user="root", group=DAEMON_GROUP, mode="750")
    files.directory(name=f"{EXPORTER_NODES}: root only (0700)", path=EXPORTER_NODES,
                    user="root", group="root", mode="700")
    password = secret_files(
        name="The exporters' password and its bcrypt hash, made on the head",
        paths=[EXPORTER_PASSWORD, EXPORTER_PASSWORD_HASH], what="the exporters' password",
        command=password_command(EXPORTER_PASSWORD, EXPORTER_PASSWORD_HASH, DAEMON_GROUP))
    ca = secret_files(name="The exporters' CA key and certificate, made on the head",
                      paths=[EXPORTER_CA_KEY, EXPORTER_CA_CERT], what="the exporters' CA",
                      command=exporter_ca_command(spec, EXPORTER_CA_KEY, EXPORTER_CA_CERT))
    template = yaml_with_header(exporter_web_config())
    for node in spec.nodes:
        folder = node_material_dir(node.short_name)
        files.directory(name=f"{folder}: root only (0700)", path=folder, user="root",
                        group="root", mode="700")
        # The address the certificate names: a new one makes a new certificate.
        address = files.put(name=f"{node.short_name}: the address of its certificate",
                            dest=f"{folder}/address", src=StringIO(f"{node.address}\n"),
                            mode="600")
        pair = secret_files(
            name=f"{node.short_name}: node_exporter's key and certificate, signed on the head",
            paths=[f"{folder}/tls.key", f"{folder}/tls.crt"],
            what=f"{node.short_name}'s node_exporter key and certificate",
            command=node_cert_command(node, folder),
            refresh=ca.will_change or address.will_change)
        stage = f"{folder}/.staged"
        filled_file(name=f"{node.short_name}: node_exporter's web.yml (the exporters' hash), "
                         "judged by promtool check web-config with its key and certificate",
                    template=template, fills={EXPORTER_HASH_TOKEN: EXPORTER_PASSWORD_HASH},
                    dest=f"{folder}/web.yml", stage=stage, check=node_web_check(folder, stage),
                    group="root", mode="0600",
                    refresh=password.will_change or pair.will_change)


def _prometheus(spec: ClusterSpec, mon: Monitoring) -> bool:
    """Prometheus on the head; True when this run makes web secrets again."""
    renewed = _web_security(spec.head[0]) if mon.web_security else False
    args = _daemon_args("/etc/default/prometheus", prometheus_args(spec, mon),
                        "Prometheus")
    config = checked_files(name="Prometheus configuration and alert rules, checked by promtool",
                           files=prometheus_files(spec, mon), stage=PROMETHEUS_STAGE,
                           check=prometheus_check(PROMETHEUS_STAGE))
    systemd.service(name="Run Prometheus", service="prometheus", running=True, enabled=True)
    restart_or_reload("Prometheus", "prometheus", args.did_change, config.did_change)
    return renewed


def alertmanager_check(stage: str) -> str:
    config = shlex.quote(f"{stage}/{Path(ALERTMANAGER_CONFIG).name}")
    return check_script(f"amtool check-config {config}", "amtool", stage)


def _alertmanager(spec: ClusterSpec, mon: Monitoring) -> None:
    args = _daemon_args("/etc/default/prometheus-alertmanager",
                        alertmanager_args(spec, mon), "Alertmanager")
    config = checked_files(name="Alertmanager configuration, checked by amtool",
                           files={ALERTMANAGER_CONFIG: yaml_with_header(
                               alertmanager_config(spec, mon))},
                           stage=ALERTMANAGER_STAGE, check=alertmanager_check(ALERTMANAGER_STAGE),
                           mode="0640")
    # Webhook URLs and SMTP settings are secrets: readable by root and the daemon's group only.
    private = files.file(name=f"{ALERTMANAGER_CONFIG}: root:{DAEMON_GROUP} 0640",
                         path=ALERTMANAGER_CONFIG, user="root", group=DAEMON_GROUP, mode="640")
    systemd.service(name="Run Alertmanager", service="prometheus-alertmanager", running=True,
                    enabled=True)
    restart_or_reload("Alertmanager", "prometheus-alertmanager", args.did_change,
                      any_changed(config, private))


def grafana_files(spec: ClusterSpec, mon: Monitoring,
                  loki_port: int | None = None) -> dict[str, str]:
    """Grafana's provisioning; ``loki_port``: the logs role's Loki runs on the head there
    (logs_loki), so its data source and the node-logs dashboard are added."""
    loki = {} if loki_port is None else {
        LOKI_DATASOURCE_FILE: yaml_with_header(loki_datasource(
            str(spec.head[0].address), loki_port, spec.name)),
        f"{GRAFANA_DASHBOARDS}/{LOKI_DASHBOARD}": json.dumps(node_logs_dashboard(
            spec.name, DATASOURCE_UID, "slurm" in spec.schedulers), indent=2) + "\n"}
    return loki | {
        f"{GRAFANA_PROVISIONING}/datasources/gpuinfra.yaml": yaml_with_header(
            grafana_datasource(spec, mon)),
        f"{GRAFANA_PROVISIONING}/dashboards/gpuinfra.yaml": yaml_with_header(
            grafana_dashboards_provider(GRAFANA_DASHBOARDS)),
        f"{GRAFANA_DASHBOARDS}/gpu-cluster.json": json.dumps(
            grafana_dashboard(spec, mon), indent=2) + "\n",
    }


def loki_port(data: Any) -> int | None:
    """The logs role's Loki port where it runs (logs_loki), for Grafana's data source."""
    return data["logs_loki_port"] if data.get("logs_loki") else None


def _grafana(spec: ClusterSpec, mon: Monitoring, data: Any, renewed: bool) -> None:
    """Grafana on the head; ``renewed``: this run makes Prometheus' web secrets again (its
    copies follow)."""
    repo = data["monitoring_grafana_repo_url"].rstrip("/")
    keyring = apt_keyring(name="Add Grafana's signing key", url=f"{repo}/gpg.key",
                          path=GRAFANA_KEYRING, fingerprint=SIGNING_KEYS["grafana"])
    listed = files.put(name="List Grafana's repository in apt sources", dest=GRAFANA_LIST,
                       src=StringIO(grafana_apt_line(repo)),
                       mode="644")
    apt.update(name="Refresh apt after adding Grafana's repository",
               _if=any_changed(keyring, listed))
    version = data["monitoring_grafana_version"]
    install_pinned("Grafana", PinnedPackages(packages={"grafana": version},
                                             pins={"grafana": version}), GRAFANA_PIN_FILE)
    head = spec.head[0]
    files.directory(name=f"{GRAFANA_SECRETS}: root and the grafana group only (0750)",
                    path=GRAFANA_SECRETS, user="root", group=GRAFANA_GROUP, mode="750")
    admin = secret_files(name="Grafana's admin password, made on the head",
                         paths=[GRAFANA_ADMIN_PASSWORD], what="Grafana's admin password",
                         command=admin_password_command(GRAFANA_ADMIN_PASSWORD, GRAFANA_GROUP))
    copies = []
    if mon.web_security:
        copies = [copied_file(name=f"Grafana's copy of {src}", src=src, dest=dest,
                              group=GRAFANA_GROUP, refresh=renewed)
                  for src, dest in ((WEB_PASSWORD, GRAFANA_PROMETHEUS_PASSWORD),
                                    (WEB_CERT, GRAFANA_PROMETHEUS_CA))]
    dropin = files.put(name="Grafana listens on the cluster network", dest=GRAFANA_DROPIN,
                       src=StringIO(text(grafana_dropin(head.address, mon.grafana_port,
                                                   GRAFANA_ADMIN_PASSWORD))),
                       mode="644", create_remote_dir=True)
    provisioned = [files.put(name=f"Grafana provisioning: {path}", dest=path,
                             src=StringIO(text), mode="644", create_remote_dir=True)
                   for path, text in grafana_files(spec, mon, loki_port(data)).items()]
    systemd.daemon_reload(name="systemd reads Grafana's drop-in", _if=dropin.did_change)
    systemd.service(name="Run Grafana", service="grafana-server", running=True, enabled=True)
    systemd.service(name="Restart Grafana on its new address, provisioning or credentials",
                    service="grafana-server", restarted=True,
                    _if=any_changed(dropin, *provisioned, *copies))
    # Grafana takes admin_password only when it creates its database: one made before (an
    # earlier deploy's admin/admin) gets the new password from grafana-cli, from stdin.
    if host.get_fact(File, path=GRAFANA_DB):
        server.shell(name="Grafana's existing admin user gets the password made on the head",
                     commands=[admin_reset_command(GRAFANA_ADMIN_PASSWORD)],
                     _if=admin.did_change)


def admin_password_command(path: str, group: str) -> str:
    """Shell (root): a random password in ``path``, root:``group`` 0640 (umask 077 first)."""
    q = shlex.quote
    new = f"{path}.gpuinfra-new"
    make = "import secrets, sys; sys.stdout.write(secrets.token_urlsafe(32))"
    return (f"umask 077 && python3 -I -c {q(make)} > {q(new)} && chgrp {q(group)} {q(new)} && "
            f"chmod 0640 {q(new)} && mv -f {q(new)} {q(path)}")


def admin_reset_command(path: str) -> str:
    """``grafana-cli admin reset-admin-password --password-from-stdin`` (Grafana 9.1 and later)
    as the grafana user, the password on its standard input (never on a command line)."""
    return (f"runuser -u {GRAFANA_GROUP} -- grafana-cli admin reset-admin-password "
            f"--password-from-stdin < {shlex.quote(path)} >/dev/null")


# ---------------------------------------------------------------------------- Slurm exporter

@operation()
def verified_binary(url: str, sha256: str, member: str, dest: str):
    """``member`` of the tarball at ``url`` installed as ``dest`` (0755), only after the
    tarball's SHA-256 equals ``sha256``; nothing is fetched when ``dest`` exists.

    + url: the release tarball
    + sha256: its SHA-256 (64 hex digits, checked by the spec gate)
    + member: the binary's name inside the tarball
    + dest: where it goes (a versioned path: a new version is a new file)
    """
    if host.get_fact(File, path=dest):
        host.noop(f"{dest} already there")
        return
    temp = f"{dest}.gpuinfra-download"
    yield StringCommand("install", "-d", "-m", "0755", str(Path(dest).parent))
    yield StringCommand("curl", "-fsSL", "-o", shlex.quote(temp), shlex.quote(url))
    yield StringCommand("echo", shlex.quote(f"{sha256}  {temp}"), "|", "sha256sum", "-c", "-",
                        "||", "{", "rm", "-f", shlex.quote(temp), ";", "exit", "1", ";", "}")
    yield StringCommand("tar", "-xzf", shlex.quote(temp), "-O", shlex.quote(member), ">",
                        shlex.quote(f"{dest}.new"), "&&", "chmod", "0755",
                        shlex.quote(f"{dest}.new"), "&&", "mv", "-f",
                        shlex.quote(f"{dest}.new"), shlex.quote(dest), "&&", "rm", "-f",
                        shlex.quote(temp))


def _slurm_exporter(node: NodeSpec, exporter: dict[str, str]) -> None:
    binary = f"{SLURM_EXPORTER_DIR}/prometheus-slurm-exporter-{exporter['version']}"
    fetched = verified_binary(name=f"Slurm exporter {exporter['version']} (SHA-256 checked)",
                              url=slurm_exporter_url(exporter), sha256=exporter["sha256"],
                              member="prometheus-slurm-exporter", dest=binary)
    unit = files.put(name="The Slurm exporter's unit", dest=SLURM_EXPORTER_UNIT,
                     src=StringIO(text(slurm_exporter_unit(binary, exporter["version"],
                                                      target(node, SLURM_EXPORTER_PORT)))),
                     mode="644")
    systemd.daemon_reload(name="systemd reads the Slurm exporter's unit", _if=unit.did_change)
    systemd.service(name="Run the Slurm exporter", service="prometheus-slurm-exporter",
                    running=True, enabled=True)
    systemd.service(name="Restart the Slurm exporter (new binary or unit)",
                    service="prometheus-slurm-exporter", restarted=True,
                    _if=any_changed(fetched, unit))


def packages(site: Site, node: NodeSpec) -> list[str]:
    """Prometheus and Alertmanager with their web tools on the head, node_exporter on every
    node: the distribution's, as the role installs them (Grafana, DCGM and the Slurm exporter
    come from their own repositories or releases, installed by the role)."""
    if not node.settings["monitoring_enabled"] or unaddressed(site.spec.nodes):
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
