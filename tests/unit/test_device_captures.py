"""What a real H100 printed (tests/fixtures/device/h100-80gb-hbm3-vm-drv580.159.04, captured
on the GPU machine lent to this project; the collector's test also on the H200's captures)
read by the same library code as a deploy's verify suite, the GPU metrics collector and
`gpuinfra check`."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from gpuinfra.health.probes import KERNEL_LOG
from gpuinfra.knowledge.gpus import GPU_MODELS
from gpuinfra.monitoring.gpumetrics import QUERIES, Output, metrics_text
from gpuinfra.parsers.fabric import parse_fabric
from gpuinfra.parsers.gpus import parse_gpus
from gpuinfra.parsers.mig import available_profiles, parse_mig
from gpuinfra.parsers.nvlink import parse_nvlink
from gpuinfra.parsers.p2p import parse_p2p
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.verdicts import check_system, failures

DEVICE = Path(__file__).resolve().parents[1] / "fixtures" / "device"
H100 = DEVICE / "h100-80gb-hbm3-vm-drv580.159.04"
H200 = DEVICE / "h200-141gb-vm-drv580.159.04"


def _text(name: str) -> str:
    return (H100 / f"{name}.txt").read_text()


def _commands(machine: Path = H100) -> dict[str, tuple[int, str]]:
    with (machine / "commands.tsv").open() as handle:
        return {row["name"]: (int(row["rc"]), row["command"])
                for row in csv.DictReader(handle, delimiter="\t")}


def test_every_capture_has_its_command_and_the_index_names_the_folder() -> None:
    commands = _commands()
    outputs = {p.stem for p in H100.glob("*.txt")}
    assert outputs == set(commands), "a .txt without its command line in commands.tsv"
    for name in ("nvidia-smi-q", "topo-m", "mig-lgip", "query-gpu-driver"):
        assert commands[name][0] == 0, f"{name} did not answer on the device"
    assert f"## {H100.name}" in (DEVICE / "INDEX.md").read_text()


def test_the_gpu_is_known_by_name_and_pci_id() -> None:
    listed = parse_gpus(_text("nvidia-smi-L")).gpus
    queried = parse_gpus(_text("query-gpu-driver")).gpus
    assert [g.model for g in listed] == [g.model for g in queried] == ["H100-SXM5-80GB"]
    gpu = queried[0]
    assert gpu.fields["driver_version"] == "580.159.04"
    assert gpu.fields["mig.mode.current"] == "Disabled"
    device_ids = re.findall(r"vendor=0x10de device=0x([0-9a-f]{4})", _text("pci-sysfs"))
    assert device_ids == ["2330"]
    assert device_ids[0] in GPU_MODELS["H100-SXM5-80GB"].pci_ids


def test_profile_listing_without_mig_says_nothing_of_mig_mode() -> None:
    """Driver 580 lists the profiles with MIG Disabled; only -lgi says MIG is off."""
    profiles = parse_mig(_text("mig-lgip"))
    assert profiles.kind == "gpu-instance-profiles"
    assert profiles.mig_enabled is None
    instances = parse_mig(_text("mig-lgi"))
    assert (instances.kind, instances.mig_enabled) == ("none", False)


def test_mig_profiles_and_placements_match_the_knowledge() -> None:
    known = GPU_MODELS["H100-SXM5-80GB"].mig_profiles
    seen = available_profiles(parse_mig(_text("mig-lgip")))
    assert seen == {0: {name: p.max_instances for name, p in known.items()}}
    ids = {e.profile_id: e.profile for e in parse_mig(_text("mig-lgip")).entries}
    placements = {ids[p.profile_id]: tuple(p.starts)
                  for p in parse_mig(_text("mig-lgipp")).entries}
    assert placements == {name: p.placements for name, p in known.items()}


def test_matrices_of_one_gpu() -> None:
    topo = parse_topo(_text("topo-m"))
    assert topo.gpus == ["GPU0"]
    assert topo.cpu_affinity == {"GPU0": "0-15"}
    for mode in "rwnap":
        assert parse_p2p(_text(f"topo-p2p-{mode}")).gpus == ["GPU0"]
    assert parse_nvlink(_text("nvlink-status")).gpus == {}
    assert parse_fabric(_text("nvidia-smi-q")).gpus["GPU0"].fabric.state == "N/A"


def _findings(profile: str, gpus: int) -> list:
    return check_system(
        profile, gpus, "H100-SXM5-80GB", topo=parse_topo(_text("topo-m")),
        p2p=[parse_p2p(_text("topo-p2p-r"), "r"), parse_p2p(_text("topo-p2p-w"), "w")],
        nvlink=parse_nvlink(_text("nvlink-status")),
        fabric=parse_fabric(_text("nvidia-smi-q")))


def test_judged_as_what_it_is_and_not_as_what_it_is_not() -> None:
    assert failures(_findings("pcie-only", 1)) == []
    wrong_count = failures(_findings("pcie-only", 8))
    assert wrong_count and wrong_count[0].check == "gpu-count"
    assert "1" in wrong_count[0].observed
    # One SXM GPU cut off from its NVSwitch board cannot be an 8-GPU NVSwitch node.
    assert "profile" in {f.check for f in failures(_findings("nvswitch-all-to-all", 1))}


@pytest.mark.parametrize("machine", [H100, H200], ids=lambda folder: folder.name)
def test_the_collector_reads_the_captures_as_it_read_the_gpu(machine: Path) -> None:
    """Fed the captured query outputs, the library writes the series the collector wrote on
    the machine (values of the moment aside: temperature and power drift between runs)."""
    commands = {command: name for name, (_, command) in _commands(machine).items()}

    def text_of(name: str) -> str:
        return (machine / f"{name}.txt").read_text()

    outputs = {}
    for query in QUERIES:
        name = commands[" ".join(query.command())]
        outputs[query.name] = Output(True, text=text_of(name))
    assert "|| dmesg" in KERNEL_LOG[-1]  # the capture is dmesg's: the fallback reads it
    text = metrics_text(outputs, Output(True, text=text_of("nvlink-status")),
                        Output(True, text=text_of("kernel-log-nvrm")), 1795710849.0)
    written = (machine / "collector.prom").read_text()

    def series(metrics: str) -> set[str]:
        return {line.rsplit(" ", 1)[0] for line in metrics.splitlines()
                if line and not line.startswith("#")}

    assert series(text) == series(written)
    static = re.compile(r"^gpuinfra_gpu_(info|memory_total_bytes|ecc_|remapped_|xid_errors|"
                        r"collector_query_ok)")
    assert ({line for line in text.splitlines() if static.match(line)}
            == {line for line in written.splitlines() if static.match(line)})


def test_the_xml_query_is_whole_and_agrees_with_the_text_one() -> None:
    root = ElementTree.fromstring(_text("nvidia-smi-q-x"))
    assert root.findtext("driver_version") == "580.159.04"
    gpu = root.find("gpu")
    assert gpu is not None and gpu.findtext("product_name") == "NVIDIA H100 80GB HBM3"
    assert gpu.findtext("mig_mode/current_mig") == "Disabled"


def test_verify_local_refuses_a_host_the_inventory_lacks() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "gpuinfra_verify/test_gpu.py",
         "--inventory", str(DEVICE / "site" / "h100.py"), "--local", "h1OO"],
        cwd=DEVICE.parents[2], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 4, run.stdout + run.stderr
    assert "--local h1OO: no such host" in run.stderr and "h100" in run.stderr
