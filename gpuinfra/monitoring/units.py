"""The monitoring daemons' systemd units and drop-ins, built by gpuinfra.units.unit_file.

The GPU collector's service and timer (GPU nodes), the listen address of the DCGM exporter
(GPU nodes) and of Grafana (the head) as drop-ins over their packaged units, and the Slurm
exporter's unit (the head; the binary is a release tarball, no package ships a unit). And
the tmpfiles.d(5) file making the GPU job mapping folder at boot (template
:data:`JOB_MAPPING_TMPFILES_TEMPLATE`).
"""

from __future__ import annotations

from gpuinfra.text import FileText
from gpuinfra.units import unit_file

ROLE = "(monitoring role)"
SLURM_EXPORTER_DOCS = "https://github.com/rivosinc/prometheus-slurm-exporter"
DCGM_EXPORTER = "/usr/bin/dcgm-exporter"
DCGM_COUNTERS = "/etc/dcgm-exporter/default-counters.csv"
# The kubelet's pod-resources socket (kubeadm's kubelet root /var/lib/kubelet), which
# dcgm-exporter asks which pod holds each GPU.
POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
# The template of the tmpfiles.d file (/etc/tmpfiles.d/gpuinfra-gpu-jobs.conf on the node).
JOB_MAPPING_TMPFILES_TEMPLATE = "monitoring/etc/tmpfiles.d/gpuinfra-gpu-jobs.conf.j2"


# The group that may write node_exporter's textfile directory; the collector runs as a
# transient user of systemd's (DynamicUser=, systemd.exec(5)) in that group, never as root.
COLLECTOR_GROUP = "gpuinfra-metrics"
# node_exporter's textfile directory (Debian's and Ubuntu's packages): the GPU collector and the
# node health check (gpuinfra.health) write their .prom files there.
TEXTFILE_DIRECTORY = "/var/lib/prometheus/node-exporter"
# Reading the kernel log through journald takes its group (systemd-journal(7): "Users in
# group 'systemd-journal' can see all messages").
JOURNAL_GROUP = "systemd-journal"


def collector_service(lib: str, out: str, textfile_dir: str, device_group: str = "video",
                      jobs_dir: str | None = None) -> FileText:
    """The GPU collector, run by its timer: ``{lib}/collect.py`` writes ``out`` (in
    node_exporter's ``textfile_dir``, the only path it may write), as a transient unprivileged
    user with the groups it needs: the textfile directory's, ``device_group`` (the GPUs'
    device files, for nvidia-smi) and the journal's (the XIDs in the kernel log). No
    capability at all. ``jobs_dir``: the GPU job mapping folder it reads (Slurm GPU nodes)."""
    jobs = f" --jobs {jobs_dir}" if jobs_dir else ""
    return unit_file({
        "Unit": [("Description", "gpuinfra GPU metrics (nvidia-smi and the kernel log) for "
                                 "node_exporter"),
                 ("Documentation", f"file://{lib}/collect.py")],
        "Service": [("Type", "oneshot"),
                    ("DynamicUser", "yes"),
                    ("SupplementaryGroups", f"{COLLECTOR_GROUP} {device_group} {JOURNAL_GROUP}"),
                    ("CapabilityBoundingSet", ""),
                    ("ExecStart", f"/usr/bin/python3 -I {lib}/collect.py --out {out}{jobs}"),
                    ("TimeoutStartSec", "50s"),
                    ("Nice", 10),
                    ("NoNewPrivileges", "true"),
                    ("ProtectSystem", "strict"),
                    ("ProtectHome", "true"),
                    ("PrivateTmp", "true"),
                    ("ReadWritePaths", textfile_dir)],
    }, about=f"GPU metrics for node_exporter's textfile collector {ROLE}.")


def collector_timer() -> FileText:
    """Runs the collector 20 s after boot, then every minute."""
    return unit_file({
        "Unit": [("Description", "gpuinfra GPU metrics every minute")],
        "Timer": [("OnBootSec", "20s"), ("OnUnitActiveSec", "60s"), ("AccuracySec", "1s")],
        "Install": [("WantedBy", "timers.target")],
    }, about=f"Runs the GPU metrics collector every minute {ROLE}.")


def dcgm_exporter_dropin(listen: str, job_mapping_dir: str | None = None,
                         kubernetes: bool = False) -> FileText:
    """dcgm-exporter on ``listen`` (``address:port``, the node's cluster address): the empty
    ``ExecStart=`` drops the packaged command line. ``job_mapping_dir``: the folder Slurm's
    Prolog keeps (gpuinfra.monitoring.jobmap), given as ``--hpc-job-mapping-dir``
    (NVIDIA/dcgm-exporter: pkg/cmd/app.go CLIHPCJobMappingDir = "hpc-job-mapping-dir", env
    DCGM_HPC_JOB_MAPPING_DIR; internal/pkg/transformation/hpc.go labels each metric of a
    listed GPU with ``hpc_job``). ``kubernetes``: a Kubernetes GPU worker, whose metrics
    dcgm-exporter labels with the pod, namespace and container holding each GPU, asked of the
    kubelet's pod-resources API (``--kubernetes``, env DCGM_EXPORTER_KUBERNETES, "Enable
    kubernetes mapping metrics to kubernetes pods"; NVIDIA/dcgm-exporter pkg/cmd/app.go, and
    its DaemonSet dcgm-exporter.yaml, which sets DCGM_EXPORTER_KUBERNETES=true and mounts
    /var/lib/kubelet/pod-resources). The socket is left at the exporter's default,
    ``--pod-resources-kubelet-socket`` = :data:`POD_RESOURCES_SOCKET` (kubeadm's kubelet's),
    not passed: the flag is newer than ``--kubernetes``. The exporter runs here as the
    packaged systemd service on the host, so the socket is on its own file system."""
    mapping = f" --hpc-job-mapping-dir {job_mapping_dir}" if job_mapping_dir else ""
    if kubernetes:
        mapping += " --kubernetes"
    about = "Listen on the cluster network only" + (
        "; label GPU metrics with the Slurm job holding the GPU" if job_mapping_dir else "") + (
        "; label GPU metrics with the Kubernetes pod holding the GPU" if kubernetes else "")
    return unit_file({
        "Service": [("ExecStart", ""),
                    ("ExecStart", f"{DCGM_EXPORTER} -f {DCGM_COUNTERS} -a {listen}{mapping}")],
    }, about=f"{about} {ROLE}.")


def slurm_nodes_service(lib: str, out: str, textfile_dir: str) -> FileText:
    """The head's Slurm node states (gpuinfra.monitoring.slurmnodes), run by its timer:
    ``{lib}/slurm_nodes.py`` asks sinfo and writes ``out`` in node_exporter's ``textfile_dir``,
    as a transient unprivileged user of the textfile directory's group (sinfo needs no
    privilege: MUNGE authenticates any local user)."""
    return unit_file({
        "Unit": [("Description", "gpuinfra Slurm node states (sinfo) for node_exporter"),
                 ("Documentation", f"file://{lib}/slurm_nodes.py"),
                 ("After", "munge.service slurmctld.service")],
        "Service": [("Type", "oneshot"),
                    ("DynamicUser", "yes"),
                    ("SupplementaryGroups", COLLECTOR_GROUP),
                    ("CapabilityBoundingSet", ""),
                    ("ExecStart", f"/usr/bin/python3 -I {lib}/slurm_nodes.py --out {out}"),
                    ("TimeoutStartSec", "50s"),
                    ("NoNewPrivileges", "true"),
                    ("ProtectSystem", "strict"),
                    ("ProtectHome", "true"),
                    ("PrivateTmp", "true"),
                    ("ReadWritePaths", textfile_dir)],
    }, about=f"Slurm node states for node_exporter's textfile collector {ROLE}.")


def slurm_nodes_timer() -> FileText:
    """Asks Slurm 30 s after boot, then every minute."""
    return unit_file({
        "Unit": [("Description", "gpuinfra Slurm node states every minute")],
        "Timer": [("OnBootSec", "30s"), ("OnUnitActiveSec", "60s"), ("AccuracySec", "1s")],
        "Install": [("WantedBy", "timers.target")],
    }, about=f"Asks Slurm for its node states every minute {ROLE}.")


def kubernetes_nodes_service(lib: str, out: str, textfile_dir: str, expected: str,
                             kubeconfig: str) -> FileText:
    """The head's Kubernetes GPUs (gpuinfra.monitoring.k8snodes), run by its timer:
    ``{lib}/kubernetes_nodes.py`` asks ``kubectl get nodes`` with ``kubeconfig`` and writes
    ``out``. As root, for the kubeconfig is root's 0600, but with no capability at all (it can
    read and write only what root owns, bypasses no permission) and a read-only file system
    but for the textfile directory. Not a transient user holding the kubeconfig as a systemd
    credential (LoadCredential=): measured on the lab's Debian 12 (systemd 252), the
    credential was unreadable to any non-root user of the unit (docs/measurements.md)."""
    return unit_file({
        "Unit": [("Description", "gpuinfra Kubernetes GPUs (kubectl get nodes) for "
                                 "node_exporter"),
                 ("Documentation", f"file://{lib}/kubernetes_nodes.py"),
                 ("After", "kubelet.service")],
        "Service": [("Type", "oneshot"),
                    ("CapabilityBoundingSet", ""),
                    ("Environment", "HOME=/tmp"),  # kubectl's cache, in the private /tmp
                    ("ExecStart", f"/usr/bin/python3 -I {lib}/kubernetes_nodes.py --out {out} "
                                  f"--expected {expected} --kubeconfig {kubeconfig}"),
                    ("TimeoutStartSec", "50s"),
                    ("NoNewPrivileges", "true"),
                    ("ProtectSystem", "strict"),
                    ("ProtectHome", "true"),
                    ("PrivateTmp", "true"),
                    ("PrivateDevices", "true"),
                    ("ProtectKernelTunables", "true"),
                    ("ProtectKernelModules", "true"),
                    ("ProtectControlGroups", "true"),
                    ("ReadWritePaths", textfile_dir)],
    }, about=f"Kubernetes' GPUs for node_exporter's textfile collector {ROLE}.")


def kubernetes_nodes_timer() -> FileText:
    """Asks Kubernetes 60 s after boot (its API server starts as a static pod), then every
    minute."""
    return unit_file({
        "Unit": [("Description", "gpuinfra Kubernetes GPUs every minute")],
        "Timer": [("OnBootSec", "60s"), ("OnUnitActiveSec", "60s"), ("AccuracySec", "1s")],
        "Install": [("WantedBy", "timers.target")],
    }, about=f"Asks Kubernetes for its nodes' GPUs every minute {ROLE}.")


def job_mapping_tmpfiles(folder: str) -> FileText:
    """tmpfiles.d(5) line making the GPU job mapping folder at boot (under /run, emptied by
    every reboot with the jobs it listed), so dcgm-exporter finds it before the first job
    (template :data:`JOB_MAPPING_TMPFILES_TEMPLATE`)."""
    return FileText(JOB_MAPPING_TMPFILES_TEMPLATE, {"folder": folder})


def grafana_dropin(address: str, port: int, admin_password_file: str) -> FileText:
    """grafana-server on ``address``:``port`` (the head's cluster address), its admin password
    read from ``admin_password_file`` (made on the head) when Grafana creates its admin user.

    ``GF_<SECTION>_<KEY>`` overrides grafana.ini, and Grafana then expands ``$__file{path}``
    in every value (pkg/setting: applyEnvVariableOverrides, then expandConfig). Not
    ``GF_SECURITY_ADMIN_PASSWORD__FILE``: that suffix is read by the Docker image's run.sh only
    (packaging/docker/run.sh), not by the packaged grafana-server. systemd gives ``$`` no
    meaning in Environment= (only ``%`` specifiers)."""
    return unit_file({
        "Service": [("Environment", f"GF_SERVER_HTTP_ADDR={address}"),
                    ("Environment", f"GF_SERVER_HTTP_PORT={port}"),
                    ("Environment",
                     f"GF_SECURITY_ADMIN_PASSWORD=$__file{{{admin_password_file}}}")],
    }, about=f"Listen on the cluster network only; the admin password made on the head {ROLE}.")


def slurm_exporter_unit(binary: str, version: str, listen: str) -> FileText:
    """rivosinc/prometheus-slurm-exporter ``version`` (installed as ``binary``) on ``listen``,
    after munge (it calls the Slurm commands, which authenticate through munge)."""
    return unit_file({
        "Unit": [("Description", "Prometheus exporter for Slurm (nodes by state, jobs)"),
                 ("Documentation", SLURM_EXPORTER_DOCS),
                 ("After", "network-online.target munge.service")],
        "Service": [("ExecStart", f"{binary} -web.listen-address={listen} -slurm.cli-fallback"),
                    ("DynamicUser", "yes"),
                    ("Restart", "always"),
                    ("RestartSec", 15)],
        "Install": [("WantedBy", "multi-user.target")],
    }, about=f"rivosinc/prometheus-slurm-exporter {version} {ROLE}.")
