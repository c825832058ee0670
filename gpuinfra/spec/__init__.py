"""The cluster spec: typed model (``model``), value rules (``rules``), role knobs (``knobs``)
and validation (``validate``, with ``checks``, ``names``, ``cluster``, ``nodes``,
``partitions``, ``gpus``, ``sharing``, ``rdma``, ``vfio``, ``kubernetes``, ``cross`` and
``effects``)."""

from gpuinfra.spec.model import (
    ClusterSpec,
    GpuSharing,
    GpuSpec,
    HostInput,
    NodeSpec,
    Partition,
    SpecWarning,
)
from gpuinfra.spec.validate import (
    SpecError,
    SpecInvalid,
    build_cluster,
    format_errors,
    format_warnings,
    validate,
)

__all__ = [
    "ClusterSpec", "GpuSharing", "GpuSpec", "HostInput", "NodeSpec", "Partition", "SpecWarning",
    "SpecError", "SpecInvalid", "build_cluster", "format_errors", "format_warnings", "validate",
]
