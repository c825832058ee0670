"""The head of the `monitoring` role: Prometheus (prometheus.yml and the rule file from the spec,
judged by ``promtool check config`` before they replace the live files, then a reload) and
Alertmanager (alertmanager.yml judged by ``amtool check-config``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from pyinfra.operations import apt, files, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.monitoring.alertmanager import ALERTMANAGER_CONFIG, alertmanager_config
from gpuinfra.monitoring.alerts import rules
from gpuinfra.monitoring.scrape import (
    PROMETHEUS_CONFIG,
    RULES_PATH,
    alertmanager_args,
    prometheus_args,
    prometheus_config,
)
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.spec import ClusterSpec
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.checked import check_script, checked_files
from gpuinfra_deploy.ops.service import restart_or_reload
from gpuinfra_roles.monitoring.security import web_security
from gpuinfra_roles.monitoring.shared import DAEMON_GROUP, daemon_args, yaml_with_header

PROMETHEUS_STAGE = "/etc/prometheus/.gpuinfra-staged"
ALERTMANAGER_STAGE = "/etc/prometheus/.gpuinfra-staged-alertmanager"
RULES_FILE = Path(RULES_PATH).name  # relative: promtool resolves it beside the config


def head_packages(distro: dict[str, Any]) -> None:
    apt.packages(name="Install Prometheus and Alertmanager", packages=distro["head"],
                 no_recommends=True, update=True, cache_time=APT_CACHE_S)


def prometheus_files(spec: ClusterSpec, mon: Monitoring) -> dict[str, str]:
    return {PROMETHEUS_CONFIG: yaml_with_header(prometheus_config(spec, mon, RULES_FILE)),
            RULES_PATH: yaml_with_header(rules(spec, mon))}


def prometheus_check(stage: str) -> str:
    """promtool judges the staged config and, through its rule_files, the staged rules."""
    config = shlex.quote(f"{stage}/{Path(PROMETHEUS_CONFIG).name}")
    return check_script(f"promtool check config {config}", "promtool", stage)


def prometheus(spec: ClusterSpec, mon: Monitoring) -> bool:
    """Prometheus on the head; True when this run makes web secrets again."""
    renewed = web_security(spec.head[0]) if mon.web_security else False
    args = daemon_args("/etc/default/prometheus", prometheus_args(spec, mon), "Prometheus")
    config = checked_files(name="Prometheus configuration and alert rules, checked by promtool",
                           files=prometheus_files(spec, mon), stage=PROMETHEUS_STAGE,
                           check=prometheus_check(PROMETHEUS_STAGE))
    systemd.service(name="Run Prometheus", service="prometheus", running=True, enabled=True)
    restart_or_reload("Prometheus", "prometheus", args.did_change, config.did_change)
    return renewed


def alertmanager_check(stage: str) -> str:
    config = shlex.quote(f"{stage}/{Path(ALERTMANAGER_CONFIG).name}")
    return check_script(f"amtool check-config {config}", "amtool", stage)


def alertmanager(spec: ClusterSpec, mon: Monitoring) -> None:
    args = daemon_args("/etc/default/prometheus-alertmanager",
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
