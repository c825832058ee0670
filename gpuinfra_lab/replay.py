"""Builders of the lab's replayed GPU hardware, from real captured outputs.

Each hardware folder ``gpuinfra_lab/hardware/<profile>/`` holds what the ``nvidia-smi`` stand-in
replays on one lab worker: verbatim copies of captures from ``tests/fixtures/real/``, a few files
derived from them (documented per file in ``manifest.json`` under ``sources``), ``gpus.json``
(answers to ``--query-gpu``) and the device nodes that ``lab up`` creates. A broken variant of
another profile names it as its ``base`` and holds only what differs from it: every other file
(its ``gpus.json`` too) is the base's, one copy (:func:`profile_files`). Which builder makes
which profile, and the spec each profile's worker gets, is the one table in
``gpuinfra_lab/profiles.py``.

The folders are committed. Regenerate them after changing this file with::

    .venv/bin/python -m gpuinfra_lab.profiles

``tests/unit/test_lab_inventory.py`` checks that the committed folders equal what is built, and
that every copied file is byte-identical to its capture.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "tests" / "fixtures" / "real"
HARDWARE = Path(__file__).resolve().parent / "hardware"

# Character-device numbers of the NVIDIA driver: 195 is registered for nvidia0..N-1 (minor = GPU
# index) and nvidiactl (minor 255). nvidia-uvm gets a dynamic major at module load on real hosts
# (read it from /proc/devices); the lab fixes it at 511, minor 0 (and 1 for nvidia-uvm-tools).
NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
UVM_MAJOR = 511

# The lab site deploys the 535 branch (driver_branch) and turns persistence mode on, so every
# replayed GPU answers --query-gpu like a converged 535 host. The two HPE hosts were captured on
# driver 555.42.02 with persistence mode off: their gpus.json rows take these two values
# instead (SUBSTITUTED, said in their manifest). The driver version is the one of the only
# 535 capture in tests/fixtures/real (the 8x H100 `-q` capture, worker 1's profile); their
# copied `-q -d` captures keep the 555.42.02 they were taken with.
LAB_DRIVER_VERSION = "535.161.08"
LAB_PERSISTENCE_MODE = "Enabled"
SUBSTITUTED_FIELDS = (
    "; SUBSTITUTED for the lab's converged 535 site: driver_version "
    f"{LAB_DRIVER_VERSION} (the 535 driver of the 8x H100 `-q` capture; this host was captured "
    f"on 555.42.02) and persistence_mode {LAB_PERSISTENCE_MODE} (what the nvidia_driver role "
    "sets; the capture's host ran with it off)"
)

P2P_CELL = 8  # column width of `nvidia-smi topo -p2p` matrices (tabs expanded to spaces)

# HPE's page with the plain `nvidia-smi` summaries of the two HPE hosts below: the source of
# persistence mode, power limit and memory size where no fixture holds them.
HPE_H100_PAGE = (
    "https://github.com/HPE-Japan-Presales/e-learning/blob/"
    "b3530162043ab8b0ccd7e1a718d3f8d534e47377/gpu/h100/mgmt_gpu_on_dl380agen11.md"
)
HPE_A100_PAGE = (
    "https://github.com/HPE-Japan-Presales/e-learning/blob/"
    "b3530162043ab8b0ccd7e1a718d3f8d534e47377/gpu/a100/mgmt_on_ubuntu22.04.4lts.md"
)

# `--query-gpu` fields read from an `nvidia-smi -q` capture: field -> path of the -q entry.
# Only fields whose CSV text equals the -q text are listed (temperatures and link widths differ).
Q_FIELDS = {
    "name": "Product Name",
    "uuid": "GPU UUID",
    "serial": "Serial Number",
    "vbios_version": "VBIOS Version",
    "pci.bus_id": "PCI/Bus Id",
    "pci.device_id": "PCI/Device Id",
    "pci.sub_device_id": "PCI/Sub System Id",
    "persistence_mode": "Persistence Mode",
    "mig.mode.current": "MIG Mode/Current",
    "mig.mode.pending": "MIG Mode/Pending",
    "pstate": "Performance State",
    "compute_mode": "Compute Mode",
    "ecc.mode.current": "ECC Mode/Current",
    "memory.total": "FB Memory Usage/Total",
    "memory.used": "FB Memory Usage/Used",
    "memory.free": "FB Memory Usage/Free",
    "power.limit": "GPU Power Readings/Current Power Limit",
}

# `--query-gpu` fields the monitoring collector asks, read from an `nvidia-smi -q` capture whose
# text differs from the CSV text only by the unit (`29 C` -> `29`) or by N/A's brackets (`N/A`
# -> `[N/A]`). The ECC totals are the sums of the capture's SRAM and DRAM counters of that kind:
# every counter in the captures used is 0, so the sum is 0 however nvidia-smi adds them.
Q_MONITORING_FIELDS = {
    "temperature.gpu": "Temperature/GPU Current Temp",
    "power.draw": "GPU Power Readings/Power Draw",
    "utilization.gpu": "Utilization/Gpu",
    "retired_pages.double_bit.count": "Retired Pages/Double Bit ECC",
    "retired_pages.single_bit_ecc.count": "Retired Pages/Single Bit ECC",
    "retired_pages.pending": "Retired Pages/Pending Page Blacklist",
}
ECC_TOTALS = {
    "ecc.errors.uncorrected.volatile.total": ("ECC Errors/Volatile", "Uncorrectable"),
    "ecc.errors.corrected.volatile.total": ("ECC Errors/Volatile", "Correctable"),
}


def read_real(rel: str) -> bytes:
    """The bytes of one capture under ``tests/fixtures/real``."""
    return (REAL / rel).read_bytes()


def read_real_text(rel: str) -> str:
    return read_real(rel).decode("utf-8")


# --- parsers of the captures used here ------------------------------------------------------


def parse_q(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Split `nvidia-smi -q` text into its header entries and one {path: value} per GPU.

    Nested sections become paths joined by ``/`` (e.g. ``FB Memory Usage/Total``).
    """
    header: dict[str, str] = {}
    gpus: list[dict[str, str]] = []
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        if line.startswith("GPU "):
            gpus.append({})
            stack = []
            continue
        key, sep, value = line.partition(" : ")
        name = key.strip()
        if not name or name.startswith("="):
            continue
        indent = len(key) - len(key.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([s for _, s in stack] + [name])
        if not sep:
            stack.append((indent, name))
        elif gpus:
            gpus[-1][path] = value.strip()
        else:
            header[name] = value.strip()
    return header, gpus


def q_monitoring_fields(entries: dict[str, str]) -> dict[str, str]:
    """The monitoring fields (Q_MONITORING_FIELDS, ECC_TOTALS) of one GPU of a -q capture, in
    `--query-gpu` CSV text; a field the capture lacks is left out (the replay then refuses it,
    as it refuses any field it has no captured value for)."""
    out = {}
    for field_name, path in Q_MONITORING_FIELDS.items():
        if path in entries:
            value = entries[path]
            out[field_name] = "[N/A]" if value == "N/A" else value.removesuffix(" C")
    for field_name, (section, kind) in ECC_TOTALS.items():
        counters = [int(v) for k, v in entries.items() if k.startswith(section + "/")
                    and k.rsplit("/", 1)[1].split(" ", 1)[1].startswith(kind)]
        if counters:
            out[field_name] = str(sum(counters))
    return out


def parse_gpu_lines(text: str) -> list[tuple[str, str]]:
    """(name, uuid) of each ``GPU i: NAME (UUID: GPU-...)`` line (-L and nvlink outputs)."""
    found = re.findall(r"^GPU \d+: (.+) \(UUID: (GPU-[0-9a-f-]+)\)$", text, re.MULTILINE)
    return [(name, uuid) for name, uuid in found]


def parse_query_csv(text: str) -> list[dict[str, str]]:
    """Rows of a `--query-gpu ... --format=csv` capture keyed by field (units dropped from keys)."""
    lines = text.splitlines()
    fields = [re.sub(r" \[.*\]$", "", f) for f in lines[0].split(", ")]
    return [dict(zip(fields, row.split(", "), strict=True)) for row in lines[1:] if row]


def remote_bus_ids(text: str) -> list[str]:
    """Per GPU of an `nvlink -R` capture, the bus id of the device its links lead to."""
    blocks = re.split(r"^GPU \d+: .*$", text, flags=re.MULTILINE)[1:]
    return [re.search(r"Remote Device (\S+):", block).group(1) for block in blocks]


# --- writers in nvidia-smi's formats ----------------------------------------------------------


def p2p_matrix(cells: list[list[str]], legend_from: str) -> str:
    """A `topo -p2p` matrix in the capture's layout (8-wide columns), with a capture's legend."""
    names = [f"GPU{i}" for i in range(len(cells))]
    rows = ["".ljust(P2P_CELL) + "".join(n.ljust(P2P_CELL) for n in names)]
    for name, row in zip(names, cells, strict=True):
        rows.append(f" {name}".ljust(P2P_CELL) + "".join(c.ljust(P2P_CELL) for c in row))
    legend = legend_from[legend_from.index("\nLegend:") :]
    return "\n".join(r.rstrip() for r in rows) + "\n" + legend


def uniform_p2p_cells(count: int, status: str) -> list[list[str]]:
    """Every pair ``status``, the diagonal ``X``."""
    return [["X" if i == j else status for j in range(count)] for i in range(count)]


def list_gpus(gpus: list[dict[str, str]]) -> str:
    """`nvidia-smi -L` text for the GPUs of gpus.json."""
    return "".join(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n" for g in gpus)


def nvlink_repeated(per_gpu_capture: str, gpus: list[dict[str, str]]) -> str:
    """`nvlink --status` for all GPUs: one GPU's captured block under each GPU's own header."""
    links = per_gpu_capture.split("\n", 1)[1]
    return "".join(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n{links}" for g in gpus)


def device_nodes(count: int) -> list[dict[str, object]]:
    """Path, major and minor of each character device a node with ``count`` GPUs has."""
    nodes = [(f"/dev/nvidia{i}", NVIDIA_MAJOR, i) for i in range(count)]
    nodes += [
        ("/dev/nvidiactl", NVIDIA_MAJOR, NVIDIACTL_MINOR),
        ("/dev/nvidia-uvm", UVM_MAJOR, 0),
        ("/dev/nvidia-uvm-tools", UVM_MAJOR, 1),
    ]
    return [{"path": path, "major": major, "minor": minor} for path, major, minor in nodes]


# --- the profiles -----------------------------------------------------------------------------


@dataclass
class Profile:
    """What one profile folder holds while it is being built."""

    name: str
    description: str
    gpus: list[dict[str, str]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    replay: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    # the profile this one is a variant of: its gpus.json (and any file not here) is the base's
    base: str | None = None

    def copy(self, filename: str, capture: str, *commands: str, note: str = "") -> None:
        """Add a verbatim copy of a capture, replayed for ``commands``."""
        self.files[filename] = read_real_text(capture)
        self.sources[filename] = f"copy of tests/fixtures/real/{capture}" + note
        for command in commands:
            self.replay[command] = filename

    def derive(self, filename: str, text: str, how: str, *commands: str) -> None:
        """Add a file built from captures (not itself a capture), replayed for ``commands``."""
        self.files[filename] = text
        self.sources[filename] = how
        for command in commands:
            self.replay[command] = filename

    def render(self, gpu_model: str) -> dict[str, str]:
        """Every file of the profile folder, manifest and gpus.json included (``gpu_model``:
        the spec the profile's worker gets, from gpuinfra_lab/profiles.py)."""
        manifest = {
            "profile": self.name,
            "description": self.description,
            **({"base": self.base} if self.base else {}),
            "gpu_model": gpu_model,
            "gpu_count": len(self.gpus),
            "device_nodes": device_nodes(len(self.gpus)),
            "replay": dict(sorted(self.replay.items())),
            "sources": dict(sorted(self.sources.items())),
        }
        out = dict(self.files)
        if not self.base:  # a variant answers --query-gpu from its base's gpus.json
            out["gpus.json"] = json.dumps(self.gpus, indent=2) + "\n"
        out["manifest.json"] = json.dumps(manifest, indent=2) + "\n"
        return out


def profile_files(root: Path, name: str) -> dict[str, Path]:
    """Every file profile ``name`` replays from, by file name: its base's (manifest ``base``),
    overlaid by its own. `lab up` installs these in one folder."""
    folder = root / name
    base = json.loads((folder / "manifest.json").read_text()).get("base")
    files = profile_files(root, base) if base else {}
    files.update({p.name: p for p in sorted(folder.iterdir()) if p.is_file()})
    return files


def h100_sxm_nvswitch() -> Profile:
    """worker1: HGX H100 8-GPU on NVSwitch, every pair NV18, P2P OK."""
    q_rel = "nvidia-smi-q/8x-h100-80gb-hbm3-bare-metal-drv535.161.08-full-q.txt"
    header, q_gpus = parse_q(read_real_text(q_rel))
    gpus = []
    for index, entries in enumerate(q_gpus):
        row = {"index": str(index)}
        row.update({f: entries[path] for f, path in Q_FIELDS.items() if path in entries})
        row.update(q_monitoring_fields(entries))
        row["driver_version"] = header["Driver Version"]
        gpus.append(row)
    p = Profile(
        "8x-h100-sxm-nvswitch",
        "HGX H100 8-GPU baseboard: NVSwitch, NV18 between every pair, P2P read/write OK",
        gpus,
    )
    p.copy("topo-m.txt", "nvidia-smi-topo-m/8x-h100-sxm-nv18-no-nics-spaces.txt", "topo -m")
    p2p = "nvidia-smi-topo-p2p/8x-h100-80gb-hbm3-p2p-r-all-OK.txt"
    p.copy("topo-p2p-r.txt", p2p, "topo -p2p r")
    p.copy(
        "topo-p2p-w.txt",
        p2p,
        "topo -p2p w",
        note=" (a `-p2p r` capture: no `w` capture "
        "exists; on NVSwitch every pair is OK for writes as for reads)",
    )
    p.copy("q.txt", q_rel, "-q")
    nvlink = "nvidia-smi-nvlink/h100-sxm-gpu0-nvlink-status-i0-18-links-26.562.txt"
    p.derive(
        "nvlink-s.txt",
        nvlink_repeated(read_real_text(nvlink), gpus),
        f"derived: the 18 link lines of tests/fixtures/real/{nvlink} (GPU 0 of an H100 SXM "
        "node) repeated for GPUs 0-7, each under a `GPU i: NAME (UUID: ...)` header with the "
        f"name and UUID of GPU i in tests/fixtures/real/{q_rel} (the captures come from two "
        "different H100 nodes)",
        "nvlink -s",
    )
    p.derive("L.txt", list_gpus(gpus), "derived: gpus.json in `nvidia-smi -L` format", "-L")
    p.sources["gpus.json"] = (
        f"derived: per GPU of tests/fixtures/real/{q_rel} (index = order in the capture = "
        "Minor Number), the -q entries of Q_FIELDS in gpuinfra_lab/replay.py, and the monitoring "
        "fields of Q_MONITORING_FIELDS and ECC_TOTALS (unit and N/A brackets as CSV prints "
        "them; ECC totals: sums of counters that are all 0)"
    )
    return p


# The two GPUs' rows of the plain `nvidia-smi` summary on HPE_H100_PAGE, as `--query-gpu` CSV
# text: Temp (28C, 29C), Pwr:Usage (44W, 49W: whole watts, as the summary prints them),
# Memory-Usage (1MiB), GPU-Util (0%) and Volatile Uncorr. ECC (0).
HPE_H100_SUMMARY = (
    {"temperature.gpu": "28", "power.draw": "44 W", "memory.used": "1 MiB",
     "utilization.gpu": "0 %", "ecc.errors.uncorrected.volatile.total": "0"},
    {"temperature.gpu": "29", "power.draw": "49 W", "memory.used": "1 MiB",
     "utilization.gpu": "0 %", "ecc.errors.uncorrected.volatile.total": "0"},
)


def h100_pcie_bridged() -> Profile:
    """worker2: HPE DL380a, 2x H100 PCIe joined by NVLink bridges (NV12), P2P OK."""
    nvlink = "nvidia-smi-nvlink/hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt"
    remote = "nvidia-smi-nvlink/hpe-dl380a-2x-h100-pcie-nvlink-R-remote.txt"
    peers = remote_bus_ids(read_real_text(remote))
    bus_ids = [peers[1], peers[0]]  # each GPU's links lead to the other one
    gpus = [
        {
            "index": str(i),
            "name": name,
            "uuid": uuid,
            "pci.bus_id": bus_ids[i],
            "driver_version": LAB_DRIVER_VERSION,
            "persistence_mode": LAB_PERSISTENCE_MODE,
            "pstate": "P0",
            "memory.total": "81559 MiB",
            "power.limit": "350.00 W",
            **HPE_H100_SUMMARY[i],
        }
        for i, (name, uuid) in enumerate(parse_gpu_lines(read_real_text(nvlink)))
    ]
    p = Profile(
        "2x-h100-pcie-bridged",
        "HPE DL380a Gen11: 2x H100 PCIe 80GB joined by NVLink bridges (NV12), P2P OK",
        gpus,
    )
    p.copy(
        "topo-m.txt",
        "nvidia-smi-topo-m/hpe-dl380a-gen11-2x-h100-pcie-nvlink-bridge-nv12.txt",
        "topo -m",
    )
    p.copy("nvlink-s.txt", nvlink, "nvlink -s")
    legend = read_real_text("nvidia-smi-topo-p2p/8x-h100-80gb-hbm3-p2p-r-all-OK.txt")
    synth = p2p_matrix(uniform_p2p_cells(2, "OK"), legend)
    how = (
        "SYNTHESIZED (no capture exists): a 2-GPU all-OK matrix in the layout and with the "
        "legend of tests/fixtures/real/nvidia-smi-topo-p2p/8x-h100-80gb-hbm3-p2p-r-all-OK.txt; "
        f"P2P between the bridged pair is attested by p2pBandwidthLatencyTest on {HPE_H100_PAGE}"
    )
    p.derive("topo-p2p-r.txt", synth, how, "topo -p2p r")
    p.derive("topo-p2p-w.txt", synth, how, "topo -p2p w")
    p.derive("L.txt", list_gpus(gpus), "derived: gpus.json in `nvidia-smi -L` format", "-L")
    p.sources["gpus.json"] = (
        f"derived: name and UUID from tests/fixtures/real/{nvlink}; pci.bus_id from "
        f"tests/fixtures/real/{remote} (GPU 0's links lead to GPU 1 and back); driver_version "
        "from tests/fixtures/real/INDEX.md (same host); persistence_mode, pstate, memory.total, "
        "power.limit, temperature.gpu, power.draw, memory.used, utilization.gpu and "
        "ecc.errors.uncorrected.volatile.total from the plain `nvidia-smi` output on "
        f"{HPE_H100_PAGE} (HPE_H100_SUMMARY in gpuinfra_lab/replay.py)"
        + SUBSTITUTED_FIELDS
    )
    return p


def a100_pcie_bridge_missing() -> Profile:
    """worker3 (--broken): spec says bridged pairs, hardware is PCIe only, P2P not supported."""
    listing = "nvidia-smi-L/hpe-dl380-gen11-2x-a100-pcie-40gb-list-gpus.txt"
    query = (
        "nvidia-smi-query-gpu/"
        "hpe-dl380-gen11-2x-a100-pcie-40gb-name-busid-vbios-temp-util-mem-clocks.txt"
    )
    ecc = "nvidia-smi-q/hpe-dl380-gen11-2x-a100-pcie-40gb-q-d-ECC.txt"
    perf = "nvidia-smi-q/hpe-dl380-gen11-2x-a100-pcie-40gb-q-d-PERFORMANCE.txt"
    ecc_header, ecc_gpus = parse_q(read_real_text(ecc))
    _, perf_gpus = parse_q(read_real_text(perf))
    uuids = [uuid for _, uuid in parse_gpu_lines(read_real_text(listing))]
    gpus = []
    for i, row in enumerate(parse_query_csv(read_real_text(query))):
        gpu = {"index": str(i), "uuid": uuids[i], **row}
        gpu["driver_version"] = LAB_DRIVER_VERSION  # capture: ecc_header["Driver Version"]
        gpu["ecc.mode.current"] = ecc_gpus[i]["ECC Mode/Current"]
        gpu["pstate"] = perf_gpus[i]["Performance State"]
        gpu["persistence_mode"] = LAB_PERSISTENCE_MODE
        gpu["power.limit"] = "250.00 W"
        gpus.append(gpu)
    p = Profile(
        "2x-a100-pcie-bridge-missing",
        "BROKEN on purpose: 2x A100 PCIe 40GB whose spec says NVLink-bridged pairs, but no "
        "bridge is fitted: all NVLinks inactive, PCIe-only topology, P2P not supported",
        gpus,
    )
    p.copy("L.txt", listing, "-L")
    p.copy(
        "nvlink-s.txt",
        "nvidia-smi-nvlink/hpe-dl380-gen11-2x-a100-pcie-no-bridge-nvlink-s-all-inactive.txt",
        "nvlink -s",
    )
    p.copy(
        "topo-m.txt",
        "nvidia-smi-topo-m/autodl-2x-rtx2080ti-pcie-pix-container-drv550.txt",
        "topo -m",
        note=" (a real 2-GPU PCIe-only matrix from another host: PIX, no NV#; no "
        "`topo -m` capture of the A100 host exists)",
    )
    ns = "nvidia-smi-topo-p2p/autodl-2x-rtx2080ti-p2p-p-NS.txt"
    p.copy("topo-p2p-p.txt", ns, "topo -p2p p", note=" (same 2-GPU PCIe host as topo-m.txt)")
    for mode in ("r", "w"):
        p.copy(
            f"topo-p2p-{mode}.txt",
            ns,
            f"topo -p2p {mode}",
            note=f" (a `-p2p p` capture replayed for `-p2p {mode}`: without P2P support "
            "every mode answers NS)",
        )
    p.copy("q-d-ECC.txt", ecc, "-q -d ECC")
    p.copy("q-d-PERFORMANCE.txt", perf, "-q -d PERFORMANCE")
    p.sources["gpus.json"] = (
        f"derived: the rows of tests/fixtures/real/{query}; uuid from "
        f"tests/fixtures/real/{listing}; driver_version and ecc.mode.current from "
        f"tests/fixtures/real/{ecc}; pstate from tests/fixtures/real/{perf}; persistence_mode "
        f"and power.limit from the plain `nvidia-smi` output on {HPE_A100_PAGE}"
        + SUBSTITUTED_FIELDS
    )
    return p


# MIG: the only real `nvidia-smi -L` capture with MIG devices is the first two GPUs of a DGX A100
# 80GB laid out "all-balanced" (3g.40gb + 2g.20gb + 2x 1g.10gb per GPU; the author cut it at
# `head -n10`). Its profiles replay it as a 2-GPU host: what the verify suite's MIG checks read.
DGX_MIG_LISTING = "nvidia-smi-L/dgx-a100-80gb-mig-all-balanced-L-head-n10.txt"
DGX_MIG_PAGE = (
    "https://github.com/NVIDIA/deepops/blob/3957a42fb9af0b09c91b6d2ac9dc7925daf00523/"
    "docs/slurm-cluster/nvml.md"
)
# The healthy MIG profile, the broken variant's base.
MIG_BALANCED = "2x-a100-sxm4-mig-balanced"
# GPU 1's 3g.40gb device: the line the broken variant drops.
DGX_MIG_GPU1_3G = "  MIG 3g.40gb     Device  0: (UUID: MIG-51872ee5-5410-564e-abd2-27382756d2d4)\n"


def _dgx_mig_gpus() -> list[dict[str, str]]:
    return [
        {
            "index": str(i),
            "name": name,
            "uuid": uuid,
            "driver_version": LAB_DRIVER_VERSION,
            "persistence_mode": LAB_PERSISTENCE_MODE,
            "mig.mode.current": "Enabled",
            "mig.mode.pending": "Enabled",
        }
        for i, (name, uuid) in enumerate(parse_gpu_lines(read_real_text(DGX_MIG_LISTING)))
    ]


def _dgx_mig_sources(p: Profile) -> None:
    p.sources["gpus.json"] = (
        f"derived: name and UUID from tests/fixtures/real/{DGX_MIG_LISTING} ({DGX_MIG_PAGE}); "
        "mig.mode.current and mig.mode.pending Enabled: the capture lists MIG devices, which "
        "exist only with MIG mode on" + SUBSTITUTED_FIELDS.replace("this host was captured on "
                                                                   "555.42.02", "the capture "
                                                                   "does not say its driver")
    )


def a100_sxm_mig_balanced() -> Profile:
    """A MIG node: 2x A100 SXM4 80GB, each GPU laid out all-balanced (the DGX capture)."""
    p = Profile(
        MIG_BALANCED,
        "2x A100-SXM4-80GB with MIG on, each laid out all-balanced (3g.40gb + 2g.20gb + "
        "2x 1g.10gb): the first two GPUs of a DGX A100's `nvidia-smi -L`",
        _dgx_mig_gpus(),
    )
    p.copy("L.txt", DGX_MIG_LISTING, "-L")
    _dgx_mig_sources(p)
    return p


def a100_sxm_mig_gpu1_differs() -> Profile:
    """BROKEN on purpose: the same node whose GPU 1 lost its 3g.40gb instance. Only its ``-L``
    differs: losing a GPU instance changes none of a GPU's ``--query-gpu`` answers (name, UUID,
    MIG mode current and pending stay Enabled), so it answers them from the healthy profile's
    gpus.json (its ``base``), not from a copy."""
    p = Profile(
        "2x-a100-sxm4-mig-gpu1-differs",
        "BROKEN on purpose: the MIG node above whose GPU 1 has no 3g.40gb instance (what a "
        "reboot without the boot unit, or a hand-made change, leaves): its instances differ "
        "from the spec's layout on that GPU alone",
        _dgx_mig_gpus(),
        base=MIG_BALANCED,
    )
    listing = read_real_text(DGX_MIG_LISTING)
    assert DGX_MIG_GPU1_3G in listing
    p.derive(
        "L.txt",
        listing.replace(DGX_MIG_GPU1_3G, ""),
        f"SYNTHESIZED from tests/fixtures/real/{DGX_MIG_LISTING}: GPU 1's 3g.40gb line "
        "removed, every other byte as captured",
        "-L",
    )
    p.sources["gpus.json"] = (
        f"the gpus.json of {MIG_BALANCED} (manifest `base`; the same two GPUs, MIG mode on: "
        "GPU 1's lost instance changes no `--query-gpu` answer)"
    )
    return p
