"""The cluster spec: typed model (``model``) and validation (``validate``)."""

from gpuinfra.spec.model import ClusterSpec, GpuSharing, GpuSpec, HostInput, NodeSpec, Partition
from gpuinfra.spec.validate import SpecError, SpecInvalid, build_cluster, validate

__all__ = [
    "ClusterSpec", "GpuSharing", "GpuSpec", "HostInput", "NodeSpec", "Partition",
    "SpecError", "SpecInvalid", "build_cluster", "validate",
]
