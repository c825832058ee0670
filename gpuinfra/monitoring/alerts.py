"""The alert rules of a site, built as data from the spec, each with the site states that must
fire it (its :class:`AlertCase` list, turned into ``promtool test rules`` input by
:mod:`gpuinfra.monitoring.alerts_tests`).

The role dumps :func:`rules` with pyyaml into the file prometheus.yml's ``rule_files`` names;
``promtool check config`` loads it before it goes live. Alerts name nodes by ``instance`` = the
node's short name, the label every scrape target carries (:mod:`gpuinfra.monitoring.scrape`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuinfra.health.thresholds import ECC_MAX
from gpuinfra.knowledge.topology import expected_active_links
from gpuinfra.knowledge.xids import drain_xids
from gpuinfra.logs.journal import AGE_METRIC, STALE_S, uploaders
from gpuinfra.monitoring.gpumetrics import RECOVERY_ACTION_XID
from gpuinfra.monitoring.series import (
    DRAIN_REASON,
    Alert,
    AlertCase,
    breaker_series,
    collector_series,
    filesystem_series,
    gpu_labels,
    gpu_labels_of,
    gpu_series,
    health_nodes,
    health_series,
    health_stale_seconds,
    logs_series,
    pci_bus_id,
    roll_series,
    selector,
    slurm_nodes_series,
    slurm_state_series,
    unit_active_series,
)
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.monitoring.slurmnodes import UNAVAILABLE
from gpuinfra.monitoring.stack_alerts import stack_alerts, unit_down
from gpuinfra.spec.model import ClusterSpec, NodeSpec

# File systems the disk alert ignores (memory, container layers, images).
VIRTUAL_FS = "tmpfs|overlay|squashfs|ramfs|devtmpfs|nsfs|fuse.lxcfs"

ALERT_NAMES = ("NodeDown", "DiskAlmostFull", "SlurmctldDown", "SlurmctldBackupDown", "SlurmdDown",
               "SlurmNodesDrained",
               "GpuMissing", "GpuXidErrors", "GpuFatalXid", "GpuDriverFailure",
               "GpuUncorrectableEcc", "GpuMemoryNeedsReset", "GpuRetiredPagesOrRemapFailure",
               "GpuTemperatureHigh",
               "NvlinkDown", "NvlinkDegraded", "GpuMetricsStale", "NodeDrainedByHealthCheck",
               "NodeHealthCheckFailed", "NodeTaintedByHealthCheck", "NodeHealthCheckStale",
               "NodeLogsStale", "FabricManagerDown", "DcgmExporterDown", "KubeletDown",
               "InfinibandPortDown", "InfinibandRateDegraded", "InfinibandLinkErrors",
               "HealthBreakerTripped", "RollStalled", "KubernetesGpusMissing")



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
    """A regular expression matching the ``gpu`` labels of ``indices``."""
    return "|".join(str(i) for i in indices)


# ------------------------------------------------------------------------------ the alerts

def alerts(spec: ClusterSpec, mon: Monitoring) -> list[Alert]:
    """The site's alert rules, with their test cases."""
    out = _node_alerts(spec, mon)
    if "slurm" in spec.schedulers:
        out += _slurm_alerts(spec)
    out += _gpu_alerts(spec, mon)
    out += _health_alerts(spec)
    out += _logs_alerts(spec)
    out += stack_alerts(spec, mon)
    out += _roll_alerts(spec)
    return out


def _roll_alerts(spec: ClusterSpec) -> list[Alert]:
    """A roll no command drives any more, its nodes left out of service (gpuinfra/roll.py
    writes its series on the head at every step)."""
    from gpuinfra.roll import STALLED_S

    if not spec.workers:
        return []
    head = spec.head[0].short_name
    return [Alert(
        name="RollStalled",
        expr=f"gpuinfra_roll_live == 1 and time() - gpuinfra_roll_last_step_timestamp_seconds "
        f"> {STALLED_S}", duration="5m", severity="warning",
        summary="{{ $labels.instance }}: a roll has not moved for an hour; its nodes wait "
        "out of service",
        description="The `gpuinfra roll` command driving it stopped (a laptop asleep or "
        "killed, its SSH connection lost) before the roll finished: the nodes it drained stay "
        "drained. `gpuinfra roll --inventory inventory/<site>.py --status` shows each node; "
        "run the command that started the roll again to resume it, or `--abandon` to drop it "
        "(its nodes stay as they are: resume them by hand after looking).",
        firing=(AlertCase(set={roll_series("live", head): "1x15",
                               roll_series("last_step_timestamp_seconds", head):
                               f"-{STALLED_S + 60}x15"},
                          fires=({"job": "node", "instance": head},)),),
    )]


def rules(spec: ClusterSpec, mon: Monitoring) -> dict[str, Any]:
    """The rule file (``promtool check rules``): one group per concern."""
    found = alerts(spec, mon)
    groups = {"gpuinfra-nodes": ("NodeDown", "DiskAlmostFull"),
              "gpuinfra-slurm": ("SlurmctldDown", "SlurmctldBackupDown", "SlurmdDown",
                                 "SlurmNodesDrained"),
              "gpuinfra-health": ("NodeDrainedByHealthCheck", "NodeHealthCheckFailed",
                                  "NodeTaintedByHealthCheck", "NodeHealthCheckStale",
                                  "HealthBreakerTripped"),
              "gpuinfra-logs": ("NodeLogsStale",),
              "gpuinfra-roll": ("RollStalled",),
              "gpuinfra-stack": ("FabricManagerDown", "DcgmExporterDown", "KubeletDown",
                                 "InfinibandPortDown", "InfinibandRateDegraded",
                                 "InfinibandLinkErrors", "KubernetesGpusMissing")}
    out: dict[str, list[dict[str, Any]]] = {}
    for alert in found:
        group = next((g for g, names in groups.items() if alert.name in names), "gpuinfra-gpus")
        out.setdefault(group, []).append(alert.rule())
    return {"groups": [{"name": name, "rules": rules} for name, rules in out.items()]}


def _node_alerts(spec: ClusterSpec, mon: Monitoring) -> list[Alert]:
    """Every node: node_exporter answers, disks keep free space."""
    first = spec.nodes[0].short_name
    return [Alert(
        name="NodeDown", expr='up{job="node"} == 0', duration="2m", severity="critical",
        summary="{{ $labels.instance }}: node_exporter does not answer",
        description="The node is down, or node_exporter stopped, or the cluster "
        f"network/firewall blocks port {mon.node_exporter_port}. Check `systemctl status "
        "prometheus-node-exporter` on the node and reach it from the head.",
        firing=(AlertCase(set={f'up{selector(job="node", instance=first)}': "0x15"},
                          fires=({"job": "node", "instance": first},)),),
    ), Alert(
        name="DiskAlmostFull",
        expr=f'node_filesystem_avail_bytes{{fstype!~"{VIRTUAL_FS}"}} * 100 / '
        f'node_filesystem_size_bytes{{fstype!~"{VIRTUAL_FS}"}} < {mon.disk_free_min_percent}',
        duration="10m", severity="warning",
        summary="{{ $labels.instance }}: {{ $labels.mountpoint }} has less than "
        f"{mon.disk_free_min_percent}% free",
        description="A full disk stops Slurm (state files), Prometheus (samples) and jobs. "
        "Free space or grow the file system; `du -xh --max-depth=1` on the mount point.",
        firing=(AlertCase(set={filesystem_series("avail", first):
                               f"{mon.disk_free_min_percent - 1}x15"},
                          fires=({"instance": first, "mountpoint": "/", "fstype": "ext4",
                                  "device": "/dev/sda1", "job": "node"},)),),
    )]


def _slurm_alerts(spec: ClusterSpec) -> list[Alert]:
    """Slurm sites: slurmctld on the head (and on each backup controller), slurmd on the
    workers, no drained nodes."""
    head = spec.head[0].short_name
    workers = [n.short_name for n in spec.workers]
    out = [Alert(
        name="SlurmctldDown", expr=f'{unit_active_series(head, "slurmctld")} == 0',
        duration="2m", severity="critical",
        summary="{{ $labels.instance }}: slurmctld is not running",
        description="No job is scheduled while the controller is down. `journalctl -u "
        "slurmctld` on the head (a refused slurm.conf, the state directory, munge); deploy "
        "again.",
        firing=(AlertCase(set={unit_active_series(head, "slurmctld"): "0x15"},
                          fires=({"job": "node", "instance": head, "name": "slurmctld.service",
                                  "state": "active"},)),),
    )]
    backups = [n.short_name for n in spec.backup_controllers]
    if backups:
        out.append(unit_down(
            "SlurmctldBackupDown", "slurmctld", backups, "5m", "warning",
            "{{ $labels.instance }}: the backup controller's slurmctld is not running",
            "Jobs still run while the head's slurmctld does, but nothing takes over if it "
            "fails. `journalctl -u slurmctld` on the backup (its state folder unmounted, "
            "munge); deploy again."))
    if workers:
        out.append(unit_down(
            "SlurmdDown", "slurmd", workers, "2m", "critical",
            "{{ $labels.instance }}: slurmd is not running",
            "The node takes no jobs. `journalctl -u slurmd` on the node: a gres.conf File= "
            "that does not exist (GPU device nodes missing, driver not loaded), or munge "
            "down."))
    # Three sources, any of which fires it: the head's own Slurm node states (on by default:
    # gpuinfra.monitoring.slurmnodes, every drained, down or failed node, an operator's drain
    # included), the Slurm exporter (off by default: monitoring_slurm_exporter), and the health
    # check's own series (the nodes it drained).
    checked = [n for n in health_nodes(spec) if "slurm" in n.schedulers]
    expr = (f'count(gpuinfra_slurm_node_state{{state=~"{UNAVAILABLE}"}} == 1) > 0 or '
            f'sum(slurm_node_count_per_state{{state=~"{UNAVAILABLE}"}}) > 0')
    cases = [AlertCase(set={slurm_state_series(head, workers[0] if workers else head, "drained",
                                               reason="proof"): "1x15"}, fires=({},)),
             AlertCase(set={slurm_nodes_series(head, "drained"): "1x15"}, fires=({},))]
    if checked:
        expr += " or count(gpuinfra_health_drained == 1) > 0"
        cases.append(AlertCase(set={health_series("drained", checked[0], reason=DRAIN_REASON):
                                    "1x15"}, fires=({},)))
    out.append(Alert(
        name="SlurmNodesDrained", expr=expr, duration="5m", severity="warning",
        summary="Slurm has drained or down nodes",
        description="Some nodes take no jobs. `sinfo -R` on the head names them with Slurm's "
        "reason; fix the cause, then `scontrol update nodename=NODE state=resume` (a node the "
        "health check drained is resumed by the check itself once it passes). From the head's "
        "Slurm node states (gpuinfra_slurm_node_state: every drained, down or failed node, "
        "with its reason), the Slurm exporter (monitoring_slurm_exporter) and the health "
        "check (gpuinfra_health_drained: the nodes it drained).",
        firing=tuple(cases),
    ))
    return out


def breaker_alert(spec: ClusterSpec, node: NodeSpec) -> Alert:
    """HealthBreakerTripped, from the head's series: Slurm's node comments
    (gpuinfra.monitoring.slurmnodes) or the Kubernetes nodes' annotations
    (gpuinfra.monitoring.k8snodes)."""
    head = spec.head[0].short_name
    return Alert(
        name="HealthBreakerTripped", expr="gpuinfra_health_breaker_tripped == 1 or "
        "gpuinfra_kubernetes_breaker_tripped == 1", duration="0m", severity="critical",
        summary="the health check's circuit breaker tripped on {{ $labels.held }}: no node "
        "is drained or tainted automatically until a person resets it",
        description="Automatic drains (Slurm) or taints (Kubernetes) took as many GPU nodes "
        "within health_breaker_window as health_breaker_share allows, and one more failed: "
        "the breaker held it in service instead (a health check or policy bug must never "
        "drain the whole cluster). Failed checks are still reported (NodeHealthCheckFailed). "
        "Look at the drained or tainted nodes (`sinfo -R`, `kubectl describe node`) and the "
        "held one (`gpuinfra-health check --json` on it): a real fault on many nodes (power, "
        "fabric, a bad driver) or a wrong check. Then `gpuinfra health reset-breaker "
        "--inventory inventory/<site>.py`; `gpuinfra health breaker` shows it.",
        firing=tuple(AlertCase(set={breaker_series(head, node.short_name, k8s): "1x15"},
                               drop=(breaker_series(head, kubernetes=k8s),),
                               fires=({"job": "node", "instance": head,
                                       "held": node.short_name},))
                     for k8s in breaker_sources(spec)),
    )


def breaker_sources(spec: ClusterSpec) -> list[bool]:
    """Which heads' series say the breaker: Slurm's (False), the taint controller's (True)."""
    return [k8s for k8s, there in ((False, "slurm" in spec.schedulers),
                                   (True, bool(tainting_nodes(health_nodes(spec))))) if there]


def tainting_nodes(nodes: Sequence[NodeSpec]) -> list[NodeSpec]:
    """The Kubernetes nodes whose failed check becomes a taint: node-problem-detector sets
    their GpuinfraUnhealthy condition and the controller gpuinfra-health-taint taints them
    (health_kubernetes, health_kubernetes_taint: site-wide)."""
    return [n for n in nodes if "kubernetes" in n.schedulers
            and n.settings.get("health_kubernetes") and n.settings.get("health_kubernetes_taint")]


def _health_alerts(spec: ClusterSpec) -> list[Alert]:
    """The node health check (gpuinfra-health): a node it drained, with the reason; a
    Kubernetes node tainted by its failed check; any other node whose last check failed; a
    check that stopped running. One alert per cause: a failed check on a tainting node fires
    the taint's alert, not the plain one too."""
    nodes = health_nodes(spec)
    if not nodes:
        return []
    node = nodes[0]
    labels = {"job": "node", "instance": node.short_name}
    # health_check_interval is site-wide: one threshold for every node.
    stale = health_stale_seconds(node)
    tainting = tainting_nodes(nodes)
    names = "|".join(n.short_name for n in tainting)
    plain = [n for n in nodes if n not in tainting]
    out = [] if not any("slurm" in n.schedulers for n in nodes) else [Alert(
        name="NodeDrainedByHealthCheck", expr="gpuinfra_health_drained == 1", duration="0m",
        severity="warning",
        summary="{{ $labels.instance }} drained by its health check: {{ $labels.reason }}",
        description="gpuinfra-health found the node unhealthy and drained it in Slurm with "
        "this reason (`sinfo -R`). `gpuinfra-health check --json` on the node gives every "
        "finding with its fix; once the check passes again it resumes the node itself (never "
        "a node an operator drained).",
        firing=(AlertCase(set={health_series("drained", node, reason=DRAIN_REASON): "1x15"},
                          fires=({**labels, "reason": DRAIN_REASON},)),),
    ), breaker_alert(spec, node)]
    if tainting and not out:
        out.append(breaker_alert(spec, tainting[0]))
    if tainting:
        first = {"job": "node", "instance": tainting[0].short_name}
        out.append(Alert(
            name="NodeTaintedByHealthCheck",
            expr=f'gpuinfra_health_ok{{instance=~"{names}"}} == 0', duration="5m",
            severity="warning",
            summary="{{ $labels.instance }}: its health check fails; Kubernetes keeps new pods "
            "off it (taint gpuinfra.io/unhealthy=true:NoSchedule)",
            description="node-problem-detector set the node's condition GpuinfraUnhealthy and "
            "the controller gpuinfra-health-taint tainted it: pods already there keep running, "
            "new ones land elsewhere. `kubectl describe node <node>` shows the "
            "condition's message (the failed checks); `gpuinfra-health check --json` on the "
            "node gives each with its fix. The taint goes once the check passes again (if it "
            "stays, `kubectl -n kube-system logs deploy/gpuinfra-health-taint`).",
            firing=(AlertCase(set={health_series("ok", tainting[0]): "0x15"}, fires=(first,)),),
        ))
    if plain:
        first = {"job": "node", "instance": plain[0].short_name}
        expr = "gpuinfra_health_ok == 0" if not tainting else \
            f'gpuinfra_health_ok{{instance!~"{names}"}} == 0'
        out.append(Alert(
            name="NodeHealthCheckFailed", expr=expr, duration="5m", severity="warning",
            summary="{{ $labels.instance }}: its health check fails",
            description="The node's last health check failed (also where health_on_failure is "
            "report and nothing is drained). `gpuinfra-health check --json` on the node, or "
            "the gpuinfra_health_failure series of the node, give each failed check with its "
            "cause.",
            firing=(AlertCase(set={health_series("ok", plain[0]): "0x15"}, fires=(first,)),),
        ))
    out.append(Alert(
        name="NodeHealthCheckStale",
        expr=f"time() - gpuinfra_health_last_run_timestamp_seconds > {stale}",
        duration="5m", severity="warning",
        summary="{{ $labels.instance }}: the health check has not run for "
        f"{stale} seconds",
        description="Nothing runs gpuinfra-health any more (twice health_check_interval "
        "without a run): slurmd down or HealthCheckProgram missing from slurm.conf (`scontrol "
        "show config | grep HealthCheck`), node-problem-detector's pod gone on Kubernetes, or "
        "every run fails before writing its metrics (`journalctl -t gpuinfra-health`).",
        # The last run was `stale` seconds before the start and never again.
        firing=(AlertCase(set={health_series("last_run_timestamp_seconds", node): f"-{stale}x15"},
                          fires=(labels,)),),
    ))
    return out


def _gpu_alerts(spec: ClusterSpec, mon: Monitoring) -> list[Alert]:
    """GPU nodes: each family's alerts, tested on the first GPU node's first GPU."""
    gpu_nodes = spec.gpu_nodes
    if not gpu_nodes:
        return []
    node = gpu_nodes[0]
    return [_gpu_missing_alert(gpu_nodes), *_xid_alerts(node, site_drain_xids(spec)),
            *_memory_alerts(node), _temperature_alert(node, mon), *_nvlink_alerts(gpu_nodes),
            _collector_stale_alert(node)]


def _gpu_missing_alert(gpu_nodes: Sequence[NodeSpec]) -> Alert:
    """Fewer GPUs seen on a node than its spec gives it."""
    node = gpu_nodes[0]
    info0 = f"gpuinfra_gpu_info{selector(job='node', **gpu_labels(node, 0))}"
    missing = []
    for n in gpu_nodes:
        assert n.gpus is not None
        sel = selector(instance=n.short_name)
        missing.append(f"count by (instance) (gpuinfra_gpu_info{sel}) < {n.gpus.count} "
                       f"or absent(gpuinfra_gpu_info{sel})")
    all_gpus = tuple(f"gpuinfra_gpu_info{selector(job='node', **g)}" for g in gpu_labels_of(node))
    return Alert(
        name="GpuMissing", expr=" or ".join(f"({m})" for m in missing), duration="2m",
        severity="critical",
        summary="{{ $labels.instance }} shows fewer GPUs than the spec gives it",
        description="nvidia-smi lists fewer GPUs than gpu_count (or the GPU collector reports "
        "none): a GPU fell off the bus (XID 79), is not seated, or the driver is not loaded. "
        "`nvidia-smi -L` and the kernel log on the node; reseat/replace, or fix gpu_count in the "
        "spec.",
        firing=(AlertCase(drop=(info0,), fires=({"instance": node.short_name},)),
                AlertCase(drop=all_gpus, fires=({"instance": node.short_name},))),
    )


def site_drain_xids(spec: ClusterSpec) -> tuple[int, ...]:
    """The XIDs the site's health policy drains on (health_xid_policy, site-wide)."""
    return drain_xids(spec.nodes[0].settings.get("health_xid_policy") or {})


def _xid_alerts(node: NodeSpec, fatal_xids: tuple[int, ...]) -> list[Alert]:
    """XID errors logged by the driver, the fatal ones, and failures logged without an Xid."""
    driver_failure = {"job": "node", "instance": node.short_name, "driver_gpu": "6",
                      "failure": "GSP heartbeat timed out"}
    fires = ({**gpu_labels(node, 0), "job": "node", "pci_bus_id": pci_bus_id(0)},)
    fatal = "|".join(str(x) for x in fatal_xids)
    return [Alert(
        name="GpuXidErrors", expr="gpuinfra_gpu_xid_errors > 0", duration="0m",
        severity="warning",
        summary="{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ $labels.pci_bus_id }}) logged "
        "XID errors since boot",
        description="The driver reported GPU errors (NVRM: Xid in the kernel log). Read the "
        "codes in `journalctl -k | grep Xid` and NVIDIA's XID catalog; many are application "
        "faults, the fatal ones raise GpuFatalXid.",
        firing=(AlertCase(set={gpu_series("xid_errors", node, 0): "2x15"}, fires=fires),),
    ), Alert(
        name="GpuFatalXid",
        expr=f'gpuinfra_gpu_xid_errors_by_code{{xid=~"{fatal}"}} > 0 or '
        f'label_replace(gpuinfra_gpu_recovery_action > 0, "xid", "{RECOVERY_ACTION_XID}", "", "")',
        duration="0m", severity="critical",
        summary="{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ $labels.pci_bus_id }}): "
        "fatal XID {{ $labels.xid }} since boot or its last reset",
        description=f"An XID logged since boot or the GPU's last reset "
        f"({fatal.replace('|', ', ')}; or "
        f"{RECOVERY_ACTION_XID}, the driver asking for a GPU reset, a node reboot or a P2P "
        "drain) means the GPU needs a reset or service: drain the node, `gpuinfra-health "
        "reset-gpu <gpu>` on it (nvidia-smi -r; the GPU's XID counts start again) or reboot, "
        "and replace the GPU if it comes back (79: "
        "fallen off the bus; 48/94/95/140: uncorrectable ECC; 63/64: row remapping; 74: "
        "NVLink; 119/120: GSP firmware).",
        firing=(
            # R565+ drivers: Xid 79, then Xid 154 (GPU Reset Required): the last XID is 154.
            AlertCase(set={gpu_series("xid_errors", node, 0): "2x15",
                           gpu_series("last_xid", node, 0): f"{RECOVERY_ACTION_XID}x15",
                           gpu_series("xid_errors_by_code", node, 0, 79): "1x15",
                           gpu_series("xid_errors_by_code", node, 0, RECOVERY_ACTION_XID): "1x15",
                           gpu_series("recovery_action", node, 0): "1x15"},
                      fires=({**fires[0], "xid": "79"}, {**fires[0], "xid": "154"})),
            # A GSP timeout on a driver that logs no Xid 154.
            AlertCase(set={gpu_series("xid_errors", node, 0): "1x15",
                           gpu_series("last_xid", node, 0): "119x15",
                           gpu_series("xid_errors_by_code", node, 0, 119): "1x15"},
                      fires=({**fires[0], "xid": "119"},)),
            # Xid 62 (not in the list), and Xid 154 asking for a node reboot.
            AlertCase(set={gpu_series("xid_errors", node, 0): "2x15",
                           gpu_series("last_xid", node, 0): f"{RECOVERY_ACTION_XID}x15",
                           gpu_series("xid_errors_by_code", node, 0, 62): "1x15",
                           gpu_series("xid_errors_by_code", node, 0, RECOVERY_ACTION_XID): "1x15",
                           gpu_series("recovery_action", node, 0): "2x15"},
                      fires=({**fires[0], "xid": "154"},)),
            # An application fault (13), and an Xid 154 back to None: not fatal.
            AlertCase(set={gpu_series("xid_errors", node, 0): "2x15",
                           gpu_series("last_xid", node, 0): f"{RECOVERY_ACTION_XID}x15",
                           gpu_series("xid_errors_by_code", node, 0, 13): "1x15",
                           gpu_series("xid_errors_by_code", node, 0, RECOVERY_ACTION_XID): "1x15",
                           gpu_series("recovery_action", node, 0): "0x15"},
                      fires=()),
        ),
    ), Alert(
        name="GpuDriverFailure", expr="gpuinfra_gpu_driver_failures > 0", duration="0m",
        severity="critical",
        summary="{{ $labels.instance }} driver GPU {{ $labels.driver_gpu }}: "
        "{{ $labels.failure }} (no Xid line)",
        description="The driver logged a GPU failure without an Xid line since boot (GSP "
        "heartbeat lost, memory subsystem error, GSP RPC timeout, reset required): the GPU is "
        "unusable until reset. Drain the node, `nvidia-smi -r` or reboot; replace the GPU if "
        "it comes back. `journalctl -k | grep NVRM` names it.",
        firing=(AlertCase(set={f"gpuinfra_gpu_driver_failures"
                               f"{selector(**driver_failure)}": "1x15"},
                          fires=(driver_failure,)),),
    )]


def ecc_max(node: NodeSpec) -> int:
    """Uncorrectable ECC errors since the driver loaded that pass: health_gpu_ecc_max."""
    return int(node.settings.get("health_gpu_ecc_max", ECC_MAX))


def _memory_alerts(node: NodeSpec) -> list[Alert]:
    """GPU memory: uncorrectable ECC errors, retirements and remaps waiting for a reset, and
    memory past repair."""
    fires = ({**gpu_labels(node, 0), "job": "node"},)
    most = ecc_max(node)  # the health check's threshold too (gpuinfra.health.thresholds)
    return [Alert(
        name="GpuUncorrectableEcc",
        expr=f"gpuinfra_gpu_ecc_uncorrected_volatile_errors > {most}",
        duration="0m", severity="critical",
        summary="{{ $labels.instance }} GPU {{ $labels.gpu }}: uncorrectable ECC errors",
        description="Memory errors the GPU could not correct since the driver loaded: jobs on "
        "it may have computed garbage. Drain the node, reset the GPU (pending row "
        "remaps/retirements apply then); replace it when they come back.",
        firing=(AlertCase(set={gpu_series("ecc_uncorrected_volatile_errors", node, 0):
                               f"{most + 3}x15"}, fires=fires),),
    ), Alert(
        name="GpuMemoryNeedsReset",
        expr="gpuinfra_gpu_retired_pages_pending == 1 or gpuinfra_gpu_remapped_rows_pending == 1",
        duration="0m", severity="warning",
        summary="{{ $labels.instance }} GPU {{ $labels.gpu }}: a page retirement or row remap "
        "waits for a GPU reset",
        description="The bad memory is still in use until the GPU is reset. Drain the node and "
        "reset the GPU (`nvidia-smi -r`) or reboot.",
        firing=(AlertCase(set={gpu_series("remapped_rows_pending", node, 0): "1x15"},
                          fires=fires),),
    ), Alert(
        name="GpuRetiredPagesOrRemapFailure",
        expr="gpuinfra_gpu_remapped_rows_failure == 1 or gpuinfra_gpu_retired_pages_double_bit > 0",
        duration="0m", severity="critical",
        summary="{{ $labels.instance }} GPU {{ $labels.gpu }}: memory retired for uncorrectable "
        "errors or row remapping failed",
        description="The GPU's memory is failing (retired double-bit pages, or no spare row "
        "left). Take it out of service and have it replaced (RMA).",
        firing=(AlertCase(set={gpu_series("remapped_rows_failure", node, 0): "1x15"},
                          fires=fires),),
    )]


def _temperature_alert(node: NodeSpec, mon: Monitoring) -> Alert:
    """A GPU hotter than ``monitoring_gpu_temperature_max``."""
    return Alert(
        name="GpuTemperatureHigh",
        expr=f"gpuinfra_gpu_temperature_celsius > {mon.gpu_temperature_max}",
        duration="5m", severity="warning",
        summary="{{ $labels.instance }} GPU {{ $labels.gpu }} runs hotter than "
        f"{mon.gpu_temperature_max} C",
        description="Cooling: fans, airflow, inlet temperature, a blocked heat sink. Hot GPUs "
        "slow down (thermal throttling) and fail sooner.",
        firing=(AlertCase(set={gpu_series("temperature_celsius", node, 0):
                               f"{mon.gpu_temperature_max + 5}x15"},
                          fires=({**gpu_labels(node, 0), "job": "node"},)),),
    )


def _nvlink_alerts(gpu_nodes: Sequence[NodeSpec]) -> list[Alert]:
    """NVLink links down or slow against each node's topology (none where it has no links)."""
    down, slow = [], []
    down_case = slow_case = None
    for node in gpu_nodes:
        assert node.gpus is not None
        groups = _link_groups(node)
        for links, indices in groups.items():
            sel = selector(instance=node.short_name)[:-1] + f',gpu=~"{_gpu_regex(indices)}"}}'
            down.append(f"gpuinfra_gpu_nvlink_links_active{sel} < {links}")
            if down_case is None:
                down_case = AlertCase(
                    set={gpu_series("nvlink_links_active", node, indices[0]): f"{links - 1}x15"},
                    fires=({**gpu_labels(node, indices[0]), "job": "node"},))
        if groups and node.gpus.model.link_gbytes_per_s:
            rate = node.gpus.model.link_gbytes_per_s
            slow.append("gpuinfra_gpu_nvlink_link_min_gbytes_per_second"
                        f"{selector(instance=node.short_name)} < {rate - 0.01:g}")
            if slow_case is None:
                first = min(i for idx in groups.values() for i in idx)
                slow_case = AlertCase(
                    set={gpu_series("nvlink_link_min_gbytes_per_second", node, first):
                         f"{rate / 2:g}x15"},
                    fires=({**gpu_labels(node, first), "job": "node"},))
    out = []
    if down_case is not None:
        out.append(Alert(
            name="NvlinkDown", expr=" or ".join(down), duration="2m", severity="critical",
            summary="{{ $labels.instance }} GPU {{ $labels.gpu }}: fewer NVLink links up than "
            "its topology has",
            description="An NVLink link is down: bridge not seated, NVSwitch/Fabric Manager "
            "trouble, or a failing link (XID 74). `nvidia-smi nvlink --status` on the node; "
            "`gpuinfra report`.",
            firing=(down_case,),
        ))
    if slow_case is not None:
        out.append(Alert(
            name="NvlinkDegraded", expr=" or ".join(slow), duration="5m", severity="warning",
            summary="{{ $labels.instance }} GPU {{ $labels.gpu }}: an NVLink link runs below "
            "its rate",
            description="A link trained at a lower speed than its generation's: reseat the "
            "bridge, check Fabric Manager; `nvidia-smi nvlink --status` shows the rate of each "
            "link.",
            firing=(slow_case,),
        ))
    return out


def _logs_alerts(spec: ClusterSpec) -> list[Alert]:
    """A node whose journal stopped reaching the head (the logs role): its newest entry there
    older than gpuinfra.logs.journal.STALE_S, while it logs a heartbeat every 2 minutes."""
    nodes = uploaders(spec.nodes)
    if len(spec.head) != 1 or not nodes:
        return []
    node = nodes[0]
    return [Alert(
        name="NodeLogsStale", expr=f"time() - {AGE_METRIC} > {STALE_S}", duration="5m",
        severity="warning",
        summary="{{ $labels.node }}: no journal entry has reached the head for "
        f"{STALE_S // 60} minutes",
        description="The node's uploader stopped or cannot reach the head (every node logs a "
        "heartbeat every 2 minutes): `systemctl status systemd-journal-upload` and "
        "`journalctl -u systemd-journal-upload` on the node (URL, certificate), "
        "`systemctl status stunnel@gpuinfra-logs systemd-journal-remote.socket` on the head.",
        # The newest entry was STALE_S seconds before the start and none came since.
        firing=(AlertCase(set={logs_series(spec, node): f"-{STALE_S}x15"},
                          fires=({"job": "node", "instance": spec.head[0].short_name,
                                  "node": node.short_name},)),),
    )]


def _collector_stale_alert(node: NodeSpec) -> Alert:
    """The GPU collector of a node stopped running."""
    return Alert(
        name="GpuMetricsStale",
        expr="time() - gpuinfra_gpu_collector_last_run_timestamp_seconds > 300",
        duration="5m", severity="warning",
        summary="{{ $labels.instance }}: the GPU metrics collector has not run for 5 minutes",
        description="gpuinfra-gpu-metrics.timer stopped or its runs fail: `systemctl status "
        "gpuinfra-gpu-metrics.timer gpuinfra-gpu-metrics.service` on the node.",
        firing=(AlertCase(set={collector_series(node): "0x15"},
                          fires=({"job": "node", "instance": node.short_name},)),),
    )
