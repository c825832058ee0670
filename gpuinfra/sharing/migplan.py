"""What it takes to bring a node's GPUs to the spec's MIG layout, from their current state.

The node's state is read in one command (:data:`STATE_COMMAND`: ``nvidia-smi -L``, the MIG
mode current/pending per GPU, ``nvidia-smi mig -lgi`` and ``-lci``, and the compute processes)
and parsed by :func:`node_state`. :func:`plan_gpu` compares one GPU with its layout
(``{"3g.40gb": 2}``; ``{}`` = MIG off) and says, per GPU (docs/hardware-reference.md 6.6, 7.1):

- the MIG mode change (``nvidia-smi -i N -mig 1|0``); a mode still *pending* after it takes
  effect only after a GPU reset or a reboot (the reboot marker says so);
- the GPU instances to destroy: only those the layout does not want (the surplus of a profile,
  or every one when the instances kept would leave no placement for the new ones), each with
  its compute instances;
- the GPU instances to create (largest first, each with its default compute instance, ``-C``),
  and compute instances missing in kept GPU instances;
- a refusal, naming the processes, when the GPU would change its MIG mode (either way: the
  change resets the GPU) or lose an instance while processes run on it; a refusal when the
  layout has no valid placement on the GPU.

Placements come from :class:`gpuinfra.knowledge.gpus.MigProfile` (``-lgipp``, with sources).
Pure: no I/O, the commands are returned as text for the role to run.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpuinfra.errors import ParseError
from gpuinfra.knowledge.gpus import GpuModel
from gpuinfra.parsers.gpus import GpuList, parse_gpus
from gpuinfra.parsers.mig import ComputeInstance, GpuInstance, parse_mig
from gpuinfra.parsers.processes import COMPUTE_APPS_QUERY, ComputeApp, parse_compute_apps
from gpuinfra.text import FileText
from gpuinfra.units import oneshot_unit

MIG_ENABLED = "Enabled"
BOOT_SCRIPT = "/usr/local/sbin/gpuinfra-mig-layout"
BOOT_SCRIPT_TEMPLATE = "gpu_sharing/usr/local/sbin/gpuinfra-mig-layout.j2"
BOOT_UNIT = "gpuinfra-mig.service"
BOOT_UNIT_PATH = f"/etc/systemd/system/{BOOT_UNIT}"
# What reads the MIG devices and must start after them: the schedulers' node daemons and NVIDIA's
# DCGM (the host engine enumerates MIG devices once, at its start).
MIG_CONSUMERS = ("slurmd.service", "kubelet.service", "nvidia-dcgm.service")
MIG_PENDING_REASON = "MIG mode changed on GPU {gpu} (takes effect after a GPU reset or a reboot)"

# One command reads everything the plan needs; each part prints under its own marker line, and
# a failing part prints nothing but its marker (no driver, MIG off, no processes).
SECTIONS = ("list", "mode", "lgi", "lci", "apps")
_PARTS = {
    "list": "nvidia-smi -L",
    "mode": "nvidia-smi --query-gpu=index,uuid,mig.mode.current,mig.mode.pending "
            "--format=csv,noheader",
    "lgi": "nvidia-smi mig -lgi",
    "lci": "nvidia-smi mig -lci",
    "apps": COMPUTE_APPS_QUERY,
}
MARKER = "### gpuinfra-mig "
STATE_COMMAND = "; ".join(f"echo '{MARKER}{name}'; {command} 2>/dev/null" for name, command
                          in _PARTS.items()) + "; true"


@dataclass(frozen=True)
class GpuInstanceState:
    """An existing GPU instance: its ID, profile, placement and compute instances."""

    instance_id: int
    profile: str
    start: int
    size: int
    compute_instances: int = 1


@dataclass(frozen=True)
class GpuMigState:
    """One GPU as it is now. ``mig_current``/``mig_pending``: None where the GPU reports no
    MIG mode (``[N/A]``: not a MIG GPU). ``processes``: ``"<pid> <name>"`` on it or its MIG
    devices."""

    index: int
    uuid: str
    mig_current: bool | None
    mig_pending: bool | None
    instances: tuple[GpuInstanceState, ...] = ()
    processes: tuple[str, ...] = ()
    mig_devices: tuple[str, ...] = ()  # profiles of `nvidia-smi -L`, in device order


@dataclass(frozen=True)
class GpuPlan:
    """What :func:`plan_gpu` decided for one GPU (see the module doc)."""

    index: int
    set_mode: bool | None = None
    destroy: tuple[GpuInstanceState, ...] = ()
    create: tuple[str, ...] = ()
    add_compute: tuple[int, ...] = ()
    pending: bool = False
    refusal: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def changes(self) -> bool:
        return bool(self.set_mode is not None or self.destroy or self.create or self.add_compute)

    def describe(self) -> str:
        """One line for the operation's name: what changes on this GPU."""
        parts = []
        if self.set_mode is not None:
            parts.append("MIG mode " + ("on" if self.set_mode else "off"))
        if self.destroy:
            parts.append("destroy " + ", ".join(f"GI {g.instance_id} ({g.profile})"
                                                for g in self.destroy))
        if self.create:
            parts.append("create " + ", ".join(self.create))
        if self.add_compute:
            parts.append("compute instance in GI " + ", ".join(map(str, self.add_compute)))
        return f"GPU {self.index}: " + ("; ".join(parts) or "as the layout says")


# ----------------------------------------------------------------------------- state

def split_sections(text: str) -> dict[str, str]:
    """The output of :data:`STATE_COMMAND`, per part."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(MARKER):
            current = found.setdefault(line[len(MARKER):].strip(), [])
        elif current is not None:
            current.append(line)
    missing = [name for name in SECTIONS if name not in found]
    if missing:
        raise ParseError("gpuinfra MIG state", f"no {', '.join(missing)} part in the output")
    return {name: "\n".join(lines).strip() for name, lines in found.items()}


def _mode(value: str) -> bool | None:
    value = value.strip()
    if value in ("Enabled", "Disabled"):
        return value == MIG_ENABLED
    return None  # [N/A]: no MIG on this GPU


def node_state(sections: Mapping[str, str]) -> list[GpuMigState]:
    """Every GPU's MIG state from the parts of :data:`STATE_COMMAND` (:func:`split_sections`).

    An empty ``list`` part (no driver, no GPU) gives ``[]``."""
    if not sections["list"].strip() or not sections["list"].startswith("GPU "):
        return []
    listing = parse_gpus(sections["list"])
    modes: dict[int, tuple[bool | None, bool | None]] = {}
    for line in sections["mode"].splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 4 and cells[0].isdigit():
            modes[int(cells[0])] = (_mode(cells[2]), _mode(cells[3]))
    gis = _listing(sections["lgi"], "gpu-instances")
    cis = _listing(sections["lci"], "compute-instances")
    ci_count = Counter((c.gpu, c.gpu_instance_id) for c in cis if isinstance(c, ComputeInstance))
    processes: dict[int, list[str]] = {}
    for index, app in _owned(listing, sections["apps"]):
        if index is not None:
            processes.setdefault(index, []).append(str(app))
    states = []
    for gpu in listing.gpus:
        current, pending = modes.get(gpu.index, (None, None))
        instances = tuple(
            GpuInstanceState(g.instance_id, g.profile, g.placement_start, g.placement_size,
                             ci_count[(gpu.index, g.instance_id)])
            for g in gis if isinstance(g, GpuInstance) and g.gpu == gpu.index)
        states.append(GpuMigState(gpu.index, gpu.uuid, current, pending, instances,
                                  tuple(processes.get(gpu.index, ())),
                                  tuple(d.profile for d in gpu.mig_devices)))
    return states


def compute_processes(sections: Mapping[str, str]) -> list[tuple[int | None, ComputeApp]]:
    """Every compute process of the node, with the index of the GPU it runs on (a MIG
    device's process: its GPU's; None: a UUID ``nvidia-smi -L`` does not list). ``[]`` when
    ``nvidia-smi -L`` lists no GPU (no driver loaded: nothing can run on one)."""
    if not sections["list"].strip() or not sections["list"].startswith("GPU "):
        return []
    return _owned(parse_gpus(sections["list"]), sections["apps"])


def _owned(listing: GpuList, apps: str) -> list[tuple[int | None, ComputeApp]]:
    owners: dict[str, int] = {}
    for gpu in listing.gpus:
        if gpu.uuid is not None:
            owners[gpu.uuid] = gpu.index
        for dev in gpu.mig_devices:
            owners[dev.uuid] = gpu.index
    return [(owners.get(app.gpu_uuid), app) for app in parse_compute_apps(apps)]


def _listing(text: str, kind: str) -> list:
    """Rows of a MIG listing; "MIG off" and "none found" (and an empty part) give []."""
    text = text.strip()
    if not text or text.startswith(("No MIG-enabled devices", "No GPU instances",
                                    "No compute instances")):
        return []
    listing = parse_mig(text)
    if listing.kind != kind:
        raise ParseError("nvidia-smi mig", f"expected a {kind} listing, got {listing.kind}")
    return list(listing.entries)


# ----------------------------------------------------------------------------- placements

def _slots(model: GpuModel, profile: str) -> tuple[tuple[int, ...], int]:
    p = model.mig_profiles[profile]
    return p.placements, p.memory_slices


def placement(model: GpuModel, profiles: Sequence[str],
              taken: Iterable[tuple[int, int]] = ()) -> dict[int, int] | None:
    """A start slice for each of ``profiles`` (by position) that overlaps neither another nor
    ``taken`` ((start, size) of instances kept), or None when there is none. Profiles without
    known placements (:attr:`MigProfile.placements` empty) are counted by size only."""
    width = model.mig_slices[1]
    used = [False] * width
    for start, size in taken:
        for s in range(start, min(start + size, width)):
            used[s] = True
    order = sorted(range(len(profiles)), key=lambda i: -_slots(model, profiles[i])[1])
    chosen: dict[int, int] = {}

    def fits(start: int, size: int) -> bool:
        return start + size <= width and not any(used[start:start + size])

    def place(k: int) -> bool:
        if k == len(order):
            return True
        i = order[k]
        starts, size = _slots(model, profiles[i])
        for start in starts or range(0, width - size + 1, size):
            if fits(start, size):
                used[start:start + size] = [True] * size
                chosen[i] = start
                if place(k + 1):
                    return True
                used[start:start + size] = [False] * size
        return False

    return dict(chosen) if place(0) else None


def creation_order(model: GpuModel, profiles: Iterable[str]) -> tuple[str, ...]:
    """Largest first (memory, then compute slices): the driver places each new instance
    itself, and big ones placed first leave the small ones room (mig-parted does the same)."""
    return tuple(sorted(profiles, key=lambda p: (-model.mig_profiles[p].memory_slices,
                                                 -model.mig_profiles[p].compute_slices, p)))


def _expand(layout: Mapping[str, int]) -> list[str]:
    return [p for p, n in sorted(layout.items()) for _ in range(n)]


# ----------------------------------------------------------------------------- the plan

def plan_gpu(state: GpuMigState, layout: Mapping[str, int], model: GpuModel) -> GpuPlan:
    """What to change on one GPU to reach ``layout`` (``{}``: MIG off); see the module doc."""
    want = bool(layout)
    if state.mig_current is None:
        if not want:
            return GpuPlan(state.index)
        return GpuPlan(state.index, refusal=f"GPU {state.index} reports no MIG mode ([N/A]): "
                       f"not a MIG-capable GPU or its driver is too old for MIG on "
                       f"{model.key}")
    wanted = _expand(layout)
    if placement(model, wanted) is None:
        return GpuPlan(state.index, refusal=f"GPU {state.index}: {dict(layout)} has no valid "
                       f"placement on {model.key} (nvidia-smi mig -lgipp): change the layout")
    if not want:
        plan = GpuPlan(state.index,
                       set_mode=False if state.mig_current or state.mig_pending else None,
                       destroy=state.instances if state.mig_current else ())
        return _refuse_if_busy(state, _pending(state, plan))
    set_mode = None if state.mig_current or state.mig_pending else True
    if not state.mig_current:  # instances come once the mode is current (same run or boot)
        plan = GpuPlan(state.index, set_mode=set_mode, create=creation_order(model, wanted))
        # Turning MIG on resets the GPU under its processes too (NVML's nvmlDeviceSetMigMode:
        # the device is unbound or reset, NVML_ERROR_IN_USE while it is not idle).
        return _refuse_if_busy(state, _pending(state, plan))
    destroy, create, notes = _instance_difference(state, wanted, model)
    destroyed = {g.instance_id for g in destroy}
    add_compute = tuple(g.instance_id for g in state.instances
                        if g.compute_instances == 0 and g.instance_id not in destroyed)
    plan = GpuPlan(state.index, destroy=destroy, create=creation_order(model, create),
                   add_compute=add_compute, notes=notes)
    return _refuse_if_busy(state, plan)


def _instance_difference(state: GpuMigState, wanted: list[str], model: GpuModel
                         ) -> tuple[tuple[GpuInstanceState, ...], list[str], tuple[str, ...]]:
    """GPU instances to destroy and profiles to create: only the difference, unless the
    instances kept leave the new ones no placement (then the whole GPU is laid out again)."""
    have = Counter(g.profile for g in state.instances)
    need = Counter(wanted)
    destroy: list[GpuInstanceState] = []
    for profile, extra in (have - need).items():
        same = sorted((g for g in state.instances if g.profile == profile),
                      key=lambda g: -g.instance_id)
        destroy += same[:extra]
    create = list((need - have).elements())
    kept = [g for g in state.instances if g not in destroy]
    unknown = [g.profile for g in state.instances if g.profile not in model.mig_profiles]
    if create and not unknown and placement(model, create,
                                            [(g.start, g.size) for g in kept]) is None:
        note = (f"GPU {state.index}: the instances kept leave no placement for "
                f"{', '.join(create)}: all its GPU instances are made again")
        return tuple(state.instances), list(wanted), (note,)
    return tuple(sorted(destroy, key=lambda g: g.instance_id)), create, ()


def _pending(state: GpuMigState, plan: GpuPlan) -> GpuPlan:
    """Mark a plan whose mode change is (or stays) pending until a reset or reboot."""
    target = bool(plan.set_mode) if plan.set_mode is not None else state.mig_pending
    stays_pending = (state.mig_pending is not None and state.mig_pending != state.mig_current
                     and plan.set_mode is None)
    return GpuPlan(plan.index, plan.set_mode, plan.destroy, plan.create, plan.add_compute,
                   pending=stays_pending or (plan.set_mode is not None
                                             and target != state.mig_current),
                   refusal=plan.refusal, notes=plan.notes)


def _refuse_if_busy(state: GpuMigState, plan: GpuPlan) -> GpuPlan:
    """Never destroy an instance or switch the mode under running processes."""
    if state.processes and (plan.destroy or plan.set_mode is not None):
        return GpuPlan(plan.index, refusal=(
            f"GPU {state.index} ({state.uuid}): {plan.describe()} would stop "
            f"{len(state.processes)} running process(es): {'; '.join(state.processes)}. "
            "Drain the node (scontrol update nodename=... state=drain / kubectl drain), let "
            "them finish, then deploy again"))
    return plan


def plan_node(states: Sequence[GpuMigState], layout: Sequence[Mapping[str, int]],
              model: GpuModel) -> list[GpuPlan]:
    """One plan per GPU of the spec's per-GPU ``layout`` (a GPU the host lacks is refused)."""
    by_index = {s.index: s for s in states}
    plans = []
    for index, gpu_layout in enumerate(layout):
        if index not in by_index:
            plans.append(GpuPlan(index, refusal=f"GPU {index} of the spec is not on this "
                                 f"host (nvidia-smi -L lists {len(states)} GPUs)"))
            continue
        plans.append(plan_gpu(by_index[index], gpu_layout, model))
    return plans


# ----------------------------------------------------------------------------- commands

def _smi(*args: object) -> str:
    return shlex.join(["nvidia-smi", *map(str, args)])


def mode_is_current(index: int) -> str:
    """Shell test: GPU ``index``'s MIG mode is Enabled now (not only pending)."""
    return (f'[ "$({_smi("-i", index, "--query-gpu=mig.mode.current", "--format=csv,noheader")}'
            f')" = {MIG_ENABLED} ]')


def _say_pending(index: int) -> str:
    return "echo " + shlex.quote(f"GPU {index}: MIG mode pending until a GPU reset or a "
                                 f"reboot; {BOOT_UNIT} creates the instances at boot")


def commands(plan: GpuPlan) -> list[str]:
    """The shell commands of a plan, in order. After a mode change, the instances are created
    only when the mode is current (else the boot unit creates them after the reset/reboot the
    role records in the reboot marker, :data:`MIG_PENDING_REASON`)."""
    if plan.refusal:
        raise ValueError(plan.refusal)
    out = []
    i = plan.index
    for gi in plan.destroy:
        out.append(_smi("mig", "-i", i, "-gi", gi.instance_id, "-dci"))
        out.append(_smi("mig", "-i", i, "-gi", gi.instance_id, "-dgi"))
    for gi in plan.add_compute:
        out.append(_smi("mig", "-i", i, "-gi", gi, "-cci"))
    create = _smi("mig", "-i", i, "-cgi", ",".join(plan.create), "-C") if plan.create else None
    if plan.set_mode is None:
        if create and not plan.pending:
            out.append(create)
        return out
    out.append(_smi("-i", i, "-mig", 1 if plan.set_mode else 0))
    if plan.set_mode:
        then = create or "true"
        out.append(f"if {mode_is_current(i)}; then {then}; else {_say_pending(i)}; fi")
    return out


def instance_set(state: GpuMigState) -> dict[str, int]:
    """The MIG devices of a GPU per profile, as ``nvidia-smi -L`` lists them."""
    return dict(Counter(state.mig_devices))


def boot_script(layout: Sequence[Mapping[str, int]], model: GpuModel) -> FileText:
    """The boot-time script that re-creates the layout's instances (template
    :data:`BOOT_SCRIPT_TEMPLATE`; they do not survive a reboot; the MIG mode does): per MIG GPU,
    when its mode is current and it has no GPU instance yet, create them largest first with
    their compute instances. Exit 1 when a GPU could not be laid out (the unit shows failed,
    slurmd still starts and drains on it)."""
    gpus = [{"index": index, "profiles": ",".join(creation_order(model, _expand(gpu_layout)))}
            for index, gpu_layout in enumerate(layout) if gpu_layout]
    return FileText(BOOT_SCRIPT_TEMPLATE, {"gpus": gpus})


def boot_unit_text() -> FileText:
    """The oneshot unit running :func:`boot_script` at boot: after the driver is up
    (nvidia-persistenced keeps it loaded), before the daemons that read MIG devices."""
    return oneshot_unit("MIG instances of the gpuinfra spec (they do not survive a reboot)",
                        BOOT_SCRIPT,
                        after=("nvidia-persistenced.service", "systemd-modules-load.service"),
                        wants=("nvidia-persistenced.service",), before=MIG_CONSUMERS)
