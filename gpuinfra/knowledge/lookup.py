"""Look up a topology profile or a GPU model by the name a user gave, or fail saying what exists.

One rule for every caller (the verdicts, the NCCL floors, the CLI): the error names the value,
the closest known names and every known one. ``error`` is the caller's exception class.
"""

from __future__ import annotations

from gpuinfra.errors import GpuinfraError, clip
from gpuinfra.knowledge.gpus import GPU_MODELS, GpuModel, gpu_model, suggest_models
from gpuinfra.knowledge.topology import PROFILES, TopologyProfile


def require_profile(name: object, error: type[GpuinfraError] = GpuinfraError) -> TopologyProfile:
    profile = PROFILES.get(name) if isinstance(name, str) else None
    if profile is None:
        raise error(f"unknown topology profile {clip(name)} (known: {', '.join(PROFILES)})")
    return profile


def require_model(key: object, error: type[GpuinfraError] = GpuinfraError) -> GpuModel:
    model = gpu_model(key) if isinstance(key, str) else None
    if model is None:
        hint = ", ".join(suggest_models(key)) if isinstance(key, str) else ""
        raise error(f"unknown GPU model {clip(key)} (did you mean: {hint or 'none close'}; "
                    f"known: {', '.join(GPU_MODELS)})")
    return model
