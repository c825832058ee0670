"""`gpuinfra render`: every file each host of a site would get, without connecting to it.

The real deploy (deploy.py) is planned on pyinfra ``@fake`` hosts (gpuinfra_deploy/plan.py),
each host's facts answered from facts recorded on the site (``--facts``, written once by
``--record-facts``) or, where none were recorded, from a fresh host of a named distribution
(``--os``: the sets in gpuinfra_deploy/assumed_facts/). So the files are built by the very
code of the deploy: what is rendered is what the deploy uploads.

How the files are found: once the deploy is planned, each operation's commands are generated
again with the file-state facts (does the file exist, its digest, the digest of a managed
block) answered "absent", so every operation that manages a file shows its whole upload, even
where the host already holds it. Each upload is then read with the commands that follow it:

- ``cp STAGED TEMP && chmod MODE TEMP && mv -f TEMP LIVE`` (gpuinfra_deploy/ops/checked.py):
  the live file is LIVE, judged before by the consumer the operation names
  (``gpuinfra: promtool refused ...``);
- a staged upload whose stage is removed again (the worker's ``slurmd -G`` check of the
  head's files): judged only, never kept: listed, not written;
- a block spliced into a file (gpuinfra_deploy/ops/block.py): the block's lines;
- otherwise the upload's destination is the live file (``files.put``), its mode and owner
  from the ``chmod``/``chown`` after it.

Files a command writes (``printf ... > PATH``) and secrets made on the host (never seen by
this machine: gpuinfra_deploy/ops/made_on_host.py, from_head.py) are listed, not rendered.

Which facts a file depended on: the facts asked between the previous operation and the
operation that uploads it (the role's code that built the text, and the operation's own
body). A file that depended on a fact answered from an assumed set is marked ``assumed``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from pyinfra.api import FileUploadCommand, State
from pyinfra.api.host import Host
from pyinfra.context import ctx_host, ctx_state

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec import HostInput
from gpuinfra_deploy import templates
from gpuinfra_deploy.plan import (
    DEPLOY,
    FakeHost,
    MissingFact,  # noqa: F401 - the CLI catches it here
    answer,
    answering,
    deploy_as_cli,
    deploy_file,
    fact_key,
    fact_label,
    fake_state,
    merge_facts,
    raw_command,
    read_facts,
)

ASSUMED = Path(__file__).parent / "assumed_facts"

# Fresh hosts of each distribution the roles support: the fact layers answered, in order.
# hardware.json: an 8-GPU H100 SXM node on a small machine (the lab's replayed worker).
_FRESH = ("munge-fresh", "slurm-fresh", "monitoring-fresh", "vfio-fresh", "rdma-fresh",
          "hardware")
OS_LAYERS: dict[str, tuple[str, ...]] = {
    "debian-12": ("base-fresh", "debian-12", "gpu-fresh", "gpu-debian-12", *_FRESH),
    "ubuntu-22.04": ("base-fresh", "ubuntu-22.04", "gpu-fresh", "gpu-ubuntu-22.04", *_FRESH),
    "ubuntu-24.04": ("base-fresh", "ubuntu-24.04", "gpu-fresh", "gpu-ubuntu-24.04", *_FRESH),
}

# Facts saying what a file holds now: answered "absent" when the files are collected, so
# every managed file shows its whole upload; never a file's dependency.
FILE_STATE = frozenset({"files.File", "files.Directory", "files.Sha1File", "files.Sha256File",
                        "files.Md5File", "gpuinfra_deploy.ops.block.BlockDigest"})

# Consumers run here, on this machine, when installed: they judge the file's content alone.
# The others need the node itself (slurmd -G reads its GPUs, systemd-analyze its binaries,
# modprobe its kernel, kubectl its API server).
LOCAL_JUDGES = {"promtool": "promtool", "amtool": "amtool",
                "virt-xml-validate": "virt-xml-validate", "kubeadm": "kubeadm",
                "containerd": "containerd"}
_REFUSED = re.compile(r"gpuinfra: (.+?) refused the new configuration")
_CHECK = re.compile(r"^out=\$\((.*) 2>&1\); rc=\$\?;")
_INSTALL = re.compile(r"^cp (\S+) (\S+) && chmod (\S+) \2 && mv -f \2 (\S+)$")
_SPLICE = re.compile(r"mv -f \S+ (\S+) && rm -f (\S+)$")
_CHMOD = re.compile(r"^chmod (?:-R )?(\S+) (\S+)$")
_CHOWN = re.compile(r"^(chown|chgrp) (?:-R )?(\S+) (\S+)$")
_REDIRECT = re.compile(r"(?<![0-9&>])>\s*(/[^\s;&|)]+)")
_MADE_ON_HOST = {"secret_files": "paths", "copied_file": "dest", "filled_file": "dest",
                 "copy_from_head": "copies"}


@dataclass
class RenderedFile:
    """One file a host gets: ``kind`` file (rendered in full), block (the lines the deploy
    keeps between its markers in ``path``), checked-only (staged for a check, never kept),
    command (written by a shell command) or made-on-host (a secret, never seen here)."""

    host: str
    path: str
    kind: str
    op: str
    content: bytes | None = None
    mode: str | None = None
    owner: str | None = None
    group: str | None = None
    judge: str | None = None  # the consumer that judges it on the host before it goes live
    check: str | None = None  # the check command (staged paths under ``stage``)
    stage: str | None = None
    facts: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()
    local_check: str = ""  # what was judged here: "passed: ...", "refused: ...", "not ..."
    command: str | None = None

    @property
    def sha256(self) -> str | None:
        return hashlib.sha256(self.content).hexdigest() if self.content is not None else None

    def manifest(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"path": self.path, "kind": self.kind, "operation": self.op}
        for key in ("mode", "owner", "group", "sha256", "judge", "local_check", "command"):
            value = getattr(self, key)
            if value:
                entry[key] = value
        if self.content is not None:
            entry["bytes"] = len(self.content)
        entry["facts"] = list(self.facts)
        entry["assumed_facts"] = list(self.assumed)
        return entry


@dataclass
class Render:
    files: dict[str, list[RenderedFile]] = field(default_factory=dict)
    facts_from: dict[str, str] = field(default_factory=dict)  # host -> where its facts came from
    # host -> the commands of its operations, in order (shell text; file uploads as their repr)
    commands: dict[str, list[str]] = field(default_factory=dict)
    # host -> its operations in order: (name, its commands as in ``commands``)
    ops: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)

    def written(self) -> Iterable[RenderedFile]:
        return (f for files in self.files.values() for f in files
                if f.kind in ("file", "block") and f.content is not None)


# ----------------------------------------------------------------------------- facts

def assumed_facts(os_name: str) -> dict[str, Any]:
    if os_name not in OS_LAYERS:
        raise GpuinfraError(f"--os {os_name}: not a distribution the roles support; give one "
                            f"of {', '.join(OS_LAYERS)}")
    return merge_facts(*(read_facts(ASSUMED / f"{name}.json") for name in OS_LAYERS[os_name]))


def recorded_facts(source: Path, hosts: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Facts per host from ``source``: a folder of ``<host>.json`` (a host without its file
    has none), or one file answering every host."""
    if source.is_file():
        facts = read_facts(source)
        return {h: facts for h in hosts}
    if not source.is_dir():
        raise GpuinfraError(f"--facts {source}: no such file or folder (give the folder "
                            "`gpuinfra render --record-facts` wrote, or one facts file)")
    return {h: read_facts(source / f"{h}.json") for h in hosts
            if (source / f"{h}.json").is_file()}


_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def spec_hardware(data: Mapping[str, Any]) -> dict[str, Any]:
    """Facts of a fresh host assumed from its spec: the PCI functions its ``vfio_devices``
    name (an NVIDIA GPU and its audio function, one IOMMU group per card), so a hypervisor's
    files render without the host."""
    devices = [d for d in data.get("vfio_devices") or () if isinstance(d, str)
               and _PCI_ADDRESS.match(d)]
    if not devices:
        return {}
    functions = []
    for group, address in enumerate(sorted(devices), start=100):
        audio = address[:-1] + "1"
        functions += [{"address": address, "vendor_id": "10de", "device_id": "2230",
                       "class_code": "030000", "driver": None, "iommu_group": group,
                       "driver_override": None}]
        if audio not in devices:
            functions += [{"address": audio, "vendor_id": "10de", "device_id": "1aef",
                           "class_code": "040300", "driver": None, "iommu_group": group,
                           "driver_override": None}]
    return {"gpuinfra_deploy.facts.pci.PciFunctions": {"functions": functions}}


class Answers:
    """Facts of each host: recorded ones first, else the assumed set (when given); each
    answer noted as (host asked, fact, assumed?) for the files' dependencies."""

    def __init__(self, recorded: Mapping[str, Mapping[str, Any]],
                 assumed: Mapping[str, Mapping[str, Any]] | None) -> None:
        self.recorded = recorded
        self.assumed = assumed
        self.events: list[tuple[str, str, bool]] = []
        self.files_absent = False
        # (host, path) -> bytes an earlier operation of the run uploads: what a later one
        # reads there (pyinfra generates an operation's commands again when it executes)
        self.written: dict[tuple[str, str], bytes] = {}

    def get_fact(self, host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        if self.files_absent and fact_key(cls) in FILE_STATE:
            return None
        path = kwargs.get("path")
        if self.files_absent and fact_key(cls) == "files.FileContents" \
                and (host.name, path) in self.written:
            return self.written[(host.name, path)].decode(errors="replace").splitlines()
        label = fact_label(cls, args, kwargs)
        own = self.recorded.get(host.name)
        if own is not None:
            try:
                value = answer(own, [], cls, args, kwargs)
            except MissingFact:
                if self.assumed is None:
                    raise MissingFact(f"the facts recorded for {host.name} lack {label}: "
                                      "record them again (gpuinfra render INVENTORY "
                                      "--record-facts DIR), or add --os to assume the rest"
                                      ) from None
            else:
                self.events.append((host.name, label, False))
                return value
        if self.assumed is None or host.name not in self.assumed:
            raise MissingFact(f"no facts recorded for host {host.name}: give --facts DIR "
                              f"with {host.name}.json, or --os to assume a fresh host")
        try:
            value = answer(self.assumed[host.name], [], cls, args, kwargs)
        except MissingFact:
            # Not in the set: what pyinfra answers on a host without the fact's tool (a
            # fresh host has no mstconfig, no ibv_devices...).
            value = cls.default()  # type: ignore[attr-defined]
        self.events.append((host.name, label, True))
        return value

    def answerer(self) -> Callable[..., Any]:
        def get_fact(host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
            return self.get_fact(host, cls, *args, **kwargs)

        return get_fact


# ----------------------------------------------------------------------------- the plan

def site_hosts(inventory: str, group_data: str | None = None) -> list[HostInput]:
    """The site's hosts, judged as the deploy's gate judges them: a SpecInvalid (every
    problem) before anything is planned."""
    from gpuinfra_deploy.run.inventory import load_hosts
    from gpuinfra_deploy.run.knobs import build_spec

    hosts, duplicates = load_hosts(inventory, group_data=group_data)
    build_spec(hosts, duplicates)
    templates.use_site_of(inventory)  # the site's own templates, judged (TemplateProblem)
    return hosts


def _op_call(op_data: Any) -> tuple[Any, Mapping[str, Any]]:
    """(function, keyword arguments) of a planned operation (pyinfra 3.10 keeps them in the
    closure of its command generator)."""
    gen = op_data.command_generator
    cells = dict(zip(gen.__code__.co_freevars, gen.__closure__ or (), strict=False))
    func = cells["func"].cell_contents if "func" in cells else None
    kwargs = cells["kwargs"].cell_contents if "kwargs" in cells else {}
    return func, kwargs


def _content(src: Any) -> bytes:
    if hasattr(src, "getvalue"):
        value = src.getvalue()
        return value if isinstance(value, bytes) else value.encode()
    return Path(src).read_bytes()


def files_of_op(host: str, op: str, commands: Sequence[Any], func: Any,
                kwargs: Mapping[str, Any]) -> list[RenderedFile]:
    """The files one operation's commands write (see the module docstring)."""
    raws = [raw_command(c) for c in commands]
    judge = next((m.group(1).replace("'\"'\"'", "'") for r in raws
                  if (m := _REFUSED.search(r))), None)
    check = next((r for r in raws if _REFUSED.search(r)), None)
    found: list[RenderedFile] = []
    for i, command in enumerate(commands):
        if not isinstance(command, FileUploadCommand):
            continue
        dest = command.dest
        data = _content(command.src)
        later = raws[i + 1:]
        stage = dest.rsplit("/", 1)[0]
        installed = next((m for r in later if (m := _INSTALL.match(r)) and m.group(1) == dest),
                         None)
        spliced = next((m for r in later if (m := _SPLICE.search(r)) and m.group(2) == dest),
                       None)
        if installed:
            found.append(RenderedFile(host, installed.group(4), "file", op, data,
                                      mode=installed.group(3), judge=judge, check=check,
                                      stage=stage))
        elif spliced:
            found.append(RenderedFile(host, spliced.group(1), "block", op, data))
        elif any(r.split()[:2] == ["rm", "-rf"] and stage in r.split() for r in later):
            found.append(RenderedFile(host, dest, "checked-only", op, data, judge=judge,
                                      check=check, stage=stage))
        else:
            entry = RenderedFile(host, dest, "file", op, data)
            for r in later:
                if (m := _CHMOD.match(r)) and m.group(2).strip("'") == dest:
                    entry.mode = m.group(1)
                elif (m := _CHOWN.match(r)) and m.group(3).strip("'") == dest:
                    who = m.group(2)
                    if m.group(1) == "chgrp":
                        entry.group = who
                    else:
                        entry.owner, _, group = who.partition(":")
                        entry.group = group or None
            found.append(entry)
    uploaded = {f.path for f in found} | {f"{f.stage}" for f in found if f.stage}
    for r in raws:
        for path in _REDIRECT.findall(r):
            path = path.strip("'\"")
            if not path.startswith("/dev/") and path not in uploaded:
                found.append(RenderedFile(host, path, "command", op, command=r))
    name = getattr(func, "__name__", "")
    if name in _MADE_ON_HOST and getattr(func, "__module__", "").startswith("gpuinfra_deploy"):
        value = kwargs.get(_MADE_ON_HOST[name])
        paths = ([value] if isinstance(value, str)
                 else [getattr(c, "dest", c) for c in value or ()])
        found += [RenderedFile(host, str(p), "made-on-host", op) for p in paths]
    return found


def render_site(inventory: str, facts: Path | None = None, os_name: str | None = None,
                group_data: str | None = None, deploy: Path = DEPLOY,
                recorded: Mapping[str, Mapping[str, Any]] | None = None) -> Render:
    """Every file each host of ``inventory`` gets from ``deploy``, nothing connected."""
    hosts = site_hosts(inventory, group_data)
    names = [h.name for h in hosts]
    if recorded is None:
        recorded = recorded_facts(facts, names) if facts is not None else {}
    assumed = assumed_facts(os_name) if os_name else None
    if assumed is None:
        missing = [n for n in names if n not in recorded]
        if missing:
            raise GpuinfraError(f"no facts for {', '.join(missing)}: give --facts DIR holding "
                                "<host>.json for each host (gpuinfra render --record-facts "
                                "DIR writes them), or --os debian-12|ubuntu-22.04|ubuntu-24.04 "
                                "to assume fresh hosts")
    answers = Answers(recorded, None if assumed is None else
                      {h.name: merge_facts(assumed, spec_hardware(h.data)) for h in hosts})
    fakes = [FakeHost(h.name, h.groups, {}, h.data) for h in hosts]
    state, inventory_ = fake_state(fakes)
    return _render(state, inventory_, answers, deploy,
                   {n: "recorded" if n in recorded else f"assumed ({os_name})" for n in names})


def _render(state: State, inventory: Any, answers: Answers, deploy: Path,
            facts_from: dict[str, str]) -> Render:
    by_op: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
    role: dict[str, Any] = {"host": None, "name": None, "start": 0}
    original = State.set_op_data_for_host

    def noted(self: State, host: Host, op_hash: str, op_data: Any) -> None:
        # An operation's file may be built from any fact its role asked before it (slurm.conf
        # is built from every worker's CPUs long before its operation): the facts asked
        # since the role began on this host, an upper bound.
        name = host.current_deploy_name
        if (role["host"], role["name"]) != (host.name, name):
            role.update(host=host.name, name=name, start=role.get("end", 0))
        by_op[(host.name, op_hash)] = answers.events[role["start"]:]
        role["end"] = len(answers.events)
        original(self, host, op_hash, op_data)

    chosen = list(inventory)
    with answering(answers.answerer(), inventory), \
            mock.patch.object(State, "set_op_data_for_host", noted):
        deploy_as_cli(state, deploy_file(deploy), chosen)
    result = Render(facts_from=facts_from)
    answers.files_absent = True
    order = state.get_op_order()
    with answering(answers.answerer(), inventory):
        for host in chosen:
            files: list[RenderedFile] = []
            for op_hash in order:
                if op_hash not in state.ops[host]:
                    continue
                op_data = state.get_op_data_for_host(host, op_hash)
                with ctx_state.use(state), ctx_host.use(host):
                    commands = list(op_data.command_generator())
                texts = [raw_command(c) for c in commands]
                result.commands.setdefault(host.name, []).extend(texts)
                name = ", ".join(sorted(state.get_op_meta(op_hash).names))
                result.ops.setdefault(host.name, []).append((name, texts))
                func, kwargs = _op_call(op_data)
                events = by_op.get((host.name, op_hash), [])
                asked = sorted({f"{h}: {label}" for h, label, _ in events
                                if label.split("[")[0] not in FILE_STATE})
                assumed = sorted({f"{h}: {label}" for h, label, a in events if a
                                  and label.split("[")[0] not in FILE_STATE})
                for f in files_of_op(host.name, name, commands, func, kwargs):
                    f.facts, f.assumed = tuple(asked), tuple(assumed)
                    files.append(f)
                    if f.kind == "file" and f.content is not None:
                        answers.written[(host.name, f.path)] = f.content
            result.files[host.name] = _last_writes(files)
    _share_dependencies(result)
    return result


def _last_writes(files: list[RenderedFile]) -> list[RenderedFile]:
    """A file two operations write (the mirror's sources.list, then its components) ends as
    the last one writes it: one entry, naming every operation that wrote it."""
    last: dict[str, RenderedFile] = {}
    for f in files:
        if f.kind == "file":
            earlier = last.get(f.path)
            if earlier is not None:
                f.op = f"{earlier.op}; then {f.op}"
                f.facts = tuple(sorted({*earlier.facts, *f.facts}))
                f.assumed = tuple(sorted({*earlier.assumed, *f.assumed}))
            last[f.path] = f
    return [f for f in files if f.kind != "file" or last[f.path] is f]


def _share_dependencies(result: Render) -> None:
    """A file the run built once for every host (``Site.once``: slurm.conf) got its facts
    asked by the first host only: the same path with the same bytes shares them."""
    deps: dict[tuple[str, str | None], tuple[set[str], set[str]]] = {}
    for f in (f for files in result.files.values() for f in files):
        facts, assumed = deps.setdefault((f.path, f.sha256), (set(), set()))
        facts.update(f.facts)
        assumed.update(f.assumed)
    for f in (f for files in result.files.values() for f in files):
        facts, assumed = deps[(f.path, f.sha256)]
        f.facts, f.assumed = tuple(sorted(facts)), tuple(sorted(assumed))


# ----------------------------------------------------------------------------- the judges

def judge_here(render: Render, which: Callable[[str], str | None] = shutil.which) -> None:
    """Run each staged file set's consumer on this machine where it is installed and judges
    content alone (:data:`LOCAL_JUDGES`); say for each file what ran, or why nothing did."""
    groups: dict[tuple[str, str], list[RenderedFile]] = {}
    for files in render.files.values():
        for f in files:
            if f.judge and f.check and f.stage:
                groups.setdefault((f.check, f.stage), []).append(f)
            elif f.kind in ("file", "block"):
                f.local_check = "no consumer judges it in the deploy"
    done: dict[tuple[str, bytes], str] = {}
    for (check, stage), members in groups.items():
        inner = _CHECK.match(check)
        tool = (inner.group(1).split()[0] if inner else "") if inner else ""
        binary = LOCAL_JUDGES.get(tool)
        if binary is None:
            verdict = f"not checked here: {members[0].judge} judges it on the node itself"
        elif which(binary) is None:
            verdict = f"not checked here: {binary} not installed"
        else:
            key = (check, b"".join(f.path.encode() + (f.content or b"") for f in members))
            if key not in done:
                done[key] = _run_check(inner.group(1) if inner else check, stage, members)
            verdict = done[key]
        for f in members:
            f.local_check = verdict


def _run_check(command: str, stage: str, members: Sequence[RenderedFile]) -> str:
    with tempfile.TemporaryDirectory(prefix="gpuinfra-judge-") as here:
        for f in members:
            (Path(here) / f.path.rsplit("/", 1)[1]).write_bytes(f.content or b"")
        run = subprocess.run(["sh", "-c", command.replace(stage, here)], capture_output=True,
                             text=True, check=False, timeout=120)
    tool = command.split()[0]
    if run.returncode == 0:
        return f"passed: {tool} accepted it here"
    out = (run.stdout + run.stderr).strip().replace(here, stage)
    return f"refused: {tool} here: {out[-400:]}"


# ----------------------------------------------------------------------------- output

def write_render(render: Render, out: Path) -> dict[str, Any]:
    """DIR/<host>/<path> for every rendered file, and DIR/render.json: per host each file,
    its kind, mode, owner, sha256, judge, what was checked here and the facts it depended on
    (``assumed_facts``: answered from an assumed fresh host, not recorded)."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"hosts": {}}
    for host, files in render.files.items():
        for f in files:
            if f.kind in ("file", "block") and f.content is not None:
                target = out / host / f.path.lstrip("/")
                if f.kind == "block":
                    target = target.with_name(target.name + ".gpuinfra-block")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(f.content)
        manifest["hosts"][host] = {"facts": render.facts_from.get(host),
                                   "files": [f.manifest() for f in files]}
    (out / "render.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def summary(render: Render) -> list[str]:
    """Per host: how many files, which were judged here, which depended on assumed facts."""
    lines = []
    for host, files in render.files.items():
        kept = [f for f in files if f.kind in ("file", "block")]
        assumed = [f for f in kept if f.assumed]
        other = [f for f in files if f.kind in ("command", "made-on-host")]
        lines.append(f"{host}: {len(kept)} files, facts {render.facts_from.get(host)}"
                     + (f"; {len(assumed)} built from assumed facts" if assumed else "")
                     + (f"; {len(other)} made on the host (listed, not rendered)"
                        if other else ""))
        for f in kept:
            notes = [f.local_check] if f.judge else []
            if f.assumed:
                names = dict.fromkeys(a.split(": ", 1)[1].split("[")[0].rsplit(".", 1)[-1]
                                      for a in f.assumed)
                notes.append(f"assumed: {', '.join(names)}")
            tail = f"  ({'; '.join(notes)})" if notes else ""
            lines.append(f"  {f.path}{' [block]' if f.kind == 'block' else ''}{tail}")
    return lines


# ----------------------------------------------------------------------------- live hosts

def _live_state(inventory: str, group_data: str | None, sudo: bool) -> tuple[State, Any]:
    """A pyinfra State over the site's real hosts, connected (as `pyinfra --dry` does)."""
    from pyinfra.api import Config
    from pyinfra.api.connect import connect_all

    from gpuinfra_deploy.run.inventory import load_inventory

    site_hosts(inventory, group_data)  # the gate first: a bad spec connects nowhere
    loaded, _ = load_inventory(inventory, group_data=group_data)
    state = State(loaded, Config(SUDO=sudo))
    connect_all(state)
    return state, loaded


def record_facts(inventory: str, out: Path, group_data: str | None = None,
                 sudo: bool = False, deploy: Path = DEPLOY) -> dict[str, dict[str, Any]]:
    """Connect to every host, plan the deploy as `pyinfra --dry` does (nothing executed), and
    write each fact it asked, per host, to DIR/<host>.json: render reads them offline."""
    state, inventory_ = _live_state(inventory, group_data, sudo)
    facts = _recording(state, inventory_, deploy)
    out.mkdir(parents=True, exist_ok=True)
    for host, values in facts.items():
        (out / f"{host}.json").write_text(json.dumps(values, indent=1, sort_keys=True,
                                                     default=_encoded) + "\n")
    return facts


def _encoded(value: Any) -> Any:
    from gpuinfra_deploy.plan import encode

    return encode(value)


def _recording(state: State, inventory: Any, deploy: Path) -> dict[str, dict[str, Any]]:
    from pyinfra.api.operation import OperationMeta

    from gpuinfra_deploy.plan import arg_key, did_change

    facts: dict[str, dict[str, Any]] = {}
    original = Host.get_fact

    collecting = [False]

    def recorded(host: Host, cls: type, *args: Any, **kwargs: Any) -> Any:
        if collecting[0] and fact_key(cls) in FILE_STATE:
            return None  # as the render's collection answers them: never asked
        value = original(host, cls, *args, **kwargs)
        plain = {k: v for k, v in kwargs.items() if not k.startswith("_")}
        arg = arg_key(args, plain)
        own = facts.setdefault(host.name, {})
        if arg:
            own.setdefault(fact_key(cls), {})[arg] = value
        else:
            own[fact_key(cls)] = value
        return value

    reached = [h for h in inventory if h.connected]
    from pyinfra.context import ctx_inventory

    with mock.patch.object(Host, "get_fact", recorded), \
            mock.patch.object(OperationMeta, "did_change", did_change), \
            ctx_inventory.use(inventory):
        deploy_as_cli(state, deploy_file(deploy), reached)
        # The render generates every operation's commands again with the files absent; the
        # facts those ask are recorded too.
        collecting[0] = True
        for host in reached:
            for op_hash in state.get_op_order():
                if op_hash in state.ops[host]:
                    with ctx_state.use(state), ctx_host.use(host):
                        list(state.get_op_data_for_host(host, op_hash).command_generator())
    return facts


def diff_live(inventory: str, group_data: str | None = None, sudo: bool = False,
              deploy: Path = DEPLOY) -> tuple[Render, dict[tuple[str, str], bytes | None]]:
    """The render of the live site (its facts read now) and each rendered file's current
    bytes on its host (None: absent)."""
    from gpuinfra_deploy.facts.system import FileBytes

    state, inventory_ = _live_state(inventory, group_data, sudo)
    recorded = _recording(state, inventory_, deploy)
    render = render_site(inventory, group_data=group_data, deploy=deploy, recorded=recorded)
    current: dict[tuple[str, str], bytes | None] = {}
    for host, files in render.files.items():
        live = inventory_.get_host(host)
        for f in files:
            if f.kind == "file" and f.content is not None:
                current[(host, f.path)] = live.get_fact(FileBytes, path=f.path)
    return render, current


def unified_diffs(render: Render, current: Mapping[tuple[str, str], bytes | None]) -> list[str]:
    """Per host and file, what the deploy would change: a unified diff (a new file in full,
    a binary file by its digests); nothing for a file already as rendered."""
    out: list[str] = []
    for host, files in render.files.items():
        for f in files:
            key = (host, f.path)
            if key not in current or f.content is None:
                continue
            old = current[key]
            if old == f.content:
                continue
            try:
                new_text = f.content.decode()
                old_text = (old or b"").decode()
            except UnicodeDecodeError:
                old_sum = hashlib.sha256(old).hexdigest() if old is not None else "absent"
                out.append(f"{host}:{f.path}: binary, {old_sum} -> {f.sha256}\n")
                continue
            label = "(absent)" if old is None else "(live)"
            out.extend(difflib.unified_diff(
                old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                f"{host}:{f.path} {label}", f"{host}:{f.path} (deploy)"))
    return [line if line.endswith("\n") else line + "\n" for line in out]


def quote_path(path: str) -> str:
    return shlex.quote(path)
