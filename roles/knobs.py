"""Every role's knobs, and the cluster spec built with them.

The spec gate (roles/site.py), the CLI (`gpuinfra validate`) and the verify suite build the
spec here, so they all judge the same keys with the same rules. No pyinfra import: the verify
suite imports this under pytest-xdist.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuinfra.spec import ClusterSpec, HostInput, SpecError, build_cluster, validate
from roles.common.defaults import KNOBS as COMMON
from roles.container_toolkit.defaults import KNOBS as CONTAINER_TOOLKIT
from roles.containerd.defaults import KNOBS as CONTAINERD
from roles.fabric_manager.defaults import KNOBS as FABRIC_MANAGER
from roles.gpu_sharing.defaults import KNOBS as GPU_SHARING
from roles.kubernetes.defaults import KNOBS as KUBERNETES
from roles.monitoring.defaults import KNOBS as MONITORING
from roles.munge.defaults import KNOBS as MUNGE
from roles.nvidia_driver.defaults import KNOBS as NVIDIA_DRIVER
from roles.rdma.defaults import KNOBS as RDMA
from roles.slurm.defaults import KNOBS as SLURM
from roles.vfio.defaults import KNOBS as VFIO

ROLE_KNOBS = (*COMMON, *NVIDIA_DRIVER, *FABRIC_MANAGER, *CONTAINERD, *CONTAINER_TOOLKIT, *MUNGE,
              *GPU_SHARING, *SLURM, *KUBERNETES, *VFIO, *RDMA, *MONITORING)


def build_spec(hosts: Sequence[HostInput], duplicates: Sequence[str] = ()) -> ClusterSpec:
    """The site's typed spec, role knobs included; raises SpecInvalid listing every problem."""
    return build_cluster(hosts, duplicates, ROLE_KNOBS)


def spec_problems(hosts: Sequence[HostInput], duplicates: Sequence[str] = ()) -> list[SpecError]:
    """Every problem of the site's spec and role data (empty when valid)."""
    return validate(hosts, duplicates, ROLE_KNOBS)
