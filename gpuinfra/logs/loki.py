"""Every node's journal in Grafana Loki on the head, shipped by Grafana Alloy (the logs role's
option ``logs_loki``), with Grafana's data source and a dashboard of drained and failed nodes'
logs (written by the monitoring role, which owns Grafana).

Pure functions: the rule the gate applies, ``/etc/loki/config.yml`` (a dict, dumped as YAML),
``/etc/alloy/config.alloy`` (Alloy's own syntax: template ``logs/etc/alloy/config.alloy.j2``,
every string through :func:`alloy_string`), Loki's start gate and its marker, the shell that
judges each staged file with its own binary, Grafana's provisioning.

Why Alloy and not Promtail: "Promtail is end of life (EOL) as of March 2, 2026 [...] All
future feature development will occur in Grafana Alloy"
(https://grafana.com/docs/loki/latest/send-data/promtail/).

Packages, both from Grafana's apt repository (gpuinfra.knowledge.repositories.GRAFANA_REPO,
the one Grafana comes from), pinned:
- ``loki``: the binary as ``/usr/local/bin/loki``, its unit ``/etc/systemd/system/loki.service``
  (``User=loki``, ``-config.file /etc/loki/config.yml``), the config a conffile; the postinst
  makes the system user ``loki`` and enables and starts the unit on the package's own config
  (grafana/loki tools/packaging/nfpm.jsonnet, loki.service, loki-postinstall.sh).
- ``alloy``: ``/usr/bin/alloy``, unit ``alloy.service`` (``User=alloy``, ``alloy run ...
  $CONFIG_FILE`` with ``CONFIG_FILE="/etc/alloy/config.alloy"`` from /etc/default/alloy); the
  postinst makes the user ``alloy`` and adds it to ``adm`` and ``systemd-journal``, which
  ``loki.source.journal`` needs to read the journal (grafana/alloy packaging/deb/alloy.service,
  packaging/deb/control/postinst, packaging/environment-file;
  https://grafana.com/docs/alloy/latest/reference/components/loki/loki.source.journal/).

Checked before going live:
- Loki: ``loki -verify-config -config.file=<staged>`` validates the file and exits (1 with the
  reason: grafana/loki#2713 added it, #5149 made it exit after printing; #8346 shows the
  reason printed, e.g. "invalid schema config").
- Alloy: ``alloy validate <staged>`` "returns a non-zero exit code and prints diagnostics" for
  an invalid file (https://grafana.com/docs/alloy/latest/reference/cli/validate/). The
  subcommand came with grafana/alloy#3220 (merged April 2025; its page is in the docs from the
  v1.12 line on: https://grafana.com/docs/alloy/v1.12/reference/cli/validate): the pinned
  Alloy (the knob's default, 1.12.x) has it. ``alloy fmt`` (every version) only parses the
  syntax; ``validate`` also type-checks the components, so it is the one used.

Loki's facts used in the config (https://grafana.com/docs/loki/latest/configure/ and
https://grafana.com/docs/loki/latest/operations/storage/retention/): retention is the
compactor's (``retention_enabled``), needs the 24h index period, and "the minimum retention
period is 24h" (refused at the gate: :func:`retention_problem`); Loki 3 refuses retention
without ``delete_request_store`` ("compactor.delete-request-store should be configured when
retention is enabled", pkg/compactor/compactor.go Validate). Loki has no cap in bytes for a
filesystem store: ``logs_max_use`` stays the journal-remote copy's, Loki's disk is bounded by
retention and the volume the nodes log.
"""

from __future__ import annotations

import re
from typing import Any

from gpuinfra.errors import GpuinfraError, clip
from gpuinfra.text import FileText
from gpuinfra.units import unit_file

LOKI_CONFIG = "/etc/loki/config.yml"
LOKI_STAGE = "/etc/loki/.gpuinfra-staged"
LOKI_BINARY = "/usr/local/bin/loki"  # where the loki package installs it (not on sudo's PATH)
LOKI_SERVICE = "loki.service"
LOKI_USER = "loki"  # made by the package's postinst
LOKI_DATA = "/var/lib/loki"  # the package's own config keeps its data under /tmp/loki
# The loki package starts its service on its own default file (every address, data under /tmp)
# as soon as it is installed. The role's drop-in, written before the install, keeps it from
# starting until the marker exists; the marker is written once the checked file is live.
LOKI_GATE = "/etc/systemd/system/loki.service.d/gpuinfra-judged.conf"
LOKI_JUDGED = "/etc/loki/.gpuinfra-judged"
LOKI_GRPC_PORT = 9095  # Loki's default; on the loopback only (single binary)
DEFAULT_LOKI_PORT = 3100  # Loki's default HTTP port

ALLOY_CONFIG = "/etc/alloy/config.alloy"  # CONFIG_FILE in the package's /etc/default/alloy
ALLOY_STAGE = "/etc/alloy/.gpuinfra-staged"
ALLOY_SERVICE = "alloy.service"

PIN_FILE = "/etc/apt/preferences.d/gpuinfra-loki"

# Grafana's provisioning of Loki (the monitoring role writes these beside its own).
DATASOURCE_UID = "gpuinfra-loki"
DATASOURCE_FILE = "/etc/grafana/provisioning/datasources/gpuinfra-loki.yaml"
DASHBOARD_NAME = "node-logs.json"
# The Slurm states SlurmNodesDrained counts (gpuinfra.monitoring.slurmnodes.UNAVAILABLE).
UNAVAILABLE = "drain.*|down.*|fail.*"

_HOURS = {"h": 1, "d": 24, "w": 24 * 7}
MIN_RETENTION_H = 24


def retention_hours(retention: str) -> int:
    """Hours of a ``logs_retention`` value (``30d`` -> 720)."""
    match = re.fullmatch(r"([1-9][0-9]*)([hdw])", retention) if isinstance(retention, str) \
        else None
    if not match:
        raise GpuinfraError(f"logs_retention: {clip(retention)} is not a time like 30d, 12h "
                            "or 8w")
    return int(match[1]) * _HOURS[match[2]]


def retention_problem(retention: str) -> str | None:
    """Why Loki cannot keep logs for ``retention`` (None: it can)."""
    if retention_hours(retention) < MIN_RETENTION_H:
        return (f"Loki keeps logs at least 24h (its compactor's minimum retention period): "
                f"{retention} is shorter")
    return None


def push_url(head_address: str, port: int) -> str:
    return f"http://{_host(head_address)}:{port}/loki/api/v1/push"


def _host(address: str) -> str:
    """An address as a URL's host (an IPv6 address in brackets)."""
    return f"[{address}]" if ":" in address else address


# ------------------------------------------------------------------------------ Loki

def loki_config(head_address: str, port: int, retention: str) -> dict[str, Any]:
    """/etc/loki/config.yml: one Loki (single binary) on the head, HTTP on its cluster address,
    gRPC and the ring on the loopback, chunks and index on the local disk under /var/lib/loki,
    retention by the compactor. No multi-tenancy (one cluster, ``auth_enabled: false``)."""
    problem = retention_problem(retention)
    if problem:
        raise GpuinfraError(f"logs_loki: {problem}")
    return {
        "auth_enabled": False,
        "server": {"http_listen_address": head_address, "http_listen_port": port,
                   "grpc_listen_address": "127.0.0.1", "grpc_listen_port": LOKI_GRPC_PORT,
                   "log_level": "info"},
        "common": {"instance_addr": "127.0.0.1", "path_prefix": LOKI_DATA,
                   "storage": {"filesystem": {"chunks_directory": f"{LOKI_DATA}/chunks",
                                              "rules_directory": f"{LOKI_DATA}/rules"}},
                   "replication_factor": 1,
                   "ring": {"kvstore": {"store": "inmemory"}}},
        "schema_config": {"configs": [{
            "from": "2024-01-01", "store": "tsdb", "object_store": "filesystem",
            "schema": "v13", "index": {"prefix": "index_", "period": "24h"}}]},
        "limits_config": {"retention_period": f"{retention_hours(retention)}h"},
        "compactor": {"working_directory": f"{LOKI_DATA}/compactor",
                      "retention_enabled": True, "delete_request_store": "filesystem"},
        # No usage report to Grafana Labs from a cluster's head.
        "analytics": {"reporting_enabled": False},
    }


def loki_check(stage: str, name: str = "config.yml") -> str:
    """Shell: Loki judges the staged file (already quoted parts: fixed paths)."""
    return f"{LOKI_BINARY} -verify-config -config.file={stage}/{name}"


# ------------------------------------------------------------------------------ Alloy

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def alloy_string(value: Any) -> str:
    """``value`` as an Alloy string literal: double quotes, ``\\`` and ``"`` escaped (Alloy
    strings take Go's escapes: https://grafana.com/docs/alloy/latest/get-started/syntax/);
    a control character (a newline) is refused rather than escaped: no value of ours holds one,
    so one is a mistake upstream."""
    text = str(value)
    if _CONTROL.search(text):
        raise GpuinfraError(f"logs_loki: a value Alloy's config cannot hold: {clip(text)} "
                            "(a control character)")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _identifier(name: str) -> str:
    """An Alloy block label is a string; a component reference uses it bare: only names we
    choose (fixed words here), checked."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise GpuinfraError(f"logs_loki: {name!r} is not an Alloy identifier")
    return name


# The components' labels (checked identifiers: :func:`_identifier`).
_COMPONENTS = {"relabel": "journal", "source": "journal", "write": "head"}


def alloy_config(host: str, head_address: str, port: int, max_age: str = "12h") -> FileText:
    """/etc/alloy/config.alloy (template ``logs/etc/alloy/config.alloy.j2``): this node's
    journal (``loki.source.journal``, entries up to ``max_age`` old on the first start, then
    from its position) labelled ``host`` (the node's name in the spec) and ``unit`` (the
    systemd unit, from ``__journal__systemd_unit``), written to the head's Loki
    (``loki.write``). Components and arguments: Alloy's reference pages of
    loki.source.journal, loki.relabel and loki.write. Every string value is given to the
    template as a literal (:func:`alloy_string`), each label bare and as a literal."""
    refs = {key: _identifier(label) for key, label in _COMPONENTS.items()}
    return FileText("logs/etc/alloy/config.alloy.j2", {
        "ref": refs, "label": {key: alloy_string(label) for key, label in refs.items()},
        "max_age": alloy_string(max_age), "host": alloy_string(host),
        "url": alloy_string(push_url(head_address, port))})


def alloy_check(stage: str, name: str = "config.alloy") -> str:
    """Shell: Alloy judges the staged file (fixed paths)."""
    return f"alloy validate {stage}/{name}"


# ------------------------------------------------------------------------------ Grafana

def grafana_datasource(head_address: str, port: int, site: str) -> dict[str, Any]:
    """/etc/grafana/provisioning/datasources/gpuinfra-loki.yaml: the head's Loki."""
    return {"apiVersion": 1, "datasources": [{
        "name": f"Loki ({site})", "uid": DATASOURCE_UID, "type": "loki", "access": "proxy",
        "url": f"http://{_host(head_address)}:{port}", "isDefault": False, "editable": False,
        "jsonData": {"maxLines": 1000}}]}


def unavailable_nodes_query(slurm: bool) -> str:
    """PromQL whose ``instance`` label names each node that is down (node_exporter not
    answering) or, on a Slurm site, drained, draining, down or failing in Slurm."""
    down = 'up{job="node"} == 0'
    if not slurm:
        return down
    return (f'{down} or label_replace(gpuinfra_slurm_node_state{{state=~"{UNAVAILABLE}"}}, '
            '"instance", "$1", "node", "(.*)")')


def node_logs_dashboard(site: str, prometheus_uid: str, slurm: bool) -> dict[str, Any]:
    """The "Logs of drained and failed nodes" dashboard: a variable of the nodes that are down
    or (Slurm) drained, and one logs panel of everything those nodes logged (Loki)."""
    loki = {"type": "loki", "uid": DATASOURCE_UID}
    nodes_query = f"label_values({unavailable_nodes_query(slurm)}, instance)"
    return {
        "uid": f"gpuinfra-logs-{site}"[:40], "title": f"Node logs {site}",
        "tags": ["gpuinfra", "logs"], "timezone": "browser", "schemaVersion": 39,
        "version": 1, "editable": False, "refresh": "1m",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [{
            "name": "node", "label": "Drained or failed node", "type": "query",
            "datasource": {"type": "prometheus", "uid": prometheus_uid},
            "query": {"query": nodes_query, "refId": "nodes"}, "definition": nodes_query,
            "refresh": 2, "multi": True, "includeAll": False, "current": {}, "options": [],
            "sort": 1}]},
        "panels": [{
            "id": 1, "type": "logs", "title": "Logs of drained and failed nodes",
            "datasource": loki, "gridPos": {"h": 20, "w": 24, "x": 0, "y": 0},
            "options": {"showTime": True, "wrapLogMessage": True, "sortOrder": "Descending",
                        "enableLogDetails": True},
            # host!="" keeps the query valid when no node is selected (Loki refuses a
            # selector whose every matcher matches the empty label).
            "targets": [{"refId": "A", "datasource": loki, "queryType": "range",
                         "expr": '{host=~"${node:regex}", host!=""}'}]}],
    }


def loki_gate() -> FileText:
    """The drop-in that keeps Loki from starting before its judged file is live (systemd.unit(5):
    a failed ``ConditionPathExists=`` skips the start without an error, so the package's own
    ``systemctl start`` after its install succeeds and starts nothing)."""
    return unit_file({"Unit": [("ConditionPathExists", LOKI_JUDGED)]}, about=(
        "Loki starts only on the configuration the logs role judged (loki -verify-config):\n"
        "the package's own start after its install, on its default file, is skipped."))


def loki_judged_marker() -> FileText:
    """The marker the start gate waits for (template ``logs/etc/loki/.gpuinfra-judged.j2``)."""
    return FileText("logs/etc/loki/.gpuinfra-judged.j2", {"config": LOKI_CONFIG,
                                                           "gate": LOKI_GATE})
