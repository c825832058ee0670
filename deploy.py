"""gpuinfra deploy: `pyinfra inventory/<site>.py deploy.py`.

The table of contents of a deploy. config.py has validated the site's spec and every role's
data before pyinfra connected; here the run's Site (the typed spec, built once per run) and
this host's node are handed to each role in order. Where a role applies (GPU nodes, Slurm
nodes, hypervisors...) is the role's own declaration (``applies`` in its ``__init__.py``),
the same one its entry file uses: `pyinfra inventory/<site>.py roles/<role>/deploy.py`.
"""

from gpuinfra_deploy.run.ahead import packages_ahead
from gpuinfra_deploy.run.site import this_node
from gpuinfra_roles import (
    common,
    container_toolkit,
    containerd,
    fabric_manager,
    gpu_sharing,
    health,
    job_containers,
    kubernetes,
    logs,
    monitoring,
    munge,
    nvidia_driver,
    rdma,
    slurm,
    vfio,
)

site, node = this_node()

common.apply(site, node)  # hostname, /etc/hosts, apt mirror and proxy, chrony, sysctls: every host

# The distribution's packages of every role below that this host gets, in one apt transaction
# (not one per role), each host at its own pace: the head installs Slurm, MariaDB and
# Prometheus while the workers install theirs and their driver (gpuinfra_deploy/run/ahead.py)
packages_ahead(site, node, [role.ROLE for role in (
    containerd, vfio, nvidia_driver, fabric_manager, container_toolkit, gpu_sharing, rdma,
    health, munge, slurm, job_containers, kubernetes, monitoring, logs)])
containerd.apply(site, node)  # Kubernetes nodes (every host with containerd_everywhere)
vfio.apply(site, node)  # hypervisors: IOMMU, vfio-pci for the VMs' devices, before any GPU driver

# GPU nodes; the four share one driver release per node
nvidia_driver.apply(site, node)
fabric_manager.apply(site, node)  # NVSwitch profiles only (and fabric_manager_enabled)
container_toolkit.apply(site, node)  # after containerd; unless container_toolkit_enabled
gpu_sharing.apply(site, node)  # MIG layout (kept at boot), MPS daemon: before the schedulers

rdma.apply(site, node)  # hosts with rdma_nics, after the driver (nvidia-peermem); ATS, ACS
health.apply(site, node)  # node health check (Slurm workers, GPU nodes): before slurm.conf names it

# The scheduler roles need the head: a failed head stops them everywhere; every host meets at
# each of their steps (gpuinfra_deploy/pyinfra_patches/schedule.py)
munge.apply(site, node)  # Slurm nodes: one key for the cluster, from the head
slurm.apply(site, node)  # slurmctld on the head, slurmd on the workers
job_containers.apply(site, node)  # Slurm nodes: the jobs' container runtime, after slurmd
kubernetes.apply(site, node)  # Kubernetes nodes: control plane on the head, workers joined

monitoring.apply(site, node)  # Prometheus + Alertmanager on the head, exporters, GPU metrics
logs.apply(site, node)  # every node's journal on the head (journal-upload -> journal-remote, TLS)
