"""Contradictions between keys that are each valid alone: refused at validate, before any host
is touched, instead of failing (or silently doing half) at plan or deploy time."""

from __future__ import annotations

from collections.abc import Sequence

from gpuinfra.errors import GpuinfraError
from gpuinfra.logs.loki import retention_problem
from gpuinfra.spec.checks import WHERE_ALL, WHERE_HOST, Collector, SpecError
from gpuinfra.spec.model import NodeSpec

# What the head runs for each scheduler of the site (so it cannot be left out of one).
_HEAD_RUNS = {"slurm": "slurmctld (the Slurm controller)",
              "kubernetes": "the Kubernetes control plane"}


def check_cross_keys(nodes: Sequence[NodeSpec], schedulers: Sequence[str],
                     errs: Collector, accounting: bool = False) -> None:
    """Every cross-key contradiction of the site, each reported on its own."""
    _heads_in_their_schedulers(nodes, schedulers, errs)
    _mps_under_one_scheduler(nodes, errs)
    _monitoring_addresses(nodes, errs)
    _open_modules(nodes, errs)
    _port_clashes(nodes, accounting, errs)
    _health_hooks(nodes, errs)
    _job_container_checksums(nodes, errs)
    _job_container_bundle(nodes, errs)
    _loki(nodes, errs)
    _kubernetes_gpu_runtime(nodes, errs)


def _kubernetes_gpu_runtime(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """A Kubernetes GPU node needs the NVIDIA runtime in containerd: the device plugin and
    every GPU pod run under RuntimeClass nvidia, whose handler the container toolkit writes
    (nvidia-ctk runtime configure --runtime=containerd). Judged where the toolkit's knobs are."""
    for node in nodes:
        if node.gpus is None or "kubernetes" not in node.schedulers or \
                "container_toolkit_enabled" not in node.settings:
            continue
        runtimes = node.settings.get("container_toolkit_runtimes") or []
        if not node.settings["container_toolkit_enabled"]:
            field, value, why = "container_toolkit_enabled", False, "no container toolkit"
        elif "containerd" not in runtimes:
            field, value, why = ("container_toolkit_runtimes", list(runtimes),
                                 "the toolkit leaves containerd without the nvidia runtime")
        else:
            continue
        errs.add(node.name, field, value, f"a Kubernetes GPU node with {why}: the device "
                 "plugin's pod (RuntimeClass nvidia) cannot start, and no pod there would "
                 "ever get a GPU", "the container toolkit on, with containerd among its "
                 "runtimes (the defaults)", f"set container_toolkit_enabled = True and "
                 f"container_toolkit_runtimes = ['containerd'] {WHERE_HOST}, or take the node "
                 "out of Kubernetes (node_schedulers)")


# slurm.conf keys the health role's knobs write (roles/health): a site's own
# slurm_conf_extra may set them only with the knob off (Slurm takes the last value of a key).
HEALTH_SLURM_KEYS = {"healthcheckprogram": "health_enabled",
                     "healthcheckinterval": "health_enabled",
                     "healthchecknodestate": "health_enabled", "prolog": "health_slurm_prolog",
                     "prologflags": "health_slurm_prolog", "epilog": "health_slurm_epilog"}


def _health_hooks(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    for node in nodes[:1]:  # site-wide keys: the same on every host
        extra = node.settings.get("slurm_conf_extra") or {}
        if not node.settings.get("health_enabled", False) or not isinstance(extra, dict):
            continue
        for key in extra:
            knob = HEALTH_SLURM_KEYS.get(str(key).lower())
            if knob and node.settings.get(knob, False):
                errs.add(node.name, f"slurm_conf_extra[{key!r}]", extra[key],
                         f"the health role writes {key} (gpuinfra-health, {knob} is True): "
                         "Slurm would keep only one of the two",
                         f"no {key} in slurm_conf_extra, or {knob} = False",
                         f"remove {key} from slurm_conf_extra, or set {knob} = False "
                         f"{WHERE_ALL} (your own program then runs alone)")


# What each job container runtime downloads, by the knob holding its SHA-256 (the
# job_containers role; gpuinfra/knowledge/containers.py: none could be verified here).
JOB_CONTAINER_DOWNLOADS = {
    "enroot-pyxis": (("job_containers_enroot_sha256", "enroot_<v>-1_amd64.deb"),
                     ("job_containers_enroot_caps_sha256", "enroot+caps_<v>-1_amd64.deb"),
                     ("job_containers_pyxis_sha256", "pyxis v<v>.tar.gz")),
    "apptainer": (("job_containers_apptainer_sha256", "apptainer_<v>_amd64.deb"),),
}


def _job_container_checksums(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """A runtime from release files needs each file's SHA-256 from the site: gpuinfra
    downloads nothing it cannot check."""
    for node in nodes:
        if "slurm" not in node.schedulers:
            continue
        runtime = node.settings.get("job_containers_runtime")
        for knob, asset in JOB_CONTAINER_DOWNLOADS.get(runtime, ()):
            if node.settings.get(knob) is None:
                errs.add(node.name, knob, None,
                         f"job_containers_runtime is {runtime!r}, which downloads {asset}: "
                         "gpuinfra installs no download it cannot check, and knows no "
                         "verified checksum for it",
                         "the file's SHA-256, 64 lower-case hex digits",
                         f"download the release file from its project (gpuinfra/knowledge/"
                         f"containers.py names the URL), run `sha256sum` on it, and set {knob} "
                         f"{WHERE_ALL}")


def _job_container_bundle(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """The role's shared bundle runs under crun only: runc's rootless bundle carries the uid
    mappings of the one user who made it."""
    for node in nodes:
        s = node.settings
        if (node.is_worker and s.get("job_containers_runtime") == "oci"
                and s.get("job_containers_oci_bundle")
                and s.get("job_containers_oci_runtime") == "runc"):
            errs.add(node.name, "job_containers_oci_bundle", s["job_containers_oci_bundle"],
                     "the role's bundle serves every user under crun, which maps the calling "
                     "user itself; runc runs a rootless bundle only with the uid mappings of "
                     "the user who made it",
                     "None with job_containers_oci_runtime = 'runc'",
                     "set job_containers_oci_runtime = 'crun', or job_containers_oci_bundle = "
                     "None (each user then makes their own: `runc spec --rootless`)")


# Ports the roles' daemons listen on that no knob moves (each daemon's own default):
# slurm.conf/slurmdbd.conf leave SlurmctldPort 6817, SlurmdPort 6818, DbdPort 6819 (slurm.conf
# man page); kubeadm's control plane and kubelet (kubernetes.io "Ports and Protocols");
# dcgm-exporter 9400 and the Slurm exporter 9092 (gpuinfra/monitoring/scrape.py).
_FIXED = {"slurmctld": 6817, "slurmd": 6818, "slurmdbd": 6819, "kube-apiserver": 6443,
          "etcd": 2379, "etcd peers": 2380, "kube-controller-manager": 10257,
          "kube-scheduler": 10259, "kubelet": 10250, "kube-proxy": 10256,
          "dcgm-exporter": 9400, "the Slurm exporter": 9092}
_PORT_KNOBS = {"monitoring_prometheus_port": "Prometheus",
               "monitoring_alertmanager_port": "Alertmanager",
               "monitoring_node_exporter_port": "node_exporter",
               "monitoring_grafana_port": "Grafana", "logs_loki_port": "Loki",
               "logs_port": "systemd-journal-remote"}


def _listeners(node: NodeSpec, accounting: bool) -> dict[str, int | None]:
    """Daemon (or knob) -> the port it listens on, on this node."""
    s = node.settings
    found: dict[str, int | None] = {}
    slurm, kube = "slurm" in node.schedulers, "kubernetes" in node.schedulers
    if slurm and node.is_head:
        found["slurmctld"] = _FIXED["slurmctld"]
        if accounting:
            found["slurmdbd"] = _FIXED["slurmdbd"]
    if slurm and node.is_worker:
        found["slurmd"] = _FIXED["slurmd"]
    if kube:
        found["kubelet"], found["kube-proxy"] = _FIXED["kubelet"], _FIXED["kube-proxy"]
        if node.is_head:
            found.update({k: _FIXED[k] for k in ("kube-apiserver", "etcd", "etcd peers",
                                                 "kube-controller-manager", "kube-scheduler")})
    if s.get("monitoring_enabled"):
        found["monitoring_node_exporter_port"] = s.get("monitoring_node_exporter_port")
        if node.is_head:
            found["monitoring_prometheus_port"] = s.get("monitoring_prometheus_port")
            found["monitoring_alertmanager_port"] = s.get("monitoring_alertmanager_port")
            if s.get("monitoring_grafana"):
                found["monitoring_grafana_port"] = s.get("monitoring_grafana_port")
            if s.get("monitoring_slurm_exporter") and slurm:
                found["the Slurm exporter"] = _FIXED["the Slurm exporter"]
        if node.gpus is not None and s.get("monitoring_dcgm"):
            found["dcgm-exporter"] = _FIXED["dcgm-exporter"]
    if s.get("logs_loki") and node.is_head:
        found["logs_loki_port"] = s.get("logs_loki_port")
    if s.get("logs_enabled") and node.is_head:  # journal-remote receives every node's journal
        found["logs_port"] = s.get("logs_port")
    return found


def _port_clashes(nodes: Sequence[NodeSpec], accounting: bool, errs: Collector) -> None:
    """Two daemons of one node on one port: the second would not start."""
    for node in nodes:
        by_port: dict[int, list[str]] = {}
        for who, port in _listeners(node, accounting).items():
            if isinstance(port, int) and not isinstance(port, bool):
                by_port.setdefault(port, []).append(who)
        for port, who in by_port.items():
            knobs = [w for w in who if w in _PORT_KNOBS]
            if len(who) < 2 or not knobs:
                continue
            names = [_PORT_KNOBS.get(w, w) for w in who]
            errs.add(node.name, ", ".join(knobs), port,
                     f"port {port} is {' and '.join(names)}'s on this host: the second daemon "
                     "would not start",
                     "a port no other daemon of the host listens on",
                     f"set {' or '.join(knobs)} {WHERE_ALL} to a free port")


def _loki(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """Loki (logs_loki) runs on the head, listens on its cluster address and keeps logs 24h
    at least (gpuinfra.logs.loki)."""
    on = [n for n in nodes if n.settings.get("logs_loki")]
    if not on:
        return
    heads = [n for n in nodes if n.is_head]
    if not heads:
        errs.add(on[0].name, "logs_loki", True,
                 "Loki runs on the head and this site has none", "False on a site without "
                 "a head", f"set logs_loki = False {WHERE_ALL}, or put a host in the 'head' "
                 "group")
    told = {e.host for e in errs.errors if e.field in ("node_address", "ssh_hostname")}
    for head in heads:
        if head.address is None and head.settings.get("logs_loki") and head.name not in told:
            errs.add(head.name, "node_address", None,
                     "logs_loki is on: Loki listens on the head's cluster address and every "
                     "node's Alloy writes there, and this head has none (no node_address, and "
                     "its ssh_hostname is not an IP)", "an IP node_address on the head",
                     f"set node_address {WHERE_HOST}, or logs_loki = False {WHERE_ALL}")
    retention = on[0].settings.get("logs_retention")
    try:
        problem = retention_problem(retention)
    except GpuinfraError:  # not a time at all: logs_retention's own rule says so
        problem = None
    if problem:
        errs.add(on[0].name, "logs_retention", retention, f"logs_loki is on: {problem}",
                 "24h or more (e.g. '1d', '30d') with logs_loki",
                 f"set logs_retention = '1d' or longer {WHERE_ALL}, or logs_loki = False")


def _heads_in_their_schedulers(nodes: Sequence[NodeSpec], schedulers: Sequence[str],
                               errs: Collector) -> None:
    for node in nodes:
        if not node.is_head:
            continue
        left_out = [s for s in schedulers if s not in node.schedulers]
        if left_out:
            errs.add(node.name, "node_schedulers", list(node.schedulers),
                     f"leaves the head out of {', '.join(left_out)}, whose controller it runs "
                     f"({'; '.join(_HEAD_RUNS[s] for s in left_out if s in _HEAD_RUNS)})",
                     f"every scheduler the site runs: {list(schedulers)}",
                     "remove node_schedulers from the head (it takes the site's schedulers); "
                     "to keep jobs off it, leave it out of the 'workers' group")


def _mps_under_one_scheduler(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    for node in nodes:
        if node.sharing.mode == "mps" and {"slurm", "kubernetes"} <= set(node.schedulers):
            errs.add(node.name, "gpu_sharing['mode']", "mps",
                     "an MPS node in Slurm and Kubernetes would run two MPS control daemons "
                     "(the gpu_sharing role's for Slurm, the device plugin's for Kubernetes): "
                     "the second takes the GPUs from the first",
                     "MPS on a node of one scheduler; time-slicing or none on a shared node",
                     "set node_schedulers to ['slurm'] or ['kubernetes'] for this host, or "
                     f"another gpu_sharing mode {WHERE_HOST}")


def _monitoring_addresses(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    """Prometheus scrapes each node on its cluster address and every exporter listens only
    there: monitoring needs an address for every host (a DNS name is not one to listen on)."""
    # A host whose address was refused or asked for already is not told again.
    told = {e.host for e in errs.errors if e.field in ("node_address", "ssh_hostname")}
    for name in [n for n in unaddressed(nodes) if n not in told]:  # said once: merge_repeated
        errs.add(name, "node_address", None,
                 "monitoring is on and this host has no cluster-network address (no "
                 "node_address, and its ssh_hostname is not an IP): its exporters would have "
                 "nowhere to listen and Prometheus nowhere to scrape",
                 "an IP node_address (or an IP ssh_hostname) on every host",
                 f"set node_address {WHERE_HOST}, or monitoring_enabled = False "
                 f"{WHERE_ALL}")


def unaddressed(nodes: Sequence[NodeSpec]) -> list[str]:
    """Hosts without a cluster address on a site whose monitoring is on (the rule the gate
    and the monitoring role share)."""
    if not any(n.settings.get("monitoring_enabled") for n in nodes):
        return []
    return [n.name for n in nodes if n.address is None]


def _open_modules(nodes: Sequence[NodeSpec], errs: Collector) -> None:
    from gpuinfra.knowledge.packages import open_modules_for  # no cycle through the roles

    for node in nodes:
        if node.gpus is None or "nvidia_driver_open_modules" not in node.settings:
            continue
        setting = node.settings["nvidia_driver_open_modules"]
        try:
            open_modules_for(node.gpus.model, setting)
        except GpuinfraError as exc:
            errs.add(node.name, "nvidia_driver_open_modules", setting, str(exc),
                     "None (what the GPU model needs), or the kernel modules it can run",
                     f"set nvidia_driver_open_modules = None {WHERE_HOST}")


def merge_repeated(errors: Sequence[SpecError], hosts: Sequence[str]) -> list[SpecError]:
    """The same problem on several hosts (a typo in group_data/all.py, one rule broken by every
    worker) said once, naming the hosts ("every host" when it is all of them)."""
    groups: dict[tuple[str, str, str, str, str], list[SpecError]] = {}
    for err in errors:
        key = (err.field, repr(err.value), err.problem, err.allowed, err.fix)
        groups.setdefault(key, []).append(err)
    merged = []
    for same in groups.values():
        names = list(dict.fromkeys(e.host for e in same))
        if len(names) == 1:
            merged.append(same[0])
            continue
        where = "every host" if len(hosts) > 2 and set(names) == set(hosts) \
            else ", ".join(names)
        first = same[0]
        merged.append(SpecError(where, first.field, first.value, first.problem, first.allowed,
                                first.fix))
    return merged
