"""Warnings, not errors: valid settings that today have only part of their effect (said when
the spec is checked, never silent)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.model import HostInput, NodeSpec, SpecWarning


def gpudirect_warnings(nodes: Sequence[NodeSpec], stack: str) -> list[SpecWarning]:
    """GPU nodes with RDMA NICs but no GPUDirect RDMA path (gpuinfra.rdma.node.gpudirect_path):
    valid, but GPU memory then goes through host memory. Said now, not only at deploy."""
    from gpuinfra.knowledge.packages import open_modules_for  # imported here: no import
    from gpuinfra.rdma.node import gpudirect_path  # cycle through gpuinfra.spec

    found = []
    for node in nodes:
        if not node.rdma_nics or node.gpus is None or node.soft_roce:
            continue
        try:
            open_modules = open_modules_for(node.gpus.model,
                                            node.settings.get("nvidia_driver_open_modules"))
        except GpuinfraError:
            continue  # refused elsewhere
        path = gpudirect_path(stack, open_modules, node.settings.get("rdma_peermem", True))
        if path.path == "none":
            found.append(SpecWarning(node.name, "rdma_nics", f"no GPUDirect RDMA: {path.reason}"))
    return found


def partial_effects(nodes: Sequence[NodeSpec]) -> list[SpecWarning]:
    """Valid settings that today have only part of their effect: said, never silent."""
    found = []
    for node in nodes:
        slurm, kube = "slurm" in node.schedulers, "kubernetes" in node.schedulers
        if node.sharing.mode == "mps" and kube and not slurm and (
                node.sharing.mps_thread_percentage or node.sharing.mps_pinned_mem_limit):
            found.append(SpecWarning(node.name, "gpu_sharing",
                                     "Kubernetes: the device plugin's MPS daemon gives each of "
                                     "the 'clients' replicas 1/clients of the GPU's memory and "
                                     "SMs; thread_percentage and pinned_mem_limit are applied "
                                     "by the gpu_sharing role's daemon on Slurm nodes only"))
        if node.gpus is not None and node.gpus.model.fabric_services:
            found.append(SpecWarning(node.name, "gpu_model",
                                     f"{node.gpus.model.key}'s NVSwitch fabric also needs "
                                     f"{', '.join(node.gpus.model.fabric_services)} (NVLink "
                                     "subnet manager): no role installs it yet"))
        if node.gpus is not None and node.gpus.topology.needs_nvl_domain:
            found.append(SpecWarning(node.name, "gpu_topology",
                                     "memory shared across the NVLink domain needs the IMEX "
                                     "daemon (nvidia-imex) on every compute tray: no role "
                                     "installs or configures it yet; the fabric registration "
                                     "is checked by `gpuinfra check --smi-q`"))
    return found


def driver_branch_warnings(branch: str) -> list[SpecWarning]:
    """A valid branch NVIDIA no longer supports (gpuinfra.knowledge.drivers.END_OF_LIFE): said
    at validate with the supported branch the roles install instead."""
    from gpuinfra.knowledge.drivers import END_OF_LIFE, SUPPORTED_ALTERNATIVE
    from gpuinfra.spec.checks import CLUSTER

    if branch not in END_OF_LIFE:
        return []
    return [SpecWarning(CLUSTER, "driver_branch",
                        f"branch {branch} reached NVIDIA's end of life in {END_OF_LIFE[branch]} "
                        "(no more security fixes): set driver_branch = "
                        f"'{SUPPORTED_ALTERNATIVE}' (long-term support branch, supported until "
                        "June 2028; the roles install it on every distribution they know)")]


def ssh_warnings(hosts: Sequence[HostInput]) -> list[SpecWarning]:
    """A host whose SSH host key is not checked (``ssh_strict_host_key_checking`` "no"/"off"):
    the deploy would hand the MUNGE key and every other secret to whoever answers."""
    return [SpecWarning(h.name, "ssh_strict_host_key_checking",
                        f"{h.data['ssh_strict_host_key_checking']!r}: the host's SSH key is not "
                        "checked, so whoever answers at its address receives the MUNGE key "
                        "and every secret the deploy sends; use 'accept-new' (pyinfra's "
                        "default: trust on first use) or 'yes' with ssh_known_hosts_file")
            for h in hosts
            if str(h.data.get("ssh_strict_host_key_checking", "")).lower() in ("no", "off",
                                                                                 "false")]


def alert_warnings(nodes: Sequence[NodeSpec]) -> list[SpecWarning]:
    """Alerts that reach no one: no monitoring_alert_receivers, or receivers whose severities
    and names leave some alerts out (they stay in Alertmanager's page, nobody is told)."""
    from gpuinfra.monitoring.alertmanager import unrouted_alerts
    from gpuinfra.spec.checks import CLUSTER

    first = next((n for n in nodes if n.settings.get("monitoring_enabled")), None)
    if first is None or "monitoring_alert_receivers" not in first.settings:
        return []
    receivers = first.settings["monitoring_alert_receivers"]
    left = unrouted_alerts(receivers)
    if not left:
        return []
    if not receivers:
        what = ("no alert reaches a person: monitoring_alert_receivers is empty, so every "
                "alert stays in Alertmanager's page and nobody is told")
    else:
        what = (f"{len(left)} alert(s) reach no receiver ({', '.join(left)}): no receiver's "
                "severities and alerts match them, so they stay in Alertmanager's page")
    return [SpecWarning(CLUSTER, "monitoring_alert_receivers",
                        what + "; set monitoring_alert_receivers = [{'name': 'ops', "
                        "'webhook_url': ...}] (every severity unless 'severities' says "
                        "otherwise)")]

