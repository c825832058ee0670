"""Prometheus, Alertmanager and Grafana files of a site, built as data from the spec.

Every file is a Python structure dumped by the role with pyyaml/json (never text pasted
together), and judged by its consumer before it goes live: ``promtool check config`` (which
also loads the rule file), ``promtool check rules``, ``amtool check-config``. The alert rules
come with their own unit tests (:func:`rule_tests`: input series -> expected alerts, for
``promtool test rules``): a healthy site where no alert may fire, and for each alert a site
where it must.

Names of things on the wire: every scrape target carries ``instance`` = the node's short name
(not ``address:port``), so node_exporter, DCGM and the GPU collector's series of one node join
on it, and the alerts name nodes the way the inventory does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.knowledge.topology import expected_active_links
from gpuinfra.spec.model import ClusterSpec, NodeSpec
from gpuinfra.spec.rules import Rule, http_url, list_of, mapping_of, text

# Where the role puts the rules (prometheus.yml's rule_files names this path).
RULES_PATH = "/etc/prometheus/gpuinfra-rules.yml"
PROMETHEUS_CONFIG = "/etc/prometheus/prometheus.yml"
ALERTMANAGER_CONFIG = "/etc/prometheus/alertmanager.yml"
DATASOURCE_UID = "gpuinfra-prometheus"
SEVERITIES = ("critical", "warning", "info")
NO_RECEIVER = "gpuinfra-none"  # alerts nobody asked for: kept in Alertmanager, not sent

# XIDs after which the GPU needs a reset or service, not just a look (NVIDIA's XID catalog,
# docs/hardware-reference.md 8.6): 48 double-bit ECC, 63/64 row remapping, 74 NVLink error,
# 79 fallen off the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC error.
FATAL_XIDS = (48, 63, 64, 74, 79, 92, 94, 95)
# Systemd units whose state node_exporter reports (its systemd collector, unit-include).
WATCHED_UNITS = ("slurmctld", "slurmd", "slurmdbd", "munge", "nvidia-persistenced",
                 "nvidia-fabricmanager", "nvidia-dcgm", "nvidia-dcgm-exporter", "prometheus",
                 "prometheus-alertmanager", "gpuinfra-gpu-metrics")
# File systems the disk alert ignores (memory, container layers, images).
VIRTUAL_FS = "tmpfs|overlay|squashfs|ramfs|devtmpfs|nsfs|fuse.lxcfs"

# ------------------------------------------------------------------------------ knob rules

DURATION = text(r"[1-9][0-9]{0,4}(s|m|h|d|w|y)", "a duration such as '15s', '30d' or '1y'",
                "a Prometheus duration")
RECEIVER_NAME = text(r"[a-z][a-z0-9_-]{0,31}", "a receiver name: lower-case letter first, "
                     "then lower-case letters, digits, '_' or '-' (max 32)", "a receiver name")
EMAIL = text(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}", "an e-mail address",
             "an e-mail address")
SMARTHOST = text(r"[A-Za-z0-9.-]+:[0-9]{1,5}", "host:port of the SMTP server", "host:port")
ALERT_NAME = text(r"[A-Z][A-Za-z0-9]{0,63}", "an alert name such as 'GpuMissing'",
                  "an alert name")


def _receiver_problem(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return "must be a dict"
    allowed = {"name", "webhook_url", "email_to", "email_from", "smarthost", "severities",
               "alerts"}
    unknown = sorted(set(map(str, value)) - allowed)
    if unknown:
        return f"unknown key {unknown[0]!r} (keys: {', '.join(sorted(allowed))})"
    if "name" not in value:
        return "needs a 'name'"
    problem = RECEIVER_NAME.problem(value["name"])
    if problem or value["name"] == NO_RECEIVER:
        return f"name: {problem or 'reserved'}"
    kinds = [k for k in ("webhook_url", "email_to") if k in value]
    if len(kinds) != 1:
        return "needs exactly one of 'webhook_url' or 'email_to'"
    checks: dict[str, Rule] = {"webhook_url": http_url(), "email_to": EMAIL,
                               "email_from": EMAIL, "smarthost": SMARTHOST,
                               "severities": list_of(text("|".join(SEVERITIES), ", ".join(
                                   SEVERITIES)), non_empty=True),
                               "alerts": list_of(ALERT_NAME, non_empty=True)}
    for key, rule in checks.items():
        if key in value:
            problem = rule.problem(value[key])
            if problem:
                return f"{key}: {problem}"
    if "email_to" in value and not {"email_from", "smarthost"} <= set(value):
        return "an e-mail receiver needs 'email_from' and 'smarthost'"
    if "alerts" in value:
        unknown_alerts = sorted(set(value["alerts"]) - set(ALERT_NAMES))
        if unknown_alerts:
            return f"alerts: {unknown_alerts[0]!r} is not one of the site's alerts"
    return None


RECEIVERS = list_of(
    Rule("{'name': 'ops', 'webhook_url': 'http://...'} or {'name': 'mail', 'email_to': "
         "'ops@site', 'email_from': 'am@site', 'smarthost': 'mail:25'}, optionally with "
         f"'severities' (of {', '.join(SEVERITIES)}) and 'alerts' (alert names)",
         _receiver_problem),
    "a list of receivers: {'name', 'webhook_url' | 'email_to' + 'email_from' + 'smarthost', "
    "'severities', 'alerts'}")
SLURM_EXPORTER = mapping_of(
    text("version|sha256|url", "'version', 'sha256', 'url'"),
    text(r"[0-9A-Za-z.:/_~%+-]{1,200}", "text without spaces or quotes"),
    "None, or {'version': '1.6.0', 'sha256': '<64 hex digits of the release tarball>'} "
    "(optionally 'url': a mirror of the tarball)")


def slurm_exporter_problem(value: Any) -> str | None:
    """The problem with a ``monitoring_slurm_exporter`` value (None: fine)."""
    if value is None:
        return None
    problem = SLURM_EXPORTER.problem(value)
    if problem:
        return problem
    if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", str(value.get("version", ""))):
        return "needs 'version' as three numbers, e.g. '1.6.0'"
    if not re.fullmatch(r"[0-9a-f]{64}", str(value.get("sha256", ""))):
        return "needs 'sha256': the tarball's SHA-256 (64 lower-case hex digits)"
    if "url" in value:
        return http_url().problem(value["url"])
    return None


SLURM_EXPORTER_RULE = Rule(SLURM_EXPORTER.allowed, slurm_exporter_problem)

JOB_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]{0,63}")
OWN_JOBS = ("prometheus", "alertmanager", "node", "dcgm", "slurm")


def _plain(value: Any, depth: int = 0) -> bool:
    """YAML-able plain data: str, int, float, bool, None, lists and str-keyed dicts of it."""
    if depth > 8:
        return False
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _scrape_extra_problem(value: Any) -> str | None:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return "must be a list"
    names = []
    for index, job in enumerate(value):
        if not isinstance(job, Mapping) or not _plain(job):
            return f"item {index}: must be a dict of plain values (text, numbers, lists, dicts)"
        name = job.get("job_name")
        if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
            return f"item {index}: needs a 'job_name' (letters, digits, '_', '-')"
        if name in OWN_JOBS or name in names:
            return f"item {index}: job_name {name!r} is taken"
        names.append(name)
    return None


# Extra scrape jobs of the site (IPMI, switches, storage...), as Prometheus' scrape_config
# dicts: dumped as data into prometheus.yml and judged whole by `promtool check config`.
SCRAPE_EXTRA = Rule("a list of Prometheus scrape_config dicts, each with its own 'job_name'",
                    _scrape_extra_problem)
SLURM_EXPORTER_PORT = 9092  # rivosinc/prometheus-slurm-exporter's listen port
DCGM_EXPORTER_PORT = 9400  # dcgm-exporter's default listen port


def slurm_exporter_url(value: Mapping[str, str]) -> str:
    """Where the Slurm exporter's release tarball is (the site's mirror, else GitHub)."""
    version = value["version"]
    return value.get("url") or (
        "https://github.com/rivosinc/prometheus-slurm-exporter/releases/download/"
        f"v{version}/prometheus-slurm-exporter_{version}_linux_amd64.tar.gz")


# ------------------------------------------------------------------------------ the settings

@dataclass(frozen=True)
class Monitoring:
    """The site's monitoring settings (the role's knobs, checked by the gate)."""

    scrape_interval: str = "30s"
    scrape_extra: tuple[Mapping[str, Any], ...] = ()
    retention: str = "30d"
    prometheus_port: int = 9090
    alertmanager_port: int = 9093
    node_exporter_port: int = 9100
    grafana_port: int = 3000
    grafana: bool = False
    dcgm: bool = False
    slurm_exporter: bool = False
    gpu_temperature_max: int = 85
    disk_free_min_percent: int = 10
    receivers: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Monitoring:
        """From a node's checked knob values (``monitoring_*``)."""
        return cls(
            scrape_interval=settings["monitoring_scrape_interval"],
            scrape_extra=tuple(settings["monitoring_scrape_extra"]),
            retention=settings["monitoring_retention"],
            prometheus_port=settings["monitoring_prometheus_port"],
            alertmanager_port=settings["monitoring_alertmanager_port"],
            node_exporter_port=settings["monitoring_node_exporter_port"],
            grafana_port=settings["monitoring_grafana_port"],
            grafana=settings["monitoring_grafana"],
            dcgm=settings["monitoring_dcgm"],
            slurm_exporter=settings["monitoring_slurm_exporter"] is not None,
            gpu_temperature_max=settings["monitoring_gpu_temperature_max"],
            disk_free_min_percent=settings["monitoring_disk_free_min_percent"],
            receivers=tuple(settings["monitoring_alert_receivers"]),
        )


def _address(node: NodeSpec) -> str:
    """Where the node answers on the cluster network: its address, else its name."""
    if node.address is None:
        return node.name
    return f"[{node.address}]" if ":" in node.address else node.address


def target(node: NodeSpec, port: int) -> str:
    return f"{_address(node)}:{port}"


def _head(spec: ClusterSpec) -> NodeSpec:
    return spec.head[0]


def _static(nodes: Sequence[NodeSpec], port: int, role: bool = False) -> list[dict[str, Any]]:
    out = []
    for node in nodes:
        labels = {"instance": node.short_name}
        if role:
            labels["role"] = "head" if node.is_head else "worker"
        out.append({"targets": [target(node, port)], "labels": labels})
    return out


# ------------------------------------------------------------------------------ prometheus.yml

def prometheus_config(spec: ClusterSpec, mon: Monitoring,
                      rules_path: str = RULES_PATH) -> dict[str, Any]:
    """prometheus.yml: every node's node_exporter, Prometheus and Alertmanager on the head,
    DCGM on GPU nodes and the Slurm exporter on the head where enabled; alerts to the head's
    Alertmanager; the site's rule file."""
    head = _head(spec)
    jobs: list[dict[str, Any]] = [
        {"job_name": "prometheus", "static_configs": _static([head], mon.prometheus_port)},
        {"job_name": "alertmanager", "static_configs": _static([head], mon.alertmanager_port)},
        {"job_name": "node", "static_configs": _static(spec.nodes, mon.node_exporter_port,
                                                       role=True)},
    ]
    if mon.dcgm and spec.gpu_nodes:
        jobs.append({"job_name": "dcgm",
                     "static_configs": _static(spec.gpu_nodes, DCGM_EXPORTER_PORT)})
    if mon.slurm_exporter and "slurm" in spec.schedulers:
        jobs.append({"job_name": "slurm", "scrape_timeout": mon.scrape_interval,
                     "static_configs": _static([head], SLURM_EXPORTER_PORT)})
    jobs += [dict(job) for job in mon.scrape_extra]
    return {
        "global": {"scrape_interval": mon.scrape_interval,
                   "evaluation_interval": mon.scrape_interval,
                   "external_labels": {"cluster": spec.name}},
        "alerting": {"alertmanagers": [
            {"static_configs": [{"targets": [target(head, mon.alertmanager_port)]}]}]},
        "rule_files": [rules_path],
        "scrape_configs": jobs,
    }


def prometheus_args(spec: ClusterSpec, mon: Monitoring) -> str:
    """``ARGS`` of /etc/default/prometheus: listen on the head's cluster address only, keep
    ``retention`` of samples."""
    head = _head(spec)
    return (f"--web.listen-address={target(head, mon.prometheus_port)} "
            f"--storage.tsdb.retention.time={mon.retention}")


def alertmanager_args(spec: ClusterSpec, mon: Monitoring) -> str:
    """``ARGS`` of /etc/default/prometheus-alertmanager: the head's cluster address; no
    gossip port (one Alertmanager: ``--cluster.listen-address=`` empty turns it off)."""
    head = _head(spec)
    return (f"--web.listen-address={target(head, mon.alertmanager_port)} "
            "--cluster.listen-address=")


def node_exporter_args(node: NodeSpec, mon: Monitoring, textfile_dir: str) -> str:
    """``ARGS`` of /etc/default/prometheus-node-exporter: the node's cluster address, the
    textfile directory of the GPU collector, and the state of the units the alerts watch.
    (No backslash in the regular expression: the file is read by systemd and a shell.)"""
    units = "|".join(WATCHED_UNITS)
    return (f"--web.listen-address={target(node, mon.node_exporter_port)} "
            f"--collector.textfile.directory={textfile_dir} --collector.systemd "
            f"--collector.systemd.unit-include=({units})[.]service")


# ------------------------------------------------------------------------------ alert rules

@dataclass(frozen=True)
class Case:
    """A site state for a rule test: series changed from the healthy site (``set``: series ->
    promtool values; ``drop``: series removed) and the alert labels expected to fire."""

    set: Mapping[str, str] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    fires: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True)
class Alert:
    """One alerting rule, with the site states that must (and must not) fire it."""

    name: str
    expr: str
    duration: str
    severity: str
    summary: str  # may use {{ $labels.x }} only (rendered for the tests as well)
    description: str  # cause and fix
    firing: tuple[Case, ...]

    def rule(self) -> dict[str, Any]:
        return {"alert": self.name, "expr": self.expr, "for": self.duration,
                "labels": {"severity": self.severity},
                "annotations": {"summary": self.summary, "description": self.description}}


def _sel(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _gpu(node: NodeSpec, index: int) -> dict[str, str]:
    return {"instance": node.short_name, "gpu": str(index),
            "uuid": f"GPU-{node.short_name}-{index}"}


def _per_gpu(node: NodeSpec) -> list[dict[str, str]]:
    return [_gpu(node, i) for i in range(node.gpus.count)] if node.gpus else []


def _link_groups(node: NodeSpec) -> dict[int, list[int]]:
    """Expected active NVLink links -> the GPUs (indices) that must show them (0 left out)."""
    assert node.gpus is not None
    expected = expected_active_links(node.gpus.topology, node.gpus.model, node.gpus.count)
    groups: dict[int, list[int]] = {}
    for index, links in enumerate(expected):
        if links:
            groups.setdefault(links, []).append(index)
    return groups


def _gpu_regex(indices: Sequence[int]) -> str:
    return "|".join(str(i) for i in indices)


def alerts(spec: ClusterSpec, mon: Monitoring) -> list[Alert]:
    """The site's alert rules, with their test cases."""
    out: list[Alert] = []
    nodes = spec.nodes
    first = nodes[0].short_name
    out.append(Alert(
        "NodeDown", 'up{job="node"} == 0', "2m", "critical",
        "{{ $labels.instance }}: node_exporter does not answer",
        "The node is down, or node_exporter stopped, or the cluster network/firewall blocks "
        f"port {mon.node_exporter_port}. Check `systemctl status prometheus-node-exporter` on "
        "the node and reach it from the head.",
        (Case(set={f'up{_sel(job="node", instance=first)}': "0x15"},
              fires=({"job": "node", "instance": first},)),)))
    out.append(Alert(
        "DiskAlmostFull",
        f'node_filesystem_avail_bytes{{fstype!~"{VIRTUAL_FS}"}} * 100 / '
        f'node_filesystem_size_bytes{{fstype!~"{VIRTUAL_FS}"}} < {mon.disk_free_min_percent}',
        "10m", "warning",
        "{{ $labels.instance }}: {{ $labels.mountpoint }} has less than "
        f"{mon.disk_free_min_percent}% free",
        "A full disk stops Slurm (state files), Prometheus (samples) and jobs. Free space or "
        "grow the file system; `du -xh --max-depth=1` on the mount point.",
        (Case(set={_fs("avail", first): f"{mon.disk_free_min_percent - 1}x15"},
              fires=({"instance": first, "mountpoint": "/", "fstype": "ext4",
                      "device": "/dev/sda1", "job": "node"},)),)))
    if "slurm" in spec.schedulers:
        out += _slurm_alerts(spec, mon)
    out += _gpu_alerts(spec, mon)
    return out


def _fs(kind: str, instance: str) -> str:
    labels = _sel(job="node", instance=instance, mountpoint="/", fstype="ext4",
                  device="/dev/sda1")
    return f"node_filesystem_{kind}_bytes{labels}"


def _unit(instance: str, unit: str) -> str:
    return (f"node_systemd_unit_state"
            f'{_sel(job="node", instance=instance, name=unit + ".service", state="active")}')


def _slurm_alerts(spec: ClusterSpec, mon: Monitoring) -> list[Alert]:
    head = _head(spec).short_name
    workers = [n.short_name for n in spec.workers]
    out = [Alert(
        "SlurmctldDown", f'{_unit(head, "slurmctld")} == 0', "2m", "critical",
        "{{ $labels.instance }}: slurmctld is not running",
        "No job is scheduled while the controller is down. `journalctl -u slurmctld` on the "
        "head (a refused slurm.conf, the state directory, munge); deploy again.",
        (Case(set={_unit(head, "slurmctld"): "0x15"},
              fires=({"job": "node", "instance": head, "name": "slurmctld.service",
                      "state": "active"},)),))]
    if workers:
        regex = "|".join(workers)
        out.append(Alert(
            "SlurmdDown",
            f'node_systemd_unit_state{{name="slurmd.service",state="active",'
            f'instance=~"{regex}"}} == 0', "2m", "critical",
            "{{ $labels.instance }}: slurmd is not running",
            "The node takes no jobs. `journalctl -u slurmd` on the node: a gres.conf File= that "
            "does not exist (GPU device nodes missing, driver not loaded), or munge down.",
            (Case(set={_unit(workers[0], "slurmd"): "0x15"},
                  fires=({"job": "node", "instance": workers[0], "name": "slurmd.service",
                          "state": "active"},)),)))
    out.append(Alert(
        "SlurmNodesDrained",
        'sum(slurm_node_count_per_state{state=~"drain.*|down.*|fail.*"}) > 0', "5m", "warning",
        "Slurm has drained or down nodes",
        "Some nodes take no jobs. `sinfo -R` on the head names them with Slurm's reason; fix "
        "the cause, then `scontrol update nodename=NODE state=resume`. (From the Slurm "
        "exporter, monitoring_slurm_exporter.)",
        (Case(set={_slurm_nodes(head, "drained"): "1x15"}, fires=({},)),)))
    return out


def _slurm_nodes(instance: str, state: str) -> str:
    return f"slurm_node_count_per_state{_sel(job='slurm', instance=instance, state=state)}"


def _gpu_alerts(spec: ClusterSpec, mon: Monitoring) -> list[Alert]:
    gpu_nodes = spec.gpu_nodes
    if not gpu_nodes:
        return []
    out: list[Alert] = []
    node = gpu_nodes[0]
    g0 = _gpu(node, 0)
    info0 = f"gpuinfra_gpu_info{_sel(job='node', **g0)}"
    missing = []
    for n in gpu_nodes:
        assert n.gpus is not None
        sel = _sel(instance=n.short_name)
        missing.append(f"count by (instance) (gpuinfra_gpu_info{sel}) < {n.gpus.count} "
                       f"or absent(gpuinfra_gpu_info{sel})")
    all_gpus = tuple(f"gpuinfra_gpu_info{_sel(job='node', **g)}" for g in _per_gpu(node))
    out.append(Alert(
        "GpuMissing", " or ".join(f"({m})" for m in missing), "2m", "critical",
        "{{ $labels.instance }} shows fewer GPUs than the spec gives it",
        "nvidia-smi lists fewer GPUs than gpu_count (or the GPU collector reports none): a GPU "
        "fell off the bus (XID 79), is not seated, or the driver is not loaded. `nvidia-smi -L` "
        "and the kernel log on the node; reseat/replace, or fix gpu_count in the spec.",
        (Case(drop=(info0,), fires=({"instance": node.short_name},)),
         Case(drop=all_gpus, fires=({"instance": node.short_name},)))))
    out.append(Alert(
        "GpuXidErrors", "gpuinfra_gpu_xid_errors > 0", "0m", "warning",
        "{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ $labels.pci_bus_id }}) logged XID "
        "errors since boot",
        "The driver reported GPU errors (NVRM: Xid in the kernel log). Read the codes in "
        "`journalctl -k | grep Xid` and NVIDIA's XID catalog; many are application faults, "
        "the fatal ones raise GpuFatalXid.",
        (Case(set={_gpu_series("xid_errors", node, 0): "2x15"},
              fires=({**g0, "job": "node", "pci_bus_id": _bus(0)},)),)))
    fatal = "|".join(str(x) for x in FATAL_XIDS)
    out.append(Alert(
        "GpuFatalXid", " or ".join(f"gpuinfra_gpu_last_xid == {x}" for x in FATAL_XIDS),
        "0m", "critical",
        "{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ $labels.pci_bus_id }}): fatal XID",
        f"The last XID ({fatal}) means the GPU needs a reset or service: drain the node, "
        "`nvidia-smi -r` or reboot, and replace the GPU if it comes back (79: fallen off the "
        "bus; 48/94/95: uncorrectable ECC; 63/64: row remapping; 74: NVLink).",
        (Case(set={_gpu_series("xid_errors", node, 0): "1x15",
                   _gpu_series("last_xid", node, 0): "79x15"},
              fires=({**g0, "job": "node", "pci_bus_id": _bus(0)},)),)))
    out.append(Alert(
        "GpuUncorrectableEcc", "gpuinfra_gpu_ecc_uncorrected_volatile_errors > 0", "0m",
        "critical",
        "{{ $labels.instance }} GPU {{ $labels.gpu }}: uncorrectable ECC errors",
        "Memory errors the GPU could not correct since the driver loaded: jobs on it may have "
        "computed garbage. Drain the node, reset the GPU (pending row remaps/retirements apply "
        "then); replace it when they come back.",
        (Case(set={_gpu_series("ecc_uncorrected_volatile_errors", node, 0): "3x15"},
              fires=({**g0, "job": "node"},)),)))
    out.append(Alert(
        "GpuMemoryNeedsReset",
        "gpuinfra_gpu_retired_pages_pending == 1 or gpuinfra_gpu_remapped_rows_pending == 1",
        "0m", "warning",
        "{{ $labels.instance }} GPU {{ $labels.gpu }}: a page retirement or row remap waits "
        "for a GPU reset",
        "The bad memory is still in use until the GPU is reset. Drain the node and reset the "
        "GPU (`nvidia-smi -r`) or reboot.",
        (Case(set={_gpu_series("remapped_rows_pending", node, 0): "1x15"},
              fires=({**g0, "job": "node"},)),)))
    out.append(Alert(
        "GpuRetiredPagesOrRemapFailure",
        "gpuinfra_gpu_remapped_rows_failure == 1 or gpuinfra_gpu_retired_pages_double_bit > 0",
        "0m", "critical",
        "{{ $labels.instance }} GPU {{ $labels.gpu }}: memory retired for uncorrectable errors "
        "or row remapping failed",
        "The GPU's memory is failing (retired double-bit pages, or no spare row left). Take it "
        "out of service and have it replaced (RMA).",
        (Case(set={_gpu_series("remapped_rows_failure", node, 0): "1x15"},
              fires=({**g0, "job": "node"},)),)))
    out.append(Alert(
        "GpuTemperatureHigh", f"gpuinfra_gpu_temperature_celsius > {mon.gpu_temperature_max}",
        "5m", "warning",
        "{{ $labels.instance }} GPU {{ $labels.gpu }} runs hotter than "
        f"{mon.gpu_temperature_max} C",
        "Cooling: fans, airflow, inlet temperature, a blocked heat sink. Hot GPUs slow down "
        "(thermal throttling) and fail sooner.",
        (Case(set={_gpu_series("temperature_celsius", node, 0):
                   f"{mon.gpu_temperature_max + 5}x15"},
              fires=({**g0, "job": "node"},)),)))
    out += _nvlink_alerts(gpu_nodes)
    out.append(Alert(
        "GpuMetricsStale",
        "time() - gpuinfra_gpu_collector_last_run_timestamp_seconds > 300", "5m", "warning",
        "{{ $labels.instance }}: the GPU metrics collector has not run for 5 minutes",
        "gpuinfra-gpu-metrics.timer stopped or its runs fail: `systemctl status "
        "gpuinfra-gpu-metrics.timer gpuinfra-gpu-metrics.service` on the node.",
        (Case(set={_collector(node): "0x15"}, fires=({"job": "node",
                                                      "instance": node.short_name},)),)))
    return out


def _nvlink_alerts(gpu_nodes: Sequence[NodeSpec]) -> list[Alert]:
    down, slow = [], []
    down_case = slow_case = None
    for node in gpu_nodes:
        assert node.gpus is not None
        groups = _link_groups(node)
        for links, indices in groups.items():
            sel = _sel(instance=node.short_name)[:-1] + f',gpu=~"{_gpu_regex(indices)}"}}'
            down.append(f"gpuinfra_gpu_nvlink_links_active{sel} < {links}")
            if down_case is None:
                down_case = Case(
                    set={_gpu_series("nvlink_links_active", node, indices[0]): f"{links - 1}x15"},
                    fires=({**_gpu(node, indices[0]), "job": "node"},))
        if groups and node.gpus.model.link_gbps:
            rate = node.gpus.model.link_gbps
            slow.append(f"gpuinfra_gpu_nvlink_link_min_gbps{_sel(instance=node.short_name)} "
                        f"< {rate - 0.01:g}")
            if slow_case is None:
                first = min(i for idx in groups.values() for i in idx)
                slow_case = Case(
                    set={_gpu_series("nvlink_link_min_gbps", node, first): f"{rate / 2:g}x15"},
                    fires=({**_gpu(node, first), "job": "node"},))
    out = []
    if down:
        out.append(Alert(
            "NvlinkDown", " or ".join(down), "2m", "critical",
            "{{ $labels.instance }} GPU {{ $labels.gpu }}: fewer NVLink links up than its "
            "topology has",
            "An NVLink link is down: bridge not seated, NVSwitch/Fabric Manager trouble, or a "
            "failing link (XID 74). `nvidia-smi nvlink --status` on the node; `gpuinfra report`.",
            (down_case,)))  # type: ignore[arg-type]
    if slow:
        out.append(Alert(
            "NvlinkDegraded", " or ".join(slow), "5m", "warning",
            "{{ $labels.instance }} GPU {{ $labels.gpu }}: an NVLink link runs below its rate",
            "A link trained at a lower speed than its generation's: reseat the bridge, check "
            "Fabric Manager; `nvidia-smi nvlink --status` shows the rate of each link.",
            (slow_case,)))  # type: ignore[arg-type]
    return out


def _bus(index: int) -> str:
    return f"0000:{0x10 + index:02x}:00"


def _gpu_series(metric: str, node: NodeSpec, index: int) -> str:
    labels = {"job": "node", **_gpu(node, index)}
    if metric in ("xid_errors", "last_xid"):
        labels["pci_bus_id"] = _bus(index)
    return f"gpuinfra_gpu_{metric}{_sel(**labels)}"


def _collector(node: NodeSpec) -> str:
    return (f"gpuinfra_gpu_collector_last_run_timestamp_seconds"
            f"{_sel(job='node', instance=node.short_name)}")


def rules(spec: ClusterSpec, mon: Monitoring) -> dict[str, Any]:
    """The rule file (``promtool check rules``): one group per concern."""
    found = alerts(spec, mon)
    groups = {"gpuinfra-nodes": ("NodeDown", "DiskAlmostFull"),
              "gpuinfra-slurm": ("SlurmctldDown", "SlurmdDown", "SlurmNodesDrained")}
    out: dict[str, list[dict[str, Any]]] = {}
    for alert in found:
        group = next((g for g, names in groups.items() if alert.name in names), "gpuinfra-gpus")
        out.setdefault(group, []).append(alert.rule())
    return {"groups": [{"name": name, "rules": rules} for name, rules in out.items()]}


ALERT_NAMES = ("NodeDown", "DiskAlmostFull", "SlurmctldDown", "SlurmdDown", "SlurmNodesDrained",
               "GpuMissing", "GpuXidErrors", "GpuFatalXid", "GpuUncorrectableEcc",
               "GpuMemoryNeedsReset", "GpuRetiredPagesOrRemapFailure", "GpuTemperatureHigh",
               "NvlinkDown", "NvlinkDegraded", "GpuMetricsStale")


# ------------------------------------------------------------------------------ rule tests

def healthy_series(spec: ClusterSpec, mon: Monitoring) -> dict[str, str]:
    """Series of a healthy site, each just on the safe side of its alert (promtool values)."""
    series: dict[str, str] = {}
    for node in spec.nodes:
        name = node.short_name
        series[f'up{_sel(job="node", instance=name)}'] = "1x15"
        series[_fs("avail", name)] = f"{mon.disk_free_min_percent + 1}x15"
        series[_fs("size", name)] = "100x15"
        if "slurm" in spec.schedulers:
            unit = "slurmctld" if node.is_head else "slurmd" if node.is_worker else None
            if unit:
                series[_unit(name, unit)] = "1x15"
        for index, labels in enumerate(_per_gpu(node)):
            series[f"gpuinfra_gpu_info{_sel(job='node', **labels)}"] = "1x15"
            series[_gpu_series("temperature_celsius", node, index)] = \
                f"{mon.gpu_temperature_max}x15"
            series[_gpu_series("xid_errors", node, index)] = "0x15"
            for metric in ("ecc_uncorrected_volatile_errors", "retired_pages_pending",
                           "remapped_rows_pending", "remapped_rows_failure",
                           "retired_pages_double_bit"):
                series[_gpu_series(metric, node, index)] = "0x15"
        if node.gpus is not None:
            series[_collector(node)] = "0+60x15"  # runs every minute: time() - ts stays 0
            expected = expected_active_links(node.gpus.topology, node.gpus.model,
                                             node.gpus.count)
            for index, links in enumerate(expected):
                if links:
                    series[_gpu_series("nvlink_links_active", node, index)] = f"{links}x15"
                    series[_gpu_series("nvlink_link_min_gbps", node, index)] = \
                        f"{node.gpus.model.link_gbps:g}x15"
    if "slurm" in spec.schedulers:
        series[_slurm_nodes(_head(spec).short_name, "idle")] = f"{len(spec.workers)}x15"
    return series


_LABEL_REF = re.compile(r"\{\{ \$labels\.(\w+) \}\}")


def _render(template: str, labels: Mapping[str, str]) -> str:
    return _LABEL_REF.sub(lambda m: labels.get(m[1], ""), template)


def _expected(alert: Alert, labels: Mapping[str, str]) -> dict[str, Any]:
    return {"exp_labels": {**labels, "severity": alert.severity},
            "exp_annotations": {"summary": _render(alert.summary, labels),
                                "description": alert.description}}


def _series_list(series: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"series": name, "values": values} for name, values in series.items()]


def rule_tests(spec: ClusterSpec, mon: Monitoring, rules_file: str) -> dict[str, Any]:
    """``promtool test rules`` input: on the healthy site no alert fires; in each alert's
    cases that alert fires with exactly the expected labels and annotations."""
    found = alerts(spec, mon)
    healthy = healthy_series(spec, mon)
    eval_time = "14m"  # past every rule's `for` (10m at most)
    tests = [{"name": "healthy site: no alert fires", "interval": "1m",
              "input_series": _series_list(healthy),
              "alert_rule_test": [{"eval_time": eval_time, "alertname": a.name,
                                   "exp_alerts": []} for a in found]}]
    for alert in found:
        for number, case in enumerate(alert.firing, 1):
            series = {k: v for k, v in healthy.items() if k not in case.drop}
            series.update(case.set)
            tests.append({
                "name": f"{alert.name} fires (case {number})", "interval": "1m",
                "input_series": _series_list(series),
                "alert_rule_test": [{"eval_time": eval_time, "alertname": alert.name,
                                     "exp_alerts": [_expected(alert, labels)
                                                    for labels in case.fires]}]})
    return {"rule_files": [rules_file], "evaluation_interval": "1m", "tests": tests}


# ------------------------------------------------------------------------------ alertmanager

def alertmanager_config(spec: ClusterSpec, mon: Monitoring) -> dict[str, Any]:
    """alertmanager.yml: every alert kept (receiver gpuinfra-none: shown, not sent); each
    receiver of the data gets the alerts of its severities and names (``continue``: several
    receivers may get one alert)."""
    receivers: list[dict[str, Any]] = [{"name": NO_RECEIVER}]
    routes = []
    for item in mon.receivers:
        receiver: dict[str, Any] = {"name": item["name"]}
        if "webhook_url" in item:
            receiver["webhook_configs"] = [{"url": item["webhook_url"], "send_resolved": True}]
        else:
            receiver["email_configs"] = [{"to": item["email_to"], "from": item["email_from"],
                                          "smarthost": item["smarthost"],
                                          "send_resolved": True}]
        receivers.append(receiver)
        matchers = [f'severity=~"{"|".join(item.get("severities", SEVERITIES))}"']
        if "alerts" in item:
            matchers.append(f'alertname=~"{"|".join(item["alerts"])}"')
        routes.append({"receiver": item["name"], "matchers": matchers, "continue": True})
    route: dict[str, Any] = {"receiver": NO_RECEIVER, "group_by": ["alertname", "instance"],
                             "group_wait": "30s", "group_interval": "5m",
                             "repeat_interval": "4h"}
    if routes:
        route["routes"] = routes
    return {"route": route, "receivers": receivers}


# ------------------------------------------------------------------------------ grafana

def grafana_datasource(spec: ClusterSpec, mon: Monitoring) -> dict[str, Any]:
    """/etc/grafana/provisioning/datasources/gpuinfra.yaml."""
    head = _head(spec)
    return {"apiVersion": 1, "datasources": [{
        "name": f"Prometheus ({spec.name})", "uid": DATASOURCE_UID, "type": "prometheus",
        "access": "proxy", "url": f"http://{target(head, mon.prometheus_port)}",
        "isDefault": True, "editable": False}]}


def grafana_dashboards_provider(path: str) -> dict[str, Any]:
    """/etc/grafana/provisioning/dashboards/gpuinfra.yaml: dashboards read from ``path``."""
    return {"apiVersion": 1, "providers": [{
        "name": "gpuinfra", "folder": "GPU cluster", "type": "file",
        "disableDeletion": True, "allowUiUpdates": False, "options": {"path": path}}]}


def _panel(number: int, title: str, exprs: Sequence[tuple[str, str]], unit: str,
           kind: str = "timeseries") -> dict[str, Any]:
    width = 12
    return {
        "id": number, "type": kind, "title": title,
        "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
        "gridPos": {"h": 8, "w": width, "x": (number - 1) % 2 * width,
                    "y": (number - 1) // 2 * 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
                    for i, (expr, legend) in enumerate(exprs)],
    }


def grafana_dashboard(spec: ClusterSpec, mon: Monitoring) -> dict[str, Any]:
    """The GPU-cluster dashboard: GPUs seen against the spec per node, temperature, power,
    utilisation, memory, NVLink links up, XIDs and ECC, nodes up; Slurm node states and DCGM's
    tensor activity where those exporters run."""
    expected = " or ".join(f'label_replace(vector({n.gpus.count}), "instance", "{n.short_name}",'
                           f' "", "")' for n in spec.gpu_nodes if n.gpus)
    panels = [
        ("GPUs seen / in the spec", [("count by (instance) (gpuinfra_gpu_info)",
                                      "{{instance}} seen")]
         + ([(expected, "{{instance}} spec")] if expected else []), "none"),
        ("GPU temperature", [("gpuinfra_gpu_temperature_celsius",
                              "{{instance}} GPU{{gpu}}")], "celsius"),
        ("GPU power", [("gpuinfra_gpu_power_draw_watts", "{{instance}} GPU{{gpu}}")], "watt"),
        ("GPU utilisation", [("gpuinfra_gpu_utilization_ratio", "{{instance}} GPU{{gpu}}")],
         "percentunit"),
        ("GPU memory used", [("gpuinfra_gpu_memory_used_bytes", "{{instance}} GPU{{gpu}}")],
         "bytes"),
        ("NVLink links up", [("gpuinfra_gpu_nvlink_links_active", "{{instance}} GPU{{gpu}}")],
         "none"),
        ("XID errors since boot, uncorrectable ECC",
         [("gpuinfra_gpu_xid_errors", "{{instance}} GPU{{gpu}} XIDs"),
          ("gpuinfra_gpu_ecc_uncorrected_volatile_errors", "{{instance}} GPU{{gpu}} ECC")],
         "none"),
        ("Nodes up", [('up{job="node"}', "{{instance}}")], "none"),
    ]
    if mon.slurm_exporter and "slurm" in spec.schedulers:
        panels.append(("Slurm nodes by state", [("slurm_node_count_per_state", "{{state}}")],
                       "none"))
    if mon.dcgm:
        panels.append(("Tensor core activity (DCGM)",
                       [("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "{{instance}} GPU{{gpu}}")],
                       "percentunit"))
    return {
        "uid": f"gpuinfra-{spec.name}"[:40], "title": f"GPU cluster {spec.name}",
        "tags": ["gpuinfra"], "timezone": "browser", "schemaVersion": 39, "version": 1,
        "editable": False, "refresh": "1m", "time": {"from": "now-6h", "to": "now"},
        "panels": [_panel(i, title, exprs, unit) for i, (title, exprs, unit)
                   in enumerate(panels, 1)],
    }
