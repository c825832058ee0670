"""A host's GPUs: ``gpu_model``, ``gpu_count`` and ``gpu_topology`` checked and typed as
:class:`GpuSpec`, and the cluster's driver branch checked against them."""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any

from gpuinfra.knowledge import drivers
from gpuinfra.knowledge.gpus import GPU_MODELS, GpuModel, branch_problem, gpu_model, suggest_models
from gpuinfra.knowledge.topology import PROFILES, gpu_count_problem
from gpuinfra.spec.checks import WHERE_ALL, WHERE_HOST, Collector, int_value
from gpuinfra.spec.model import GpuSharing, GpuSpec, HostInput


def gpu_spec(host: HostInput, errs: Collector) -> tuple[GpuSpec | None, GpuSpec | None]:
    """(the host's GPUs, what is known of them for the checks that need only model and count).

    The second is set whenever model and count are valid, also when the topology is not
    (its profile then stands in as pcie-only): a topology error must not hide the host's
    sharing or driver-branch problems. It never reaches a ClusterSpec: the topology error is
    already recorded."""
    gpus = _gpu_spec(host, errs)
    if gpus is not None:
        return gpus, gpus
    model = gpu_model(host.data["gpu_model"]) if isinstance(host.data.get("gpu_model"), str) \
        else None
    count = host.data.get("gpu_count")
    if model is None or type(count) is not int or not 1 <= count <= 16:
        return None, None
    return None, GpuSpec(model=model, count=count, topology=PROFILES["pcie-only"])


def _misspelt_model(host: HostInput, errs: Collector) -> Any:
    """The value of a key the unknown-key check already reported as a typo of ``gpu_model``
    (``gpu_modle``, ``GPU_MODEL``): the rest of the host is judged as if it were spelt right,
    so its other problems show in the same round, not after the rename. A key nobody reported
    (another project's own data) is never read as one."""
    typo = "unknown key (did you mean 'gpu_model'?)"
    return next((host.data[e.field] for e in errs.errors
                 if e.host == host.name and e.problem == typo and e.field in host.data), None)


def _gpu_spec(host: HostInput, errs: Collector) -> GpuSpec | None:
    name, count, topo = (host.data.get(k) for k in ("gpu_model", "gpu_count", "gpu_topology"))
    if name is None:
        name = _misspelt_model(host, errs)
    if name is None:
        for key in ("gpu_count", "gpu_topology", "gpu_sharing"):
            if host.data.get(key) is not None:
                errs.add(host.name, key, host.data[key], "set on a host without gpu_model",
                         "only on hosts with GPUs", f"set gpu_model {WHERE_HOST}, or remove {key}")
        return None
    model = _model(host.name, name, errs)
    if count is None:
        errs.add(host.name, "gpu_count", None, "required when gpu_model is set",
                 "an integer from 1 to 16", f"set gpu_count {WHERE_HOST}")
        return None
    count = int_value(host.name, "gpu_count", count, errs, 1, 16,
                      f"set gpu_count to the number of GPUs in the host {WHERE_HOST}")
    profile_name = topo if topo is not None else _default_topology(model)
    if model is None:
        return None
    if profile_name is None:
        errs.add(host.name, "gpu_topology", None,
                 f"required: {model.key} can use NVLink, so say how its GPUs are joined",
                 ", ".join(PROFILES), f"set gpu_topology {WHERE_HOST} (pcie-only if no bridges)")
        return None
    if not isinstance(profile_name, str) or profile_name not in PROFILES:
        close = get_close_matches(str(profile_name), list(PROFILES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        errs.add(host.name, "gpu_topology", profile_name, f"unknown topology profile{hint}",
                 ", ".join(PROFILES), f"set gpu_topology {WHERE_HOST}")
        return None
    profile = PROFILES[profile_name]
    if count is None:
        return None
    problem = gpu_count_problem(profile, model, count)
    if problem:
        errs.add(host.name, "gpu_count/gpu_topology", {"gpu_count": count,
                 "gpu_topology": profile_name}, f"the profile cannot hold them: {problem}",
                 _profiles_for(model, count, profile), _count_fix(model, profile))
        return None
    return GpuSpec(model=model, count=count, topology=profile)


def _model(host: str, name: Any, errs: Collector) -> GpuModel | None:
    model = gpu_model(name) if isinstance(name, str) else None
    if model is None:
        close = suggest_models(name) if isinstance(name, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        errs.add(host, "gpu_model", name, f"unknown GPU model{hint}", ", ".join(GPU_MODELS),
                 f"set gpu_model {WHERE_HOST} to one of the known models")
    return model


def _default_topology(model: GpuModel | None) -> str | None:
    if model is not None and not model.has_nvlink:
        return "pcie-only"
    return None


def _counts_for(model: GpuModel, profile: Any) -> list[int]:
    return [n for n in range(1, 17) if gpu_count_problem(profile, model, n) is None]


def _profiles_for(model: GpuModel, count: int, profile: Any) -> str:
    """What fits: first the counts the asked profile holds (the usual slip is the count), then
    the profiles that hold this count."""
    counts = _counts_for(model, profile)
    fits = [p.name for p in PROFILES.values() if gpu_count_problem(p, model, count) is None]
    held = f"{profile.name} with {', '.join(map(str, counts))} GPUs; " if counts else ""
    return f"{held}for {count} x {model.key}: {', '.join(fits) or 'none'}"


def _count_fix(model: GpuModel, profile: Any) -> str:
    counts = _counts_for(model, profile)
    first = (f"set gpu_count to {counts[0]} (what {profile.name} boards of {model.key} hold)"
             if len(counts) == 1 else "fix gpu_count")
    return (f"{first}, or pick the profile that matches the hardware (see docs/spec.md, "
            "'Topology profiles')")


def check_branch_drives(host: str, gpus: GpuSpec | None, sharing: GpuSharing, branch: str,
                        errs: Collector) -> None:
    """The cluster's driver branch can drive this node's GPUs (and their MIG, when used)."""
    if gpus is None or not branch.isdigit():
        return
    number, model = int(branch), gpus.model
    problem = branch_problem(model, number)
    if problem is None and sharing.mode == "mig" and number < model.mig_min_branch:
        problem = (f"MIG on {model.key} needs driver branch {model.mig_min_branch} or newer "
                   "(MIG user guide, Deployment Considerations)")
    if problem:
        fits = [b for b in drivers.supported_branches()
                if branch_problem(model, int(b)) is None and int(b) >= (
                    model.mig_min_branch if sharing.mode == "mig" else 0)]
        errs.add(host, "driver_branch", branch, problem, ", ".join(fits) or "none installable",
                 f"set driver_branch {WHERE_ALL} to one of those, or move the node to a site "
                 "with another branch")
