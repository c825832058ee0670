"""What a node must be, as the health check reads it: ``/etc/gpuinfra/health.json``.

Rendered from the typed spec at deploy time (:func:`from_node`), so the node needs no
inventory and no laptop; read back with :func:`from_json`, which names the file, the field,
the value and the fix for anything wrong (a hand-edited or truncated file is refused, never
half-read: the check then fails with that message instead of passing on nothing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.health.thresholds import ACTIONS, ECC_MAX, TEMPERATURE_MAX
from gpuinfra.knowledge.lookup import require_model, require_profile
from gpuinfra.knowledge.xids import DEFAULT_DRAIN_XIDS, drain_xids, known

BREAKER_SHARE = 0.1
BREAKER_WINDOW_S = 3600

PATH = "/etc/gpuinfra/health.json"
VERSION = 1
ON_FAILURE = ("drain", "report")
FIX = "deploy again (the health role renders this file from the spec); never edit it by hand"


class ExpectationError(GpuinfraError):
    """The expectation file cannot be read: names the file, the field and the fix."""


@dataclass(frozen=True)
class GpuExpectation:
    model: str  # a key of gpuinfra.knowledge.gpus (H100-SXM5-80GB)
    count: int
    topology: str  # a topology profile name
    fabric: bool = False  # NVSwitch fabric registered, Fabric Manager running
    persistence_mode: bool = True

    @property
    def pairs_checked(self) -> bool:
        return require_profile(self.topology).checks_pairs


@dataclass(frozen=True)
class NicExpectation:
    name: str
    link_layer: str
    rate_gbps: float | None = None


@dataclass(frozen=True)
class Expectation:
    """node: the inventory name; slurm_node: its Slurm NodeName (None: not a Slurm node)."""

    node: str
    slurm_node: str | None = None
    gpus: GpuExpectation | None = None
    nics: tuple[NicExpectation, ...] = ()
    mig: tuple[Mapping[str, int], ...] | None = None
    services: tuple[str, ...] = ()
    on_failure: str = "drain"
    textfile_dir: str | None = None
    dcgm_diag_level: int = 0
    version: int = VERSION
    # The XIDs that fail the check (health_xid_policy over NVIDIA's catalog:
    # gpuinfra.knowledge.xids); a file written before the policy existed reads the defaults.
    drain_xids: tuple[int, ...] = DEFAULT_DRAIN_XIDS
    # The circuit breaker (gpuinfra.health.breaker): automatic drains take at most this share
    # of the GPU nodes within the window; a file written before it existed reads the defaults.
    breaker_share: float = BREAKER_SHARE
    breaker_window_s: int = BREAKER_WINDOW_S
    # The GPU thresholds (gpuinfra.health.thresholds): the alerts' numbers, the site's actions;
    # a file written before them existed reads the defaults.
    temperature_max: int = TEMPERATURE_MAX
    temperature_action: str = "warn"
    ecc_max: int = ECC_MAX
    ecc_action: str = "warn"

    def to_json(self) -> str:
        raw = asdict(self)
        raw["mig"] = [dict(gpu) for gpu in self.mig] if self.mig is not None else None
        return json.dumps(raw, indent=2, sort_keys=True) + "\n"


def runs_on(node: Any) -> bool:
    """Whether the health check belongs on a typed spec node (gpuinfra.spec.NodeSpec): Slurm
    workers (their slurmd runs it) and every GPU worker. The health role applies there (and
    installs it where ``health_enabled``); the alerts expect its metrics there."""
    return bool(node.is_worker and ("slurm" in node.schedulers or node.gpus is not None))


def from_node(node: Any, settings: Mapping[str, Any], textfile_dir: str | None) -> Expectation:
    """The expectation of a typed spec node (gpuinfra.spec.NodeSpec) and its health settings."""
    gpus = None
    if node.gpus is not None:
        fabric = bool(node.gpus.needs_fabric_manager and settings.get("fabric_manager_enabled"))
        gpus = GpuExpectation(node.gpus.model.key, node.gpus.count, node.gpus.topology.name,
                              fabric, bool(settings.get("nvidia_driver_persistence_mode", True)))
    mig = None
    if node.gpus is not None and node.sharing.mode == "mig" and \
            settings.get("gpu_sharing_enabled", True):
        mig = tuple(dict(layout) for layout in node.sharing.mig_layout)
    services = ("nvidia-fabricmanager",) if gpus is not None and gpus.fabric else ()
    return Expectation(
        node=node.name,
        slurm_node=node.short_name if "slurm" in node.schedulers and node.is_worker else None,
        gpus=gpus,
        nics=tuple(NicExpectation(n.name, n.link_layer, n.rate_gbps) for n in node.rdma_nics),
        mig=mig,
        services=services,
        on_failure=str(settings.get("health_on_failure", "drain")),
        textfile_dir=textfile_dir,
        dcgm_diag_level=int(settings.get("health_dcgm_diag_level", 0)),
        drain_xids=drain_xids(settings.get("health_xid_policy") or {}),
        breaker_share=float(settings.get("health_breaker_share", BREAKER_SHARE)),
        breaker_window_s=int(settings.get("health_breaker_window", BREAKER_WINDOW_S)),
        temperature_max=int(settings.get("monitoring_gpu_temperature_max", TEMPERATURE_MAX)),
        temperature_action=str(settings.get("health_gpu_temperature", "warn")),
        ecc_max=int(settings.get("health_gpu_ecc_max", ECC_MAX)),
        ecc_action=str(settings.get("health_gpu_ecc", "warn")),
    )


def from_json(text: str, source: str = PATH) -> Expectation:
    """The :class:`Expectation` in ``text`` (the file at ``source``), every field checked."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ExpectationError(f"{source}: not JSON ({exc}); fix: {FIX}") from None
    reader = _Reader(raw, source)
    version = reader.get("version", int)
    if version != VERSION:
        reader.wrong("version", version, f"version {VERSION} (this health check's)")
    gpus = None
    if raw.get("gpus") is not None:
        g = _Reader(reader.get("gpus", dict), source, "gpus.")
        model, topology = g.get("model", str), g.get("topology", str)
        try:
            require_model(model)
        except GpuinfraError:
            g.wrong("model", model, "a GPU model gpuinfra knows")
        try:
            require_profile(topology)
        except GpuinfraError:
            g.wrong("topology", topology, "a topology profile gpuinfra knows")
        count = g.get("count", int)
        if count < 1:
            g.wrong("count", count, "a GPU count of 1 or more")
        gpus = GpuExpectation(model, count, topology, g.get("fabric", bool),
                              g.get("persistence_mode", bool))
    nics = []
    for i, nic in enumerate(reader.get("nics", list)):
        n = _Reader(nic, source, f"nics[{i}].")
        layer = n.get("link_layer", str)
        if layer not in ("infiniband", "ethernet"):
            n.wrong("link_layer", layer, "infiniband or ethernet")
        rate = nic.get("rate_gbps") if isinstance(nic, dict) else None
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))):
            n.wrong("rate_gbps", rate, "a number of Gb/s or null")
        nics.append(NicExpectation(n.get("name", str), layer, rate))
    mig = None
    if raw.get("mig") is not None:
        mig = []
        for i, layout in enumerate(reader.get("mig", list)):
            if not isinstance(layout, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                    and v > 0 for k, v in layout.items()):
                reader.wrong(f"mig[{i}]", layout, "{profile: count} per GPU ({} = MIG off)")
            mig.append(dict(layout))
    on_failure = reader.get("on_failure", str)
    if on_failure not in ON_FAILURE:
        reader.wrong("on_failure", on_failure, " or ".join(ON_FAILURE))
    services = reader.get("services", list)
    if not all(isinstance(s, str) and s and " " not in s for s in services):
        reader.wrong("services", services, "a list of systemd unit names")
    textfile = raw.get("textfile_dir")
    if textfile is not None and not (isinstance(textfile, str) and textfile.startswith("/")):
        reader.wrong("textfile_dir", textfile, "an absolute directory or null")
    slurm_node = raw.get("slurm_node")
    if slurm_node is not None and not isinstance(slurm_node, str):
        reader.wrong("slurm_node", slurm_node, "the node's Slurm NodeName or null")
    level = reader.get("dcgm_diag_level", int)
    if level not in (0, 1):
        reader.wrong("dcgm_diag_level", level, "0 (off) or 1 (dcgmi diag -r 1)")
    xids = raw.get("drain_xids", list(DEFAULT_DRAIN_XIDS))
    if not isinstance(xids, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and known(x)
            for x in xids):
        reader.wrong("drain_xids", xids, "a list of XID numbers the driver logs")
    share = raw.get("breaker_share", BREAKER_SHARE)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        reader.wrong("breaker_share", share, "a share of the GPU nodes above 0, at most 1")
    window = raw.get("breaker_window_s", BREAKER_WINDOW_S)
    if isinstance(window, bool) or not isinstance(window, int) or window < 60:
        reader.wrong("breaker_window_s", window, "seconds, 60 or more")
    limits = {}
    for key, default in (("temperature_max", TEMPERATURE_MAX), ("ecc_max", ECC_MAX)):
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            reader.wrong(key, value, "a whole number, 0 or more")
        limits[key] = value
    for key in ("temperature_action", "ecc_action"):
        value = raw.get(key, "warn")
        if value not in ACTIONS:
            reader.wrong(key, value, " or ".join(ACTIONS))
        limits[key] = value
    return Expectation(reader.get("node", str), slurm_node, gpus, tuple(nics),
                       tuple(mig) if mig is not None else None, tuple(services), on_failure,
                       textfile, level, version, tuple(xids), float(share), window, **limits)


@dataclass
class _Reader:
    raw: Any
    source: str
    prefix: str = ""
    seen: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, kind: type) -> Any:
        if not isinstance(self.raw, dict):
            raise ExpectationError(f"{self.source}: {self.prefix.rstrip('.') or 'the file'} is "
                                   f"not an object; fix: {FIX}")
        if key not in self.raw:
            raise ExpectationError(f"{self.source}: {self.prefix}{key} is missing; fix: {FIX}")
        value = self.raw[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.wrong(key, value, f"a {kind.__name__}")
        return value

    def wrong(self, key: str, value: Any, want: str) -> None:
        shown = json.dumps(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ExpectationError(f"{self.source}: {self.prefix}{key} is {shown}, not {want}; "
                               f"fix: {FIX}")
