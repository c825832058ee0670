"""Grafana on the head (``monitoring_grafana``): from its apt repository, pinned; its datasource
and dashboards provisioned from the spec (with the logs role's Loki where ``logs_loki``), its
admin password made on the head, Prometheus' web credentials copied for its datasource."""

from __future__ import annotations

import json
import shlex
from typing import Any

from pyinfra import host
from pyinfra.facts.files import File
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.knowledge.packages import SIGNING_KEYS, PinnedPackages
from gpuinfra.knowledge.repositories import GRAFANA_KEYRING, GRAFANA_LIST, grafana_apt_line
from gpuinfra.logs.loki import DASHBOARD_NAME as LOKI_DASHBOARD
from gpuinfra.logs.loki import DATASOURCE_FILE as LOKI_DATASOURCE_FILE
from gpuinfra.logs.loki import grafana_datasource as loki_datasource
from gpuinfra.logs.loki import node_logs_dashboard
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
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.monitoring.units import grafana_dropin
from gpuinfra.monitoring.web import WEB_CERT, WEB_PASSWORD
from gpuinfra.spec import ClusterSpec
from gpuinfra_deploy.ops.apt import apt_keyring, install_pinned
from gpuinfra_deploy.ops.checked import upload_source
from gpuinfra_deploy.ops.made_on_host import copied_file, secret_files
from gpuinfra_deploy.templates import text
from gpuinfra_roles.monitoring.shared import UNIT_DIR, yaml_with_header

GRAFANA_GROUP = "grafana"  # Grafana's package runs grafana-server as grafana:grafana
GRAFANA_DB = "/var/lib/grafana/grafana.db"  # the package's default [paths] data, sqlite
GRAFANA_PIN_FILE = "/etc/apt/preferences.d/gpuinfra-grafana"
GRAFANA_DROPIN = f"{UNIT_DIR}/grafana-server.service.d/gpuinfra.conf"
GRAFANA_PROVISIONING = "/etc/grafana/provisioning"
GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards/gpuinfra"


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


def grafana_server(spec: ClusterSpec, mon: Monitoring, data: Any, renewed: bool) -> None:
    """Grafana on the head; ``renewed``: this run makes Prometheus' web secrets again (its
    copies follow)."""
    repo = data["monitoring_grafana_repo_url"].rstrip("/")
    keyring = apt_keyring(name="Add Grafana's signing key", url=f"{repo}/gpg.key",
                          path=GRAFANA_KEYRING, fingerprint=SIGNING_KEYS["grafana"])
    listed = files.put(name="List Grafana's repository in apt sources", dest=GRAFANA_LIST,
                       src=upload_source(text(grafana_apt_line(repo))),
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
                       src=upload_source(text(grafana_dropin(head.address, mon.grafana_port,
                                                   GRAFANA_ADMIN_PASSWORD))),
                       mode="644", create_remote_dir=True)
    provisioned = [files.put(name=f"Grafana provisioning: {path}", dest=path,
                             src=upload_source(text), mode="644", create_remote_dir=True)
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
