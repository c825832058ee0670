"""GPU list parser (`nvidia-smi --query-gpu --format=csv`, `nvidia-smi -L`) on real captures."""

from __future__ import annotations

import json

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.gpus import GpuList, parse_gpus
from tests.conftest import REAL, real_files

CSV = "nvidia-smi-query-gpu"
LIST = "nvidia-smi-L"


def _parse(folder: str, name: str) -> GpuList:
    return parse_gpus((REAL / folder / name).read_text())


@pytest.mark.parametrize("path", real_files(CSV) + real_files(LIST), ids=lambda p: p.name)
def test_every_capture_parses(path):
    gpus = parse_gpus(path.read_text())
    assert gpus.gpus
    indices = [g.index for g in gpus.gpus]
    assert indices == sorted(set(indices))
    assert all(g.name and g.model for g in gpus.gpus)
    json.dumps(gpus.to_json())


def test_h200_csv_with_index_and_units():
    gpus = _parse(CSV, "h200-8gpu-index-name-mem-driver-power-pstate.txt")
    assert gpus.format == "csv"
    assert [g.index for g in gpus.gpus] == list(range(8))
    first = gpus.to_json()["gpus"][0]
    assert first == {
        "index": 0, "name": "NVIDIA H200", "uuid": None, "model": "H200-SXM-141GB",
        "mig_devices": [], "memory.total": 143771, "driver_version": "570.211.01",
        "power.limit": 700.0, "pstate": "P0",
    }
    assert isinstance(first["memory.total"], int) and isinstance(first["power.limit"], float)


def test_a100_csv_without_index_uses_row_order():
    gpus = _parse(CSV,
                  "hpe-dl380-gen11-2x-a100-pcie-40gb-name-busid-vbios-temp-util-mem-clocks.txt")
    assert [g.index for g in gpus.gpus] == [0, 1]
    second = gpus.gpus[1]
    assert second.name == "NVIDIA A100-PCIE-40GB" and second.model == "A100-PCIE-40GB"
    assert second.fields == {
        "pci.bus_id": "00000000:8A:00.0", "vbios_version": "92.00.25.00.08",
        "temperature.gpu": 37, "utilization.gpu": 0, "memory.total": 40960,
        "memory.free": 40447, "memory.used": 1, "clocks.applications.graphics": 765,
        "clocks.applications.memory": 1215,
    }
    assert gpus.gpus[0].fields["temperature.gpu"] == 39


def test_list_with_mig_devices():
    gpus = _parse(LIST, "dgx-a100-80gb-mig-all-balanced-L-head-n10.txt")
    assert gpus.format == "list"
    assert [g.index for g in gpus.gpus] == [0, 1]  # head -n10 cut GPUs 2-7
    gpu1 = gpus.gpus[1]
    assert gpu1.uuid == "GPU-938c4705-98bf-1735-e98b-c2a5872a8022"
    assert gpu1.model == "A100-SXM4-80GB"
    assert [(m.profile, m.device) for m in gpu1.mig_devices] == [
        ("3g.40gb", 0), ("2g.20gb", 1), ("1g.10gb", 2), ("1g.10gb", 3)]
    assert gpu1.mig_devices[3].uuid == "MIG-91e26891-6f5b-5ff3-9c66-310e47d6b059"


def test_list_inside_a_slurm_job_shows_one_mig_device():
    gpus = _parse(LIST, "dgx-a100-80gb-slurm-job-1-mig-3g.40gb-L.txt")
    assert gpus.to_json() == {"gpus": [{
        "index": 0, "name": "NVIDIA A100-SXM4-80GB",
        "uuid": "GPU-8e100991-ce97-6694-b8eb-b8b1ff5053af", "model": "A100-SXM4-80GB",
        "mig_devices": [{"profile": "3g.40gb", "device": 0,
                         "uuid": "MIG-dcf43e8e-5d19-5fa8-8b1d-8aaca1e467f0"}],
    }]}


def test_list_without_mig():
    gpus = _parse(LIST, "hpe-dl380-gen11-2x-a100-pcie-40gb-list-gpus.txt")
    assert [(g.index, g.uuid, g.mig_devices) for g in gpus.gpus] == [
        (0, "GPU-3fb142e7-7102-c7ac-bd5a-fc829e11ed84", []),
        (1, "GPU-14ac2834-0d81-0508-69eb-e25264c08d21", []),
    ]


def test_noheader_nounits_needs_fields():
    text = ("0, NVIDIA H100 80GB HBM3, 81559, [N/A], GPU-abc\n"
            "1, NVIDIA H100 80GB HBM3, 81559, 69.5, GPU-def\n")
    fields = ["index", "name", "memory.total", "power.draw", "uuid"]
    gpus = parse_gpus(text, fields=fields)
    assert [g.uuid for g in gpus.gpus] == ["GPU-abc", "GPU-def"]
    assert gpus.gpus[0].model == "H100-SXM5-80GB"
    assert gpus.gpus[0].fields == {"memory.total": 81559, "power.draw": None}
    assert gpus.gpus[1].fields["power.draw"] == 69.5
    with pytest.raises(ParseError, match="fields"):
        parse_gpus(text)


def test_noheader_with_units_and_a_repeated_header():
    assert parse_gpus("NVIDIA A10, 23028 MiB\n", fields=["name", "memory.total"]).gpus[0].fields \
        == {"memory.total": 23028}
    with_header = "name, memory.total [MiB]\nNVIDIA A10, 23028 MiB\n"
    assert parse_gpus(with_header, fields=["name", "memory.total"]).gpus[0].model == "A10"
    with pytest.raises(ParseError, match="does not match"):
        parse_gpus(with_header, fields=["name", "memory.used"])


def test_missing_values_and_unknown_model():
    text = ("index, name, power.draw [W], fan.speed [%], ecc.errors.corrected.volatile.total\n"
            "0, NVIDIA Future GPU, [Not Supported], [N/A], 3\n")
    gpu = parse_gpus(text).gpus[0]
    assert gpu.model is None
    assert gpu.fields == {"power.draw": None, "fan.speed": None,
                          "ecc.errors.corrected.volatile.total": 3}


def test_no_devices_found_is_an_empty_list():
    assert parse_gpus("No devices were found\n").to_json() == {"gpus": []}


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("hello world\n", "not nvidia-smi"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
     "not nvidia-smi"),
    ("index, name\n", "no GPU rows"),
    ("index, name, memory.total [MiB]\n0, NVIDIA H200\n", "2 values for 3 fields"),
    ("index, memory.total [MiB]\n0, lots MiB\n", "expected a number"),
    ("index, name\nzero, NVIDIA H200\n", "not a number"),
    ("index, name\n0, NVIDIA H200\n0, NVIDIA H200\n", "listed twice"),
    ("foo, bar\nbaz, qux\n", "without a header"),
    ("  MIG 3g.40gb     Device  0: (UUID: MIG-x)\n", "not nvidia-smi"),
    ("GPU 0: NVIDIA A100 (UUID: GPU-1)\nsomething else\n", "expected a GPU or MIG"),
    ("GPU 0 NVIDIA A100\n", "expected a GPU or MIG"),
    ("GPU 0: NVIDIA A100 (UUID: GPU-1)\nGPU 0: NVIDIA A100 (UUID: GPU-2)\n", "listed twice"),
])
def test_bad_input_raises_parse_error(text, message):
    with pytest.raises(ParseError, match=message) as err:
        parse_gpus(text)
    assert err.value.source.startswith("nvidia-smi")


def test_error_names_the_line():
    with pytest.raises(ParseError) as err:
        parse_gpus("index, name\n0, NVIDIA H200\n1\n")
    assert err.value.line == 3
