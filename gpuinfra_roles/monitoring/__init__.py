"""The `monitoring` role: Prometheus and Alertmanager on the head, node_exporter everywhere, GPU
metrics from every GPU node, the site's alert rules; Grafana, DCGM and the Slurm exporter where
their repositories are reachable.

Table of contents (``monitoring()``), every host: node_exporter on the node's cluster address
with the GPU collector's textfile directory and the state of the units the alerts watch. GPU
nodes: the GPU collector (gpuinfra_roles/monitoring/collector.py with the library modules it needs,
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
from io import StringIO
from pathlib import Path
from typing import Any

import yaml
from pyinfra import host
from pyinfra.api import StringCommand, deploy, operation
from pyinfra.facts.files import File
from pyinfra.operations import apt, files, systemd
from pyinfra.operations.util import any_changed

import gpuinfra
from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER
from gpuinfra.knowledge.packages import SIGNING_KEYS, PinnedPackages
from gpuinfra.knowledge.repositories import CUDA_REPOS
from gpuinfra.monitoring.alertmanager import ALERTMANAGER_CONFIG, alertmanager_config
from gpuinfra.monitoring.alerts import rules
from gpuinfra.monitoring.grafana import (
    grafana_dashboard,
    grafana_dashboards_provider,
    grafana_datasource,
)
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
from gpuinfra.monitoring.units import (
    collector_service,
    collector_timer,
    dcgm_exporter_dropin,
    grafana_dropin,
    slurm_exporter_unit,
)
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra.spec.cross import unaddressed
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S, apt_keyring, install_pinned, require_available
from gpuinfra_deploy.ops.boot import BootNeeds, boot_order
from gpuinfra_deploy.ops.checked import check_script, checked_files
from gpuinfra_deploy.ops.cuda_repo import cuda_repository, key_url_for
from gpuinfra_deploy.ops.gpu import node_driver
from gpuinfra_deploy.ops.service import restart_or_reload
from gpuinfra_deploy.ops.templates import RoleTemplates
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_roles.monitoring.collector import LIBRARY

TEMPLATES = RoleTemplates(__file__)  # templates/etc/default/prometheus-daemon.j2

# Where the collector's files are read from: the installed packages themselves (a checkout or
# the wheel), so the nodes run the library the deploy itself judged with.
LIBRARY_ROOT = Path(gpuinfra.__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"  # Debian's and Ubuntu's default
COLLECTOR_LIB = "/usr/local/lib/gpuinfra-gpu-metrics"
COLLECTOR_OUT = f"{TEXTFILE_DIR}/gpuinfra-gpu.prom"
UNIT_DIR = "/etc/systemd/system"
COLLECTOR_UNITS = ("gpuinfra-gpu-metrics.service", "gpuinfra-gpu-metrics.timer")
UNIT_STAGE = "/etc/systemd/system/.gpuinfra-staged"
PROMETHEUS_STAGE = "/etc/prometheus/.gpuinfra-staged"
ALERTMANAGER_STAGE = "/etc/prometheus/.gpuinfra-staged-alertmanager"
RULES_FILE = Path(RULES_PATH).name  # relative: promtool resolves it beside the config
DCGM_PIN_FILE = "/etc/apt/preferences.d/gpuinfra-dcgm"
DCGM_DROPIN = f"{UNIT_DIR}/nvidia-dcgm-exporter.service.d/gpuinfra.conf"
GRAFANA_KEYRING = "/usr/share/keyrings/grafana.gpg"
GRAFANA_LIST = "/etc/apt/sources.list.d/gpuinfra-grafana.list"
GRAFANA_PIN_FILE = "/etc/apt/preferences.d/gpuinfra-grafana"
GRAFANA_DROPIN = f"{UNIT_DIR}/grafana-server.service.d/gpuinfra.conf"
GRAFANA_PROVISIONING = "/etc/grafana/provisioning"
GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards/gpuinfra"
SLURM_EXPORTER_DIR = "/usr/local/lib/gpuinfra-slurm-exporter"
SLURM_EXPORTER_UNIT = f"{UNIT_DIR}/prometheus-slurm-exporter.service"

# Per-distribution values: the task list below has no distro conditionals.
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {  # Prometheus 2.42, Alertmanager 0.25, node_exporter 1.5 (bookworm main)
        "node": ["prometheus-node-exporter", "dbus", "python3"],
        "head": ["prometheus", "prometheus-alertmanager"],
        "cuda_repo": CUDA_REPOS["debian-12"],
    },
    "ubuntu-22.04": {  # the same packages, from universe
        "node": ["prometheus-node-exporter", "dbus", "python3"],
        "head": ["prometheus", "prometheus-alertmanager"],
        "cuda_repo": CUDA_REPOS["ubuntu-22.04"],
    },
    "ubuntu-24.04": {  # the same packages, from universe
        "node": ["prometheus-node-exporter", "dbus", "python3"],
        "head": ["prometheus", "prometheus-alertmanager"],
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

    _node_exporter(node, mon, distro)
    if node.gpus is not None:
        _gpu_collector()
        if mon.dcgm:
            _dcgm(site, node, data, distro)
    if node.is_head:
        _prometheus(spec, mon, distro)
        _alertmanager(spec, mon)
        if mon.grafana:
            _grafana(spec, mon, data)
        if slurm_exporter_on(spec, data):
            _slurm_exporter(node, data["monitoring_slurm_exporter"])
    boot_order(boot_needs(spec, node, mon, data))


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
                     src=StringIO(TEMPLATES.render("/etc/default/prometheus-daemon",
                                         args=args)), mode="644")


def _node_exporter(node: NodeSpec, mon: Monitoring, distro: dict[str, Any]) -> None:
    apt.packages(name="Install node_exporter", packages=distro["node"], no_recommends=True,
                 update=True, cache_time=APT_CACHE_S)
    args = _daemon_args("/etc/default/prometheus-node-exporter",
                        node_exporter_args(node, mon, TEXTFILE_DIR), "node_exporter")
    systemd.service(name="Run node_exporter", service="prometheus-node-exporter", running=True,
                    enabled=True)
    systemd.service(name="Restart node_exporter on its new arguments",
                    service="prometheus-node-exporter", restarted=True, _if=args.did_change)


# ---------------------------------------------------------------------------- GPU metrics

def collector_files() -> dict[str, str]:
    """The collector as installed: library modules (their repository paths under
    COLLECTOR_LIB) and collect.py."""
    out = {f"{COLLECTOR_LIB}/{rel}": (LIBRARY_ROOT / rel).read_text() for rel in LIBRARY}
    out[f"{COLLECTOR_LIB}/collect.py"] = (HERE / "collector.py").read_text()
    return out


def _gpu_collector() -> None:
    changed = []
    for path, text in collector_files().items():
        changed.append(files.put(name=f"GPU collector: {path}", dest=path, src=StringIO(text),
                                 mode="644", create_remote_dir=True))
    service, timer = COLLECTOR_UNITS
    units = {f"{UNIT_DIR}/{service}": collector_service(COLLECTOR_LIB, COLLECTOR_OUT,
                                                        TEXTFILE_DIR),
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


def dcgm_packages(data: Any) -> PinnedPackages:
    versions = {"datacenter-gpu-manager-4-core": data["monitoring_dcgm_version"],
                "datacenter-gpu-manager-exporter": data["monitoring_dcgm_exporter_version"]}
    return PinnedPackages(packages=dict(versions), pins=dict(versions))


def _dcgm(site: Site, node: NodeSpec, data: Any, distro: dict[str, Any]) -> None:
    url = dcgm_repo(site, node, data, distro)
    cuda_repository(url, key_url_for(url, None), "DCGM")
    pinned = dcgm_packages(data)
    require_available("DCGM", pinned, "monitoring_dcgm_version / "
                      "monitoring_dcgm_exporter_version")
    install_pinned("DCGM and its exporter", pinned, DCGM_PIN_FILE)
    listen = target(node, DCGM_EXPORTER_PORT)
    dropin = files.put(name="DCGM exporter listens on the cluster network", dest=DCGM_DROPIN,
                       src=StringIO(dcgm_exporter_dropin(listen)),
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


def _prometheus(spec: ClusterSpec, mon: Monitoring, distro: dict[str, Any]) -> None:
    apt.packages(name="Install Prometheus and Alertmanager", packages=distro["head"],
                 no_recommends=True, update=True, cache_time=APT_CACHE_S)
    args = _daemon_args("/etc/default/prometheus", prometheus_args(spec, mon),
                        "Prometheus")
    config = checked_files(name="Prometheus configuration and alert rules, checked by promtool",
                           files=prometheus_files(spec, mon), stage=PROMETHEUS_STAGE,
                           check=prometheus_check(PROMETHEUS_STAGE))
    systemd.service(name="Run Prometheus", service="prometheus", running=True, enabled=True)
    restart_or_reload("Prometheus", "prometheus", args.did_change, config.did_change)


def alertmanager_check(stage: str) -> str:
    config = shlex.quote(f"{stage}/{Path(ALERTMANAGER_CONFIG).name}")
    return check_script(f"amtool check-config {config}", "amtool", stage)


def _alertmanager(spec: ClusterSpec, mon: Monitoring) -> None:
    args = _daemon_args("/etc/default/prometheus-alertmanager",
                        alertmanager_args(spec, mon), "Alertmanager")
    config = checked_files(name="Alertmanager configuration, checked by amtool",
                           files={ALERTMANAGER_CONFIG: yaml_with_header(
                               alertmanager_config(spec, mon))},
                           stage=ALERTMANAGER_STAGE, check=alertmanager_check(ALERTMANAGER_STAGE))
    systemd.service(name="Run Alertmanager", service="prometheus-alertmanager", running=True,
                    enabled=True)
    restart_or_reload("Alertmanager", "prometheus-alertmanager", args.did_change,
                      config.did_change)


def grafana_files(spec: ClusterSpec, mon: Monitoring) -> dict[str, str]:
    return {
        f"{GRAFANA_PROVISIONING}/datasources/gpuinfra.yaml": yaml_with_header(
            grafana_datasource(spec, mon)),
        f"{GRAFANA_PROVISIONING}/dashboards/gpuinfra.yaml": yaml_with_header(
            grafana_dashboards_provider(GRAFANA_DASHBOARDS)),
        f"{GRAFANA_DASHBOARDS}/gpu-cluster.json": json.dumps(
            grafana_dashboard(spec, mon), indent=2) + "\n",
    }


def _grafana(spec: ClusterSpec, mon: Monitoring, data: Any) -> None:
    repo = data["monitoring_grafana_repo_url"].rstrip("/")
    keyring = apt_keyring(name="Add Grafana's signing key", url=f"{repo}/gpg.key",
                          path=GRAFANA_KEYRING, fingerprint=SIGNING_KEYS["grafana"])
    listed = files.put(name="List Grafana's repository in apt sources", dest=GRAFANA_LIST,
                       src=StringIO(f"deb [signed-by={GRAFANA_KEYRING}] {repo} stable main\n"),
                       mode="644")
    apt.update(name="Refresh apt after adding Grafana's repository",
               _if=any_changed(keyring, listed))
    version = data["monitoring_grafana_version"]
    install_pinned("Grafana", PinnedPackages(packages={"grafana": version},
                                             pins={"grafana": version}), GRAFANA_PIN_FILE)
    head = spec.head[0]
    dropin = files.put(name="Grafana listens on the cluster network", dest=GRAFANA_DROPIN,
                       src=StringIO(grafana_dropin(head.address, mon.grafana_port)),
                       mode="644", create_remote_dir=True)
    provisioned = [files.put(name=f"Grafana provisioning: {path}", dest=path,
                             src=StringIO(text), mode="644", create_remote_dir=True)
                   for path, text in grafana_files(spec, mon).items()]
    systemd.daemon_reload(name="systemd reads Grafana's drop-in", _if=dropin.did_change)
    systemd.service(name="Run Grafana", service="grafana-server", running=True, enabled=True)
    systemd.service(name="Restart Grafana on its new address or provisioning",
                    service="grafana-server", restarted=True,
                    _if=any_changed(dropin, *provisioned))


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
                     src=StringIO(slurm_exporter_unit(binary, exporter["version"],
                                                      target(node, SLURM_EXPORTER_PORT))),
                     mode="644")
    systemd.daemon_reload(name="systemd reads the Slurm exporter's unit", _if=unit.did_change)
    systemd.service(name="Run the Slurm exporter", service="prometheus-slurm-exporter",
                    running=True, enabled=True)
    systemd.service(name="Restart the Slurm exporter (new binary or unit)",
                    service="prometheus-slurm-exporter", restarted=True,
                    _if=any_changed(fetched, unit))


def applies(site: Site, node: NodeSpec) -> bool:
    """Every host (the role itself says where monitoring_enabled is False)."""
    return True


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("monitoring", monitoring, applies, reads=("nvidia_driver",))  # the driver's knobs
apply = ROLE.apply
