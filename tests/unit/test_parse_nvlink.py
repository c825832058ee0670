"""`nvidia-smi nvlink --status` parser on every real capture, and on other nvlink outputs."""

from __future__ import annotations

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.nvlink import NvlinkStatus, parse_nvlink
from tests.conftest import REAL, real_files

FOLDER = "nvidia-smi-nvlink"
NOT_STATUS = {
    "h100-sxm-gpu0-nvlink-capabilities-c-i0-18-links.txt": "--capabilities",
    "hpe-dl380a-2x-h100-pcie-nvlink-R-remote.txt": "-R",
}
# file -> (GPU keys, name, active links per GPU, inactive links per GPU, rate, all inactive)
STATUS: dict[str, tuple[list[str], str, int, list[int], float | None, bool]] = {
    "azure-a100-sxm4-80gb-single-gpu7-nvlink-s-25GBs-tab-format.txt": (
        ["GPU7"], "NVIDIA A100-SXM4-80GB", 12, [], 25.0, False),
    "azure-nd-a100-v4-8x-a100-sxm4-80gb-nvlink-status-12-links-25GBs.txt": (
        [f"GPU{i}" for i in range(8)], "NVIDIA A100-SXM4-80GB", 12, [], 25.0, False),
    "h100-sxm-gpu0-nvlink-status-i0-18-links-26.562.txt": (
        ["GPU0"], "NVIDIA H100 80GB HBM3", 18, [], 26.562, False),
    "hpe-dl380-gen11-2x-a100-pcie-no-bridge-nvlink-s-all-inactive.txt": (
        ["GPU0", "GPU1"], "NVIDIA A100-PCIE-40GB", 0, [], None, True),
    "hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt": (
        ["GPU0", "GPU1"], "NVIDIA H100 PCIe", 12, [4, 5, 10, 11, 16, 17], 26.562, False),
    "kvm-vm-1x-a10-nvlink-status-empty-output.txt": ([], "", 0, [], None, False),
}


def _parse(name: str) -> NvlinkStatus:
    return parse_nvlink((REAL / FOLDER / name).read_text())


def test_every_capture_is_covered() -> None:
    assert {p.name for p in real_files(FOLDER)} == set(STATUS) | set(NOT_STATUS)


@pytest.mark.parametrize("name", sorted(STATUS))
def test_status_capture(name: str) -> None:
    keys, model, active, inactive, rate, all_inactive = STATUS[name]
    status = _parse(name)
    data = status.to_json()
    assert list(data) == keys
    for key in keys:
        gpu = data[key]
        assert list(gpu) == ["name", "uuid", "links", "all_inactive"]
        assert gpu["name"] == model
        assert gpu["uuid"].startswith("GPU-") and len(gpu["uuid"]) == 40
        assert gpu["all_inactive"] is all_inactive
        on = [k for k, link in gpu["links"].items() if link["active"]]
        off = [int(k) for k, link in gpu["links"].items() if not link["active"]]
        assert len(on) == active
        assert off == inactive
        assert {gpu["links"][k]["gbytes_per_s"] for k in on} <= {rate}
        assert all(gpu["links"][str(k)]["gbytes_per_s"] is None for k in off)


def test_exact_shape_of_partly_active_gpu() -> None:
    data = _parse("hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt").to_json()
    gpu0 = data["GPU0"]
    assert gpu0["uuid"] == "GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9"
    assert gpu0["links"]["0"] == {"active": True, "gbytes_per_s": 26.562}
    assert gpu0["links"]["4"] == {"active": False, "gbytes_per_s": None}
    assert list(gpu0["links"]) == [str(i) for i in range(18)]


def test_all_inactive_gpu() -> None:
    status = _parse("hpe-dl380-gen11-2x-a100-pcie-no-bridge-nvlink-s-all-inactive.txt")
    gpu = status.gpus["GPU1"]
    assert gpu.all_inactive and gpu.links == {} and gpu.active_links == []
    assert status.to_json()["GPU0"]["links"] == {}


def test_helpers() -> None:
    status = _parse("hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt")
    assert status.names == ["NVIDIA H100 PCIe", "NVIDIA H100 PCIe"]
    gpu = status.gpus["GPU1"]
    assert gpu.index == 1
    assert gpu.active_links == [0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15]
    assert gpu.inactive_links == [4, 5, 10, 11, 16, 17]


def test_all_inactive_message_any_case() -> None:
    text = "GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-x)\nNVML: ... ALL LINKS ARE INACTIVE\n"
    assert parse_nvlink(text).gpus["GPU0"].all_inactive


@pytest.mark.parametrize("text", ["", "\n\n", "   \n"])
def test_empty_output_is_empty_result(text: str) -> None:
    assert parse_nvlink(text).to_json() == {}


@pytest.mark.parametrize("name", sorted(NOT_STATUS))
def test_other_subcommands_are_refused(name: str) -> None:
    with pytest.raises(ParseError) as info:
        _parse(name)
    assert "not `--status` output" in str(info.value)
    assert NOT_STATUS[name] in str(info.value)
    assert info.value.line == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("         Link 0: 25 GB/s\n", "before any `GPU n"),
        ("GPU 0: X (UUID: GPU-1)\n         Link 0: Replay Errors: 0\n", "-e"),
        ("GPU 0: X (UUID: GPU-1)\n         Link 0: fast\n", "unexpected line"),
        ("GPU 0: X (UUID: GPU-1)\n         Link 0: 25 GB/s\n         Link 0: 25 GB/s\n",
         "appears twice"),
        ("GPU 0: X (UUID: GPU-1)\nGPU 0: X (UUID: GPU-1)\n", "appears twice"),
        ("GPU 0: X (UUID: GPU-1)\n Link 0: 25 GB/s\nNVML: all links are inActive\n",
         "also says"),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "before any `GPU n"),
    ],
)
def test_unreadable_input_raises(text: str, message: str) -> None:
    with pytest.raises(ParseError, match="nvidia-smi nvlink --status") as info:
        parse_nvlink(text)
    assert message in str(info.value)
