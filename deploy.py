"""gpuinfra deploy: `pyinfra inventory/<site>.py deploy.py`.

The table of contents of a deploy. config.py has validated the site's spec and every role's
data before pyinfra connected; here the run's Site (the typed spec, built once per run) and
this host's node are handed to each role, on the hosts whose spec asks for it. Every role is
also usable alone: `pyinfra inventory/<site>.py roles/<role>/deploy.py`.
"""

from roles.common import common
from roles.container_toolkit import container_toolkit
from roles.containerd import containerd
from roles.fabric_manager import fabric_manager
from roles.gpu import node_driver
from roles.gpu_sharing import gpu_sharing
from roles.kubernetes import kubernetes
from roles.monitoring import monitoring
from roles.munge import munge
from roles.nvidia_driver import nvidia_driver
from roles.rdma import rdma
from roles.site import this_node
from roles.slurm import slurm
from roles.vfio import vfio

site, node = this_node()

common(site, node)  # hostname, /etc/hosts, apt mirror and proxy, chrony, sysctls: every host
containerd(site, node)  # Kubernetes nodes (every host with containerd_everywhere)

if node.is_hypervisor:
    vfio(site, node)  # IOMMU, vfio-pci for the VMs' devices, before any GPU driver claims them

if node.gpus is not None:
    driver = node_driver(site, node)  # one driver release for the three GPU roles
    nvidia_driver(site, node, driver)
    fabric_manager(site, node, driver)  # NVSwitch profiles only (and fabric_manager_enabled)
    container_toolkit(site, node, driver)  # after containerd; unless container_toolkit_enabled
    gpu_sharing(site, node, driver)  # MIG layout (kept at boot), MPS daemon: before the schedulers

if node.rdma_nics:
    rdma(site, node)  # after the driver (nvidia-peermem); ATS, ACS, the IOMMU mode, Soft-RoCE

if "slurm" in node.schedulers:  # both need the head: a failed head stops them everywhere
    munge(site, node, _if=site.head_up)  # one key for the cluster, from the head
    slurm(site, node, _if=site.head_up)  # slurmctld on the head, slurmd on the workers

if "kubernetes" in node.schedulers:  # the control plane is the head: as for Slurm
    kubernetes(site, node, _if=site.head_up)  # control plane, workers joined, GPU layer

monitoring(site, node)  # Prometheus + Alertmanager on the head, exporters and GPU metrics
