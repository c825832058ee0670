"""The ``gpu_sharing`` key of a GPU host: one mode per node (MIG layout, MPS limits or
time-slicing replicas), checked against the GPU model and typed as :class:`GpuSharing`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpuinfra.knowledge.gpus import GPU_MODELS, GpuModel
from gpuinfra.spec.checks import WHERE_HOST, Collector, check_nested_keys, choice_value, int_value
from gpuinfra.spec.model import SHARING_MODES, GpuSharing, GpuSpec, HostInput
from gpuinfra.spec.rules import clip

MPS_MIN_CLIENTS, MPS_MAX_CLIENTS = 2, 48  # Volta+ MPS: 48 clients per device [mps-doc]
# The device plugin's MPS daemon (which turns ``clients`` into replicas) allows 48 only from
# compute capability 7.5 on and 16 below, V100 (7.0) included: NVIDIA/k8s-device-plugin v0.17.1
# and HEAD 1b826acc6, cmd/mps-control-daemon/mps/device.go: ``maxClients()`` returns 48 when
# ``isAtLeastVolta()`` (semver compare of the compute capability with "v7.5") else 16, and
# ``assertReplicas`` refuses more ("maximum allowed replicas exceeded"): knowledge audit
# 9735030 row 80. Compute capabilities: NVIDIA's "CUDA GPUs" table (V100 7.0, T4 7.5).
MPS_PLUGIN_MAX_CLIENTS_BELOW_CC_7_5 = 16
CC_BELOW_7_5 = frozenset(key for key in GPU_MODELS if key.startswith("V100"))
_MEM_LIMIT = re.compile(r"[0-9]{1,12}[KMGT]?B?", re.IGNORECASE)


_SHARING_KEYS = {
    "mig": ("mode", "mig_layout"),
    "mps": ("mode", "clients", "thread_percentage", "pinned_mem_limit"),
    "time-slicing": ("mode", "replicas", "fail_requests_greater_than_one"),
    "none": ("mode",),
}


# Two sharing modes on one node, said the way the device plugin's documentation says them.
_COMBINED = {
    ("mig", "replicas"): "time-slicing MIG devices is not deployed here: one sharing mode per "
                         "node (and under mig_strategy 'single' the device plugin would replicate "
                         "nvidia.com/gpu across MIG devices of one profile only)",
    ("mps", "mig_layout"): "MPS is not supported on MIG-enabled GPUs (NVIDIA device plugin)",
    ("time-slicing", "mig_layout"): "time-slicing and a MIG layout on one node: one sharing "
                                    "mode per node",
}


def gpu_sharing(host: HostInput, gpus: GpuSpec | None, strategy: str,
                errs: Collector) -> GpuSharing:
    raw = host.data.get("gpu_sharing")
    if raw is None:
        return GpuSharing()
    if not isinstance(raw, Mapping):
        errs.add(host.name, "gpu_sharing", raw, "must be a dict", "{'mode': 'mig'|'mps'|"
                 "'time-slicing'|'none', ...}", f"fix gpu_sharing {WHERE_HOST}")
        return GpuSharing()
    mode = choice_value(host.name, "gpu_sharing['mode']", raw.get("mode"), SHARING_MODES, errs,
                        WHERE_HOST)
    # Two modes on one node get the device plugin's own words; other unknown keys, the hint.
    for key in [k for k in raw if (mode, k) in _COMBINED]:
        errs.add(host.name, f"gpu_sharing[{clip(key)}]", raw[key], _COMBINED[(mode, key)],
                 ", ".join(_SHARING_KEYS[mode]),
                 f"remove {clip(key)} from gpu_sharing (one sharing mode per node)")
    check_nested_keys(host.name, "gpu_sharing",
                      {k: v for k, v in raw.items() if (mode, k) not in _COMBINED},
                      _SHARING_KEYS[mode],
                      f"not a setting of mode {mode!r} (one sharing mode per node)", errs)
    if gpus is None:
        return GpuSharing(mode=mode)
    if mode == "mig":
        return GpuSharing(mode=mode, mig_layout=_mig_layout(host.name, raw.get("mig_layout"),
                                                           gpus, strategy, errs))
    if mode == "mps":
        return _mps(host.name, raw, gpus.model, errs)
    if mode == "time-slicing":
        # The device plugin rejects fewer than 2 replicas: 1 would be no sharing at all.
        replicas = int_value(host.name, "gpu_sharing['replicas']", raw.get("replicas"), errs, 2,
                             128, "set replicas to how many workloads share each GPU (>= 2), or "
                             "mode 'none'")
        strict = raw.get("fail_requests_greater_than_one", True)
        if not isinstance(strict, bool):
            errs.add(host.name, "gpu_sharing['fail_requests_greater_than_one']", strict,
                     "must be True or False", "True (default) or False",
                     f"set it to True or False {WHERE_HOST}, or remove it")
            strict = True
        return GpuSharing(mode=mode, replicas=replicas, fail_requests_greater_than_one=strict)
    return GpuSharing()


def _mps(host: str, raw: Mapping[str, Any], model: GpuModel, errs: Collector) -> GpuSharing:
    if model.key in CC_BELOW_7_5:
        clients = int_value(host, "gpu_sharing['clients']", raw.get("clients"), errs,
                            MPS_MIN_CLIENTS, MPS_PLUGIN_MAX_CLIENTS_BELOW_CC_7_5,
                            f"the device plugin's MPS daemon serves at most "
                            f"{MPS_PLUGIN_MAX_CLIENTS_BELOW_CC_7_5} clients per GPU below "
                            f"compute capability 7.5 ({model.key} is 7.0; more: \"maximum "
                            f"allowed replicas exceeded\" and no GPU advertised): set clients "
                            f"between 2 and {MPS_PLUGIN_MAX_CLIENTS_BELOW_CC_7_5}")
    else:
        clients = int_value(host, "gpu_sharing['clients']", raw.get("clients"), errs,
                            MPS_MIN_CLIENTS, MPS_MAX_CLIENTS, "MPS serves at most 48 client "
                            "contexts per GPU (Volta and newer): set clients between 2 and 48")
    pct = raw.get("thread_percentage")
    if pct is not None:
        pct = int_value(host, "gpu_sharing['thread_percentage']", pct, errs, 1, 100,
                        "set thread_percentage (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) between 1 "
                        "and 100")
    limit = raw.get("pinned_mem_limit")
    if limit is not None and not (isinstance(limit, str) and _MEM_LIMIT.fullmatch(limit)):
        errs.add(host, "gpu_sharing['pinned_mem_limit']", limit, "malformed memory size",
                 "a size such as '8G' or '512M'", "write the per-client device memory limit")
        limit = None
    if not model.mps:
        errs.add(host, "gpu_sharing['mode']", "mps", f"{model.key} does not support MPS",
                 "mig, time-slicing or none", "pick another sharing mode")
    return GpuSharing(mode="mps", mps_clients=clients, mps_thread_percentage=pct,
                      mps_pinned_mem_limit=limit)


def _mig_layout(host: str, raw: Any, gpus: GpuSpec, strategy: str,
                errs: Collector) -> tuple[Mapping[str, int], ...]:
    field = "gpu_sharing['mig_layout']"
    model = gpus.model
    if not model.mig_capable:
        errs.add(host, "gpu_sharing['mode']", "mig", f"{model.key} does not support MIG",
                 "MIG GPUs: " + ", ".join(k for k, m in GPU_MODELS.items() if m.mig_capable),
                 "use mode 'mps' or 'time-slicing' on this model")
        return ()
    if isinstance(raw, Mapping):
        layout = [raw] * gpus.count
    elif isinstance(raw, (list, tuple)) and all(isinstance(g, Mapping) for g in raw):
        layout = list(raw)
        if len(layout) != gpus.count:
            errs.add(host, field, raw, f"lists {len(layout)} GPUs but gpu_count is {gpus.count}",
                     "one {profile: count} per GPU, or one dict for every GPU",
                     "give one layout per GPU ({} for a GPU without MIG)")
            return ()
    else:
        errs.add(host, field, raw, "missing or malformed", "{'3g.40gb': 2} (every GPU) or a list "
                 "of such dicts (one per GPU)", f"set gpu_sharing['mig_layout'] {WHERE_HOST}")
        return ()
    if not any(layout):
        errs.add(host, field, raw, "mode 'mig' with no instance on any GPU: nothing would be "
                 "scheduled on this node's GPUs", "{'3g.40gb': 2} (every GPU) or a list with "
                 "at least one non-empty layout", "give the MIG instances, or another "
                 "gpu_sharing mode (or none) for this node")
        return ()
    if isinstance(raw, Mapping):  # one layout for every GPU: report its problems once
        _check_gpu_layout(host, field, raw, model, errs)
    else:
        for index, gpu_layout in enumerate(layout):
            _check_gpu_layout(host, f"{field} GPU{index}", gpu_layout, model, errs)
    kinds = {p for g in layout for p in g} | ({"<MIG disabled>"} if any(not g for g in layout)
                                             else set())
    if strategy == "single" and len(kinds) > 1:
        errs.add(host, field, raw, "mixed MIG layout under mig_strategy 'single' (the device "
                 "plugin would advertise MIG-INVALID)", "one profile on every GPU of the node",
                 "one profile on every GPU, or mig_strategy = 'mixed' in group_data/<site>.py")
    return tuple(dict(g) for g in layout)


def _check_gpu_layout(host: str, field: str, layout: Mapping[str, Any], model: GpuModel,
                      errs: Collector) -> None:
    compute = memory = media = 0
    for profile_name, count in layout.items():
        profile = model.mig_profiles.get(profile_name)
        if profile is None:
            errs.add(host, field, profile_name, f"{model.key} has no MIG profile {profile_name!r}",
                     ", ".join(model.mig_profiles), "use a profile of this GPU model "
                     "(names differ between 40/80/94/141 GB parts)")
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            errs.add(host, field, {profile_name: count}, "instance count must be a positive "
                     "integer", f"1..{profile.max_instances}", "write e.g. {'1g.10gb': 7}")
            continue
        if count > profile.max_instances:
            errs.add(host, field, {profile_name: count}, f"{profile_name} fits at most "
                     f"{profile.max_instances} time(s) on one {model.key}",
                     f"1..{profile.max_instances}", "lower the count")
        compute += profile.compute_slices * count
        memory += profile.memory_slices * count
        media += count if profile.media_extensions else 0
    max_compute, max_memory = model.mig_slices
    if compute > max_compute or memory > max_memory:
        errs.add(host, field, dict(layout), f"needs {compute}/{max_compute} compute and "
                 f"{memory}/{max_memory} memory slices", "a layout within one GPU",
                 "remove instances until the layout fits one GPU")
    if media > 1:
        errs.add(host, field, dict(layout), "more than one '+me' instance (media extensions "
                 "belong to one instance per GPU)", "at most one +me profile per GPU",
                 "keep a single +me instance")
