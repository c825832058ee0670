"""Alerts for the stack under the GPUs: systemd units the GPU nodes cannot do without (Fabric
Manager on NVSwitch nodes, DCGM's exporter, the kubelet) and the InfiniBand/RoCE ports of the
spec's ``rdma_nics`` (down, below their rate, links going down or recovering from errors), and
the GPUs Kubernetes offers on each GPU worker against the spec (the device plugin down, a GPU
lost: gpuinfra.monitoring.k8snodes, written by the head).

The unit series are node_exporter's systemd collector (the units in
gpuinfra.monitoring.scrape.WATCHED_UNITS); the port series its infiniband collector, enabled by
default (prometheus/node_exporter collector/infiniband_linux.go, v1.3.1 to v1.9: labels
``device`` and ``port``; ``node_infiniband_state_id`` 4 = ACTIVE; ``rate_bytes_per_second`` from
sysfs, 40 Gb/s = 5e9; ``link_downed_total``, ``link_error_recovery_total`` counters).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuinfra.monitoring.k8snodes import expected as k8s_expected
from gpuinfra.monitoring.series import Alert, AlertCase, selector, unit_active_series
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.spec.model import ClusterSpec, NodeSpec

ACTIVE = 4  # node_infiniband_state_id of an ACTIVE port
PORT = "1"  # the port the rules watch: every rdma_nics entry is one port-1 device
# KubernetesGpusMissing when the head cannot ask at all: every node, and why.
ALL = "(all)"
UNASKED = "the head cannot read the nodes (kubectl get nodes fails)"


def unit_down(name: str, unit: str, instances: list[str], duration: str, severity: str,
              summary: str, description: str) -> Alert:
    """``unit`` not active on any of ``instances`` (node_exporter's systemd collector), with
    its firing case on the first of them."""
    return Alert(
        name=name,
        expr=f'node_systemd_unit_state{{name="{unit}.service",state="active",'
        f'instance=~"{"|".join(instances)}"}} == 0',
        duration=duration, severity=severity, summary=summary, description=description,
        firing=(AlertCase(set={unit_active_series(instances[0], unit): "0x15"},
                          fires=({"job": "node", "instance": instances[0],
                                  "name": f"{unit}.service", "state": "active"},)),),
    )


def fabric_manager_nodes(spec: ClusterSpec) -> list[NodeSpec]:
    """NVSwitch nodes where the fabric_manager role runs it (fabric_manager_enabled)."""
    return [n for n in spec.gpu_nodes if n.gpus is not None and n.gpus.needs_fabric_manager
            and n.settings.get("fabric_manager_enabled", True)]


def dcgm_nodes(spec: ClusterSpec, mon: Monitoring) -> list[NodeSpec]:
    return list(spec.gpu_nodes) if mon.dcgm else []


def kubelet_nodes(spec: ClusterSpec) -> list[NodeSpec]:
    return list(spec.members("kubernetes"))


def rdma_ports(spec: ClusterSpec) -> list[tuple[NodeSpec, str, float | None]]:
    """(node, device, expected rate in bytes/s or None) of every rdma_nics entry."""
    return [(n, nic.name, nic.rate_gbps * 1e9 / 8 if nic.rate_gbps else None)
            for n in spec.nodes for nic in n.rdma_nics]


def port_series(metric: str, node: NodeSpec, device: str) -> str:
    """node_exporter's ``node_infiniband_<metric>`` of port 1 of ``device`` on ``node``."""
    return f"node_infiniband_{metric}{selector(**port_labels(node, device))}"


def port_labels(node: NodeSpec, device: str) -> dict[str, str]:
    """The labels node_exporter gives port 1 of ``device`` (with the scrape job's)."""
    return {"job": "node", "instance": node.short_name, "device": device, "port": PORT}


def _by_node(ports: Sequence[tuple[NodeSpec, str, float | None]]) -> str:
    """One selector per node: ``{instance="n",device=~"a|b",port="1"}``, joined with or."""
    nodes: dict[str, list[str]] = {}
    for node, device, _ in ports:
        nodes.setdefault(node.short_name, []).append(device)
    return " or ".join(f'node_infiniband_state_id{{instance="{n}",device=~"{"|".join(d)}",'
                       f'port="{PORT}"}} != {ACTIVE}' for n, d in nodes.items())


def _units(spec: ClusterSpec, mon: Monitoring) -> list[tuple[Alert, str, list[NodeSpec]]]:
    """Each unit alert of the site with its unit and the nodes it watches (none: the site has
    no such node, and no rule)."""
    table = (
        (fabric_manager_nodes(spec), "FabricManagerDown", "nvidia-fabricmanager", "2m",
         "critical", "{{ $labels.instance }}: Fabric Manager is not running",
         "On an NVSwitch node the GPUs' NVLink fabric is set up by nvidia-fabricmanager: "
         "without it CUDA fails to initialise (cudaErrorSystemNotReady) and jobs cannot "
         "start. `systemctl status nvidia-fabricmanager` and /var/log/fabricmanager.log on "
         "the node; its version must be the driver's (the fabric_manager role pins both)."),
        (dcgm_nodes(spec, mon), "DcgmExporterDown", "nvidia-dcgm-exporter", "5m", "warning",
         "{{ $labels.instance }}: DCGM's exporter is not running",
         "The node's DCGM GPU metrics (and on Kubernetes their pod labels) stop; the GPUs "
         "may be fine. `systemctl status nvidia-dcgm-exporter nvidia-dcgm` and `journalctl "
         "-u nvidia-dcgm-exporter` on the node (monitoring_dcgm)."),
        (kubelet_nodes(spec), "KubeletDown", "kubelet", "5m", "critical",
         "{{ $labels.instance }}: the kubelet is not running",
         "The node runs no new pods and its device plugin cannot register GPUs; the control "
         "plane marks it NotReady. `systemctl status kubelet` and `journalctl -u kubelet` on "
         "the node (swap on, containerd down, an expired certificate)."),
    )
    return [(unit_down(name, unit, [n.short_name for n in nodes], duration, severity, summary,
                       description), unit, nodes)
            for nodes, name, unit, duration, severity, summary, description in table if nodes]


def stack_alerts(spec: ClusterSpec, mon: Monitoring) -> list[Alert]:
    return [alert for alert, _, _ in _units(spec, mon)] + _port_alerts(spec) + \
        _kubernetes_gpu_alerts(spec)


def kubernetes_gpu_series(spec: ClusterSpec, node: str, problem: str = "") -> str:
    """The head's series of one Kubernetes GPU worker (gpuinfra.monitoring.k8snodes)."""
    return ("gpuinfra_kubernetes_node_gpus_ok"
            + selector(job="node", instance=spec.head[0].short_name, node=node, problem=problem))


def _kubernetes_gpu_alerts(spec: ClusterSpec) -> list[Alert]:
    """KubernetesGpusMissing: a GPU worker whose allocatable is not what the spec implies
    (gpuinfra.monitoring.k8snodes, written by the head of a Kubernetes site every minute)."""
    wanted = k8s_expected(spec)
    if "kubernetes" not in spec.schedulers or not wanted:
        return []
    node = sorted(wanted)[0]
    problem = "no GPU is allocatable: nvidia.com/gpu: expected 8, allocatable 0"
    return [Alert(
        name="KubernetesGpusMissing", expr="gpuinfra_kubernetes_node_gpus_ok == 0 or "
        f'label_replace(label_replace(gpuinfra_kubernetes_nodes_query_ok == 0, "node", "{ALL}", '
        f'"", ""), "problem", "{UNASKED}", "", "")', duration="10m", severity="critical",
        summary="Kubernetes node {{ $labels.node }}: {{ $labels.problem }}",
        description="Pods asking for GPUs do not land where the spec says they can: the "
        "node's nvidia.com/* allocatable differs from the spec (the device plugin down or "
        "crashing on it, a GPU lost, a MIG or sharing config it did not apply, the node gone "
        "from the cluster), or the head cannot ask (`journalctl -u "
        "gpuinfra-kubernetes-nodes` on it). `kubectl describe node NODE` (Allocatable), `kubectl "
        "-n kube-system get pods -o wide` for the device plugin on it and its logs; "
        "`gpuinfra verify` names the cause (test_allocatable_matches_spec).",
        firing=(AlertCase(set={kubernetes_gpu_series(spec, node, problem): "0x15"},
                          fires=({"job": "node", "instance": spec.head[0].short_name,
                                  "node": node, "problem": problem},)),
                AlertCase(set={_k8s_query_series(spec): "0x15"},
                          fires=({"job": "node", "instance": spec.head[0].short_name,
                                  "node": ALL, "problem": UNASKED},))),
    )]


def _k8s_query_series(spec: ClusterSpec) -> str:
    return ("gpuinfra_kubernetes_nodes_query_ok"
            + selector(job="node", instance=spec.head[0].short_name))


def _port_alerts(spec: ClusterSpec) -> list[Alert]:
    ports = rdma_ports(spec)
    if not ports:
        return []
    node, device, _ = ports[0]
    labels = port_labels(node, device)
    out = [Alert(
        name="InfinibandPortDown", expr=_by_node(ports), duration="2m", severity="critical",
        summary="{{ $labels.instance }}: {{ $labels.device }} port {{ $labels.port }} is not "
        "active",
        description="An RDMA port of the spec's rdma_nics is down, initialising or armed: "
        "NCCL on that node falls back or fails, and the fabric loses a path. `ibstat` on the "
        "node (State, Physical state), the cable and the switch port; `gpuinfra check "
        "--ibstat` judges a capture of it.",
        firing=(AlertCase(set={port_series("state_id", node, device): "1x15"},
                          fires=(labels,)),),
    )]
    rated = [(n, d, r) for n, d, r in ports if r is not None]
    if rated:
        rate_node, rate_device, rate = rated[0]
        assert rate is not None
        expr = " or ".join(
            f"node_infiniband_rate_bytes_per_second{{instance=\"{n.short_name}\","
            f"device=\"{d}\",port=\"{PORT}\"}} < {r:g}" for n, d, r in rated)
        out.append(Alert(
            name="InfinibandRateDegraded", expr=expr, duration="5m", severity="warning",
            summary="{{ $labels.instance }}: {{ $labels.device }} runs below the rate the spec "
            "gives it",
            description="The port trained at a lower rate than its rdma_nics rate_gbps (fewer "
            "lanes, or a slower speed): a cable, transceiver or switch port fault, or a "
            "mismatch with the switch. `ibstat` (Rate) and `mlxlink -d <dev>` on the node; "
            "reseat or replace the cable.",
            firing=(AlertCase(set={port_series("rate_bytes_per_second", rate_node,
                                               rate_device): f"{rate / 2:g}x15"},
                              fires=(port_labels(rate_node, rate_device),)),),
        ))
    out.append(Alert(
        name="InfinibandLinkErrors",
        expr="increase(node_infiniband_link_downed_total[15m]) > 0 or "
             "increase(node_infiniband_link_error_recovery_total[15m]) > 0",
        duration="0m", severity="warning",
        summary="{{ $labels.instance }}: {{ $labels.device }} port {{ $labels.port }} went "
        "down or recovered from errors in the last 15 minutes",
        description="The link flapped (LinkDowned) or retrained after errors "
        "(LinkErrorRecovery): jobs using it slow down or fail. `perfquery` or `ibstat` "
        "counters on the node, the cable and the switch port; a link that keeps doing it: "
        "replace the cable or transceiver.",
        firing=(AlertCase(set={port_series("link_downed_total", node, device): "0+1x15"},
                          fires=(labels,)),),
    ))
    return out


def healthy_stack_series(spec: ClusterSpec, mon: Monitoring) -> dict[str, str]:
    """The series of these alerts on a healthy site (gpuinfra.monitoring.alerts_tests)."""
    series = {}
    for _, unit, nodes in _units(spec, mon):
        for node in nodes:
            series[unit_active_series(node.short_name, unit)] = "1x15"
    if _kubernetes_gpu_alerts(spec):
        series[_k8s_query_series(spec)] = "1x15"
        for name in k8s_expected(spec):
            series[kubernetes_gpu_series(spec, name)] = "1x15"
    for node, device, rate in rdma_ports(spec):
        series[port_series("state_id", node, device)] = f"{ACTIVE}x15"
        if rate is not None:
            series[port_series("rate_bytes_per_second", node, device)] = f"{rate:g}x15"
        series[port_series("link_downed_total", node, device)] = "3x15"
        series[port_series("link_error_recovery_total", node, device)] = "5x15"
    return series
