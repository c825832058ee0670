"""kubectl's human output as people paste it: ``kubectl describe node`` and the
``kubectl get pods`` table (the JSON forms the verify suite reads are gpuinfra.parsers.kubectl).

Read block by block, saying what was not shown (:attr:`cuts`):

- ``describe node``: the sections Labels, Capacity, Allocatable and "Allocated resources"
  (nvidia.com/* entries). A section followed by another top-level key is complete; the last
  one may be cut. Rows above any section header are read when unambiguous: ``key=value`` rows
  are labels, ``nvidia.com/gpu  1  1`` rows (requests, limits) are allocated resources. A
  ``nvidia.com/gpu:  8`` row alone could be Capacity or Allocatable and is not read; two such
  rows of one resource (``describe node | grep nvidia.com/gpu``) are Capacity then Allocatable,
  the order kubectl prints them in (describe.go: "Capacity:" before "Allocatable:"). The
  "Non-terminated Pods" table gives the device plugin pod's age (its last column): a plugin
  started seconds before the capture has not registered its GPUs yet.
- ``describe pod`` (one pod or several): name, namespace, node, status, the first waiting
  reason, restarts, images, nvidia.com/* limits and requests, NVIDIA_VISIBLE_DEVICES, and the
  runtime class: kubectl prints "Runtime Class Name:" only when the pod has one (describe.go,
  between "Priority Class Name" and "Service Account"), so a pod whose header block reached
  its "Node:" line without it has none.
- ``get pods`` (``-n NS``, ``-A``, ``-o wide``): one pod per row. Without the header line (a
  ``grep``), the columns are known from the READY field (``1/1``): second column without
  namespaces, third with. A last row with fewer columns is cut.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines
from gpuinfra.parsers.kubectl import NVIDIA_PREFIX, KubePod, gpu_use, parse_pods

_TOP_KEY = re.compile(r"^([A-Z][A-Za-z -]*):\s*(.*)$")
_LABEL = re.compile(r"^\s*([A-Za-z0-9./_-]+)=(\S*)\s*$")
# A resource row; a poster's marker after the count ("<=== here", "<--", "# ...", "←") is
# theirs, not kubectl's: the count is read, the marker left.
_RESOURCE = re.compile(r"^\s+([A-Za-z0-9./_-]+):\s+(\d+)\s*(?:(?:<[-=]+|←|#)\D*)?$")
_ALLOCATED = re.compile(r"^\s+(nvidia\.com/[A-Za-z0-9./_-]+)\s+(\d+)(?:\s+\(\S+\))?\s+(\d+)")
# A "Non-terminated Pods" row of the device plugin: namespace, name, ..., age (e.g. 6s, 2m3s, 141m).
_PLUGIN_POD = re.compile(r"^\s+\S+\s+(\S*device-plugin\S*)\s.*\s(?P<age>(?:\d+[dhms])+)\s*$")
_AGE_PART = re.compile(r"(\d+)([dhms])")
_ELISION = re.compile(r"^\s*(?:\.{3,}|…|\[\.{3}\]|\(\.{3}\)|<snip>)\s*$")
SECTIONS = ("Labels", "Capacity", "Allocatable", "Allocated resources")


@dataclass
class DescribedNode:
    """What ``kubectl describe node`` showed: nvidia.com/* counts per section, the labels,
    which sections were read whole (``complete``), and the cuts."""

    name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, int] | None = None
    allocatable: dict[str, int] | None = None
    allocated: dict[str, int] | None = None  # requests
    complete: set[str] = field(default_factory=set)
    cuts: list[str] = field(default_factory=list)
    plugin_age_s: int | None = None  # the device plugin pod's age, when its row is shown

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "labels": self.labels, "capacity": self.capacity,
                "allocatable": self.allocatable, "allocated": self.allocated,
                "complete": sorted(self.complete), "cuts": self.cuts,
                "plugin_age_s": self.plugin_age_s}


def age_seconds(age: str) -> int:
    """kubectl's age column (``6s``, ``2m3s``, ``141m``, ``3d4h``) in seconds."""
    unit = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(int(n) * unit[u] for n, u in _AGE_PART.findall(age))


def parse_describe_node(text: str) -> DescribedNode:
    """Read ``kubectl describe node`` (one node), whole or cut; see the module's doc."""
    node = DescribedNode()
    section: str | None = None
    broken: set[str] = set()
    headerless: dict[str, list[int]] = {}
    in_pods = False
    for no, line in enumerate(clean_lines(text, "kubectl describe node"), 1):
        if not line.strip():
            continue
        if _ELISION.match(line):
            node.cuts.append(f"line {no}: {line.strip()!r}, lines left out"
                             + (f" in {section}" if section else ""))
            if section:
                broken.add(section)
            continue
        top = _TOP_KEY.match(line) if not line[:1].isspace() else None
        if top:
            if section and section not in broken:
                node.complete.add(section)
            key, value = top[1], top[2].strip()
            section = key if key in SECTIONS else None
            in_pods = key == "Non-terminated Pods"
            if key == "Name":
                node.name = value
            elif key == "Labels":
                node.labels = {}
                label = _LABEL.match(value)
                if label:
                    node.labels[label[1]] = label[2]
            elif key == "Capacity":
                node.capacity = {}
            elif key == "Allocatable":
                node.allocatable = {}
            elif key == "Allocated resources":
                node.allocated = {}
            continue
        if section == "Labels" or section is None:
            label = _LABEL.match(line)
            if label:
                if section is None:  # a label row whose header was cut: unambiguous
                    node.labels[label[1]] = label[2]
                    continue
                node.labels[label[1]] = label[2]
                continue
        if section in ("Capacity", "Allocatable"):
            entry = _RESOURCE.match(line)
            if entry:
                if entry[1].startswith(NVIDIA_PREFIX):
                    target = node.capacity if section == "Capacity" else node.allocatable
                    assert target is not None
                    target[entry[1]] = int(entry[2])
                continue
        plugin = _PLUGIN_POD.match(line) if in_pods else None
        if plugin:
            age = age_seconds(plugin["age"])
            node.plugin_age_s = age if node.plugin_age_s is None else min(age, node.plugin_age_s)
            continue
        allocated = _ALLOCATED.match(line)
        if allocated and section in ("Allocated resources", None):
            if node.allocated is None:
                node.allocated = {}
            node.allocated[allocated[1]] = int(allocated[2])
            continue
        row = _RESOURCE.match(line) if section is None else None
        if row and row[1].startswith(NVIDIA_PREFIX):
            headerless.setdefault(row[1], []).append(int(row[2]))
    if section and section not in broken and section != "Allocated resources":
        node.cuts.append(f"the capture ends inside {section}: it may be cut")
    elif section == "Allocated resources" and section not in broken:
        node.complete.add(section)
    _headerless_rows(node, headerless)
    return node


def _headerless_rows(node: DescribedNode, rows: dict[str, list[int]]) -> None:
    """nvidia.com/* rows above any section header (a grep): two of one resource are its
    Capacity and Allocatable, in kubectl's order; any other count is not read (a cut)."""
    ambiguous = 0
    for key, counts in rows.items():
        taken = (node.capacity is not None and key in node.capacity) or \
            (node.allocatable is not None and key in node.allocatable)
        if len(counts) == 2 and not taken:
            node.capacity = {**(node.capacity or {}), key: counts[0]}
            node.allocatable = {**(node.allocatable or {}), key: counts[1]}
            node.cuts.append(f"{key}: capacity {counts[0]} and allocatable {counts[1]} read "
                             "from two rows without their headers (a grep: kubectl prints "
                             "Capacity before Allocatable)")
        else:
            ambiguous += len(counts)
    if ambiguous:
        node.cuts.append(f"{ambiguous} nvidia.com/* row(s) without their Capacity/Allocatable "
                         "header: not read (either section could be meant)")


@dataclass
class PodTable:
    """The pods read (in order), whether the table's header line was there (False: a grep),
    and the cuts."""

    pods: list[KubePod] = field(default_factory=list)
    header: bool = False
    cuts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """``{"pods": [{"namespace", "name", "node", "phase", "ready", "restarts", "waiting",
        "labels"}], "header": bool, "cuts": [...]}``; a ``Completed`` pod's phase is
        "Succeeded", any other status (CrashLoopBackOff...) is its ``waiting``."""
        shown = ("namespace", "name", "node", "phase", "ready", "restarts", "waiting",
                 "labels")  # a table shows no runtime class nor what the pod asks for
        return {"pods": [{k: v for k, v in asdict(p).items() if k in shown}
                         for p in self.pods], "header": self.header, "cuts": list(self.cuts)}


_READY = re.compile(r"^\d+/\d+$")
_NODE_COLUMN = 7  # -o wide: NAME READY STATUS RESTARTS AGE IP NODE ...


def _restarts(fields: list[str], at: int) -> tuple[int, int] | None:
    """(restarts, index after them): "12" or "1 (75m ago)"."""
    if at >= len(fields) or not fields[at].isdigit():
        return None
    after = at + 1
    if after + 1 < len(fields) and fields[after].startswith("(") and fields[after + 1] == "ago)":
        after += 2
    return int(fields[at]), after


def parse_pods_table(text: str) -> PodTable:
    """Read a ``kubectl get pods`` table, whole, filtered or cut; see the module's doc."""
    table = PodTable()
    namespaced: bool | None = None
    wide = False
    rows = 0
    for no, line in enumerate(clean_lines(text, "kubectl get pods"), 1):
        fields = line.split()
        if not fields or line.strip().startswith("```"):
            continue
        if _ELISION.match(line):
            table.cuts.append(f"line {no}: {line.strip()!r}, rows left out")
            continue
        if fields[0] in ("NAME", "NAMESPACE") and "READY" in fields:
            table.header = True
            namespaced = fields[0] == "NAMESPACE"
            wide = "NODE" in fields
            continue
        if re.match(r"^\S*[$#]\s|^\S+@\S+[:~]", line) or fields[0] in ("kubectl", "k"):
            continue  # the command line pasted with its output
        at = 2 if len(fields) > 2 and _READY.match(fields[2]) and not _READY.match(fields[1]) \
            else 1 if len(fields) > 1 and _READY.match(fields[1]) else None
        if at is None or (namespaced is not None and at != (2 if namespaced else 1)):
            table.cuts.append(f"line {no}: {line.strip()[:60]!r} is not a whole pod row")
            continue
        restarts = _restarts(fields, at + 2)
        if at + 2 >= len(fields) or restarts is None or restarts[1] >= len(fields):
            table.cuts.append(f"line {no}: pod row cut: {line.strip()[:60]!r}")
            continue
        ready, total = (int(x) for x in fields[at].split("/"))
        status = fields[at + 1]
        node = ""
        if wide and len(fields) > restarts[1] + 2:
            node = fields[restarts[1] + 2]
        phase = status if status in ("Running", "Pending", "Succeeded", "Failed") else (
            "Succeeded" if status == "Completed" else "")
        table.pods.append(KubePod(
            namespace=fields[0] if at == 2 else "", name=fields[at - 1], node=node,
            phase=phase, ready=ready == total and total > 0, restarts=restarts[0],
            waiting="" if phase else status))
        rows += 1
    return table



_DESCRIBE_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][A-Za-z0-9 ./_-]*):\s*(?P<value>.*)$")


@dataclass
class _PodBlock:
    """One pod of a ``describe pod`` capture, as its lines are read."""

    name: str
    namespace: str = ""
    node: str | None = None  # None: the header was cut before "Node:"
    phase: str = ""
    runtime: str = ""
    ready: list[bool] = field(default_factory=list)
    restarts: int = 0
    waiting: str = ""
    in_waiting: bool = False
    images: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    visible: list[str] = field(default_factory=list)

    def pod(self) -> KubePod:
        return KubePod(namespace=self.namespace, name=self.name,
                       node=(self.node or "").split("/")[0], phase=self.phase,
                       ready=bool(self.ready) and all(self.ready), restarts=self.restarts,
                       waiting=self.waiting,
                       runtime_class=self.runtime if self.node is not None else None,
                       gpu_use=gpu_use(self.images, self.resources, self.visible))

    def read(self, key: str, value: str, top: bool) -> None:
        if top:
            if key == "Namespace":
                self.namespace = value
            elif key == "Runtime Class Name":
                self.runtime = value
            elif key == "Node":
                self.node = value
            elif key == "Status":
                self.phase = value
            return
        if key in ("State", "Last State"):
            self.in_waiting = key == "State" and value == "Waiting"
        elif key == "Reason" and self.in_waiting and not self.waiting:
            self.waiting = value
        elif key == "Image" and value:
            self.images.append(value)
        elif key == "Restart Count" and re.fullmatch(r"\d{1,9}", value):
            self.restarts += int(value)
        elif key == "Ready" and value in ("True", "False"):
            self.ready.append(value == "True")
        elif key == "NVIDIA_VISIBLE_DEVICES":
            self.visible.append(value)
        elif key.startswith(NVIDIA_PREFIX):
            self.resources.append(key)


def parse_describe_pods(text: str) -> tuple[list[KubePod], list[str]]:
    """The pods of a ``kubectl describe pod`` capture and its cuts (a pod whose header block
    stops before "Node:" cannot say whether it has a runtime class: ``runtime_class`` None)."""
    blocks: list[_PodBlock] = []
    for line in clean_lines(text, "kubectl describe pod"):
        found = _DESCRIBE_KEY.match(line)
        if not found:
            continue
        key, value, top = found["key"], found["value"].strip(), not found["indent"]
        if top and key == "Name":
            blocks.append(_PodBlock(value))
        elif blocks:
            blocks[-1].read(key, value, top)
    cuts = [f"pod {b.name}: its header was cut before 'Node:' (a pod's runtime class, when it "
            "has one, is printed above it)" for b in blocks if b.node is None]
    return [b.pod() for b in blocks], cuts


@dataclass
class PodSpecs:
    """GPU pods' runtime as a capture shows it: the pods read and what was cut."""

    pods: list[KubePod] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """``{"pods": [{"namespace", "name", "node", "phase", "ready", "restarts", "waiting",
        "runtime_class" (None: not shown), "gpu_use"}], "cuts": [...]}``."""
        keys = ("namespace", "name", "node", "phase", "ready", "restarts", "waiting",
                "runtime_class", "gpu_use")
        return {"pods": [{k: getattr(p, k) for k in keys} for p in self.pods],
                "cuts": list(self.cuts)}


_STRUCTURED = re.compile(r"^(?:apiVersion|kind|items|metadata):", re.M)


def parse_pod_specs(text: str) -> PodSpecs:
    """``kubectl get pod(s) -o yaml|json`` (a Pod or a List of them) or ``kubectl describe
    pod``: each pod with its runtime class and whether it reaches GPUs."""
    text = "\n".join(clean_lines(text, "kubectl get pod"))
    head = text.lstrip()[:4000]
    if head.startswith("{") or _STRUCTURED.search(head):
        return PodSpecs(parse_pods(text))
    pods, cuts = parse_describe_pods(text)
    if not pods:
        raise ParseError("kubectl describe pod", "no 'Name:' line of a pod: neither `kubectl "
                         "get pod -o yaml` nor `kubectl describe pod` output")
    return PodSpecs(pods, cuts)
