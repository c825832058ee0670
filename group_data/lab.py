"""Site-wide values of the local lab (inventory/lab.py)."""

import json as _json
from pathlib import Path as _Path

_HOSTS = _Path(__file__).resolve().parent.parent / ".lab" / "hosts.json"
# `lab up --fleet N` (gpuinfra_lab/fleet.py): many workers on this machine's two cores.
_FLEET = _HOSTS.is_file() and any(h["name"].startswith("lab-fleet")
                                  for h in _json.loads(_HOSTS.read_text())["hosts"])
# `lab up --backup` (gpuinfra_lab/profiles.py): lab-head2 is Slurm's backup controller.
_BACKUP = _HOSTS.is_file() and any("slurm_backup" in h["groups"]
                                   for h in _json.loads(_HOSTS.read_text())["hosts"])

cluster_name = "lab"
schedulers = ["slurm"]

# GPU roles in the lab (Debian 12 containers, no GPU, only Debian's archive reachable):
# containers have no kernel of Debian's to build DKMS modules for, so no headers metapackage;
# the driver packages themselves install for real from non-free
# (roles/nvidia_driver/README.md).
nvidia_driver_kernel_headers = False
# NVIDIA's CUDA repository (Debian's only source of Fabric Manager) is unreachable from the lab:
# the role warns on the NVSwitch worker instead (roles/fabric_manager/README.md).
fabric_manager_enabled = False
# The container toolkit is on by default on GPU nodes, but NVIDIA's repository (its only
# source: Debian has no toolkit package) is unreachable from the lab: off here, plan-tested.
container_toolkit_enabled = False

if _BACKUP:
    # The folder of this machine both controllers mount (what NFS is to a real site), and a
    # takeover after 10 s without the primary instead of 120 (the failover proof waits for it:
    # gpuinfra_lab/controller_failover.py).
    slurm_state_save_location = "/srv/slurm/state"
    slurm_ctld_timeout = 10

# Slurm accounting: slurmdbd with Debian's MariaDB on lab-head (real database, jobs in sacct).
slurm_accounting = True

# containerd runs for real in the lab (Debian 12's 1.6.20 in the systemd containers, a container
# started through it with the systemd cgroup driver: gpuinfra_verify/test_containerd.py).
# Kubernetes does not: no kubelet/kubeadm package is reachable, and this kernel gives cgroup v1
# only, which kubelet 1.35 refuses. So the lab runs containerd without Kubernetes
# (roles/containerd).
containerd_everywhere = True

# Monitoring: Debian's Prometheus, Alertmanager and node_exporter run for real, and the GPU
# collector reads the replayed nvidia-smi. DCGM (NVIDIA's CUDA repository) and Grafana (its own
# repository) are unreachable from the lab: off here, plan-tested. The webhook receiver shows a
# route from data checked by amtool; nothing listens on that port in the lab.
monitoring_dcgm = False
monitoring_grafana = False
# node_exporter behind TLS and basic auth on every lab node (off by default): the head makes the
# credentials and each node's key and certificate; gpuinfra_lab/monitoring_auth.py proves that
# each node_exporter refuses a worker without them and that Prometheus still scrapes it.
monitoring_node_exporter_web_security = True
monitoring_alert_receivers = [{"name": "ops", "webhook_url": "http://127.0.0.1:5001/alerts",
                               "severities": ["critical", "warning"]}]

# MPS on lab-worker2 (gpuinfra_lab/profiles.py): Debian's nvidia-cuda-mps control daemon runs for
# real without a GPU and takes its limits (roles/gpu_sharing/README.md), but no GPU answers
# a compute-mode change: the unit leaves it out here.
gpu_sharing_mps_compute_mode = False
# The MIG lab profiles (gpuinfra_lab/profiles.py) replay an all-balanced layout: a mixed layout,
# which the spec accepts under mig_strategy "mixed" only (it sets the device plugin's strategy: no
# Kubernetes in the lab).
mig_strategy = "mixed"

# The node health check (roles/health) every 10 s instead of 300: the lab's proof
# (gpuinfra_lab/health_drain.py) waits for drains and resumes within a few intervals. With a
# fleet, the default 300: a hundred nodes checked every 10 s would keep both cores busy.
health_check_interval = 300 if _FLEET else 10
# The circuit breaker bounds automatic drains to a share of the GPU nodes (default 0.1: one of
# the lab's two workers). The lab's proofs drain each worker in turn within minutes, so here
# it bounds nothing (1.0); gpuinfra_lab/breaker.py deploys 0.5 to prove the trip, then this.
health_breaker_share = 1.0

# Containers for Slurm jobs (roles/job_containers): Slurm's own OCI support with
# Debian's crun, and a busybox bundle the role builds on each worker (no registry is reachable
# here); gpuinfra_lab/oci_jobs.py runs `srun --container=<bundle>` on both workers as nobody.
job_containers_runtime = "oci"
job_containers_oci_bundle = "/srv/gpuinfra/busybox-bundle"

