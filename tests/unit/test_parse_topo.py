"""`nvidia-smi topo -m` parser on every real capture, and on damaged input."""

from __future__ import annotations

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.topo import TopoMatrix, parse_topo
from tests.conftest import REAL, real_files

FOLDER = "nvidia-smi-topo-m"


def _parse(name: str) -> TopoMatrix:
    return parse_topo((REAL / FOLDER / name).read_text())


def _gpus(n: int) -> list[str]:
    return [f"GPU{i}" for i in range(n)]


# file -> (gpus, nics, {(row, col): cell}, {gpu: (cpu affinity, numa affinity)})
EXPECTED: dict[str, tuple[int, list[str], dict[tuple[str, str], str], dict]] = {
    "4x-a100-80gb-pcie-2-nvlink-bridged-pairs-nv12-4numa-UNRESOLVED-SOURCE.txt": (
        4, [], {("GPU0", "GPU1"): "NV12", ("GPU1", "GPU2"): "SYS", ("GPU3", "GPU2"): "NV12"},
        {"GPU0": ("0-23", "0"), "GPU3": ("72-95", "3")},
    ),
    "8x-a100-sxm4-80gb-nv12-4nic-sys-distserve-issue3.txt": (
        8, ["NIC0", "NIC1", "NIC2", "NIC3"],
        {("GPU0", "GPU7"): "NV12", ("GPU3", "NIC2"): "SYS", ("NIC0", "NIC1"): "PIX",
         ("NIC2", "NIC3"): "PIX", ("NIC3", "GPU0"): "SYS"},
        {"GPU0": ("0-63,128-191", "0"), "GPU7": ("64-127,192-254", "1")},
    ),
    "8x-h100-sxm-nv18-no-nics-spaces.txt": (
        8, [], {("GPU0", "GPU1"): "NV18", ("GPU7", "GPU6"): "NV18"},
        {"GPU0": ("0-47,96-143", "0"), "GPU4": ("48-95,144-191", "1")},
    ),
    "8x-pcie-gpu-all-sys-2-numa-no-nics.txt": (
        8, [], {("GPU0", "GPU1"): "SYS", ("GPU6", "GPU7"): "SYS"},
        {"GPU3": ("0-15,32-47", "0"), "GPU4": ("16-31,48-63", "1")},
    ),
    "8x-rtx4090-pcie-only-phb-node-sys-xeon8352v-drv570.txt": (
        8, [], {("GPU0", "GPU1"): "PHB", ("GPU0", "GPU2"): "NODE", ("GPU5", "GPU6"): "SYS",
                ("GPU7", "GPU6"): "PHB"},
        {"GPU5": ("0-35,72-107", "0"), "GPU6": ("36-71,108-143", "1")},
    ),
    "alcf-polaris-4x-a100-sxm4-nv4-2x-mlx5-header-damaged.txt": (
        4, ["mlx5_0", "mlx5_1"],
        {("GPU0", "GPU3"): "NV4", ("GPU3", "mlx5_0"): "PHB", ("GPU1", "mlx5_1"): "PHB",
         ("mlx5_0", "mlx5_1"): "SYS", ("mlx5_1", "GPU1"): "PHB"},
        {"GPU0": ("24-31,56-63", "3"), "GPU3": ("0-7,32-39", "0")},
    ),
    "autodl-2x-rtx2080ti-pcie-pix-container-drv550.txt": (
        2, [], {("GPU0", "GPU1"): "PIX", ("GPU1", "GPU0"): "PIX"},
        {"GPU0": ("24-47,72-95", "1"), "GPU1": ("24-47,72-95", "1")},
    ),
    "aws-p3.8xlarge-4x-v100-sxm2-nv1-nv2.txt": (
        4, [], {("GPU0", "GPU1"): "NV1", ("GPU0", "GPU3"): "NV2", ("GPU2", "GPU1"): "NV2"},
        {"GPU0": ("0-31", None), "GPU3": ("0-31", None)},
    ),
    "h100-sxm-8gpu-nv18-6nic-princeton-della-empty-cpuaffinity-UNRESOLVED-SOURCE.txt": (
        8, [f"NIC{i}" for i in range(6)],
        {("GPU0", "NIC0"): "PIX", ("GPU3", "NIC2"): "PIX", ("GPU6", "NIC5"): "PIX",
         ("NIC3", "NIC4"): "PIX", ("NIC5", "GPU7"): "NODE", ("GPU4", "GPU5"): "NV18"},
        {"GPU0": (None, "0"), "GPU3": (None, "0"), "GPU4": ("1", "1"), "GPU7": ("1", "1")},
    ),
    "hpe-dl380a-gen11-2x-h100-pcie-nvlink-bridge-nv12.txt": (
        2, [], {("GPU0", "GPU1"): "NV12"},
        {"GPU0": ("32-63,96-127", "1"), "GPU1": ("32-63,96-127", "1")},
    ),
}


def test_every_capture_has_expectations() -> None:
    assert {p.name for p in real_files(FOLDER)} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_capture(name: str) -> None:
    gpus, nics, cells, affinity = EXPECTED[name]
    matrix = _parse(name)
    data = matrix.to_json()
    assert list(data) == ["gpus", "nics", "nic_devices", "links", "cpu_affinity",
                          "numa_affinity"]
    assert data["gpus"] == _gpus(gpus)
    assert data["nics"] == nics
    assert set(data["links"]) == set(_gpus(gpus) + nics)
    for row, cols in data["links"].items():
        assert row not in cols
        assert set(cols) == set(_gpus(gpus) + nics) - {row}
    for (row, col), cell in cells.items():
        assert data["links"][row][col] == cell
    for gpu, (cpu, numa) in affinity.items():
        assert data["cpu_affinity"][gpu] == cpu
        assert data["numa_affinity"][gpu] == numa
    assert set(data["cpu_affinity"]) == set(data["numa_affinity"]) == set(_gpus(gpus))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tabs_expanded_to_spaces_parse_the_same(name: str) -> None:
    text = (REAL / FOLDER / name).read_text()
    expanded = "\n".join(line.expandtabs(8) for line in text.split("\n"))
    assert parse_topo(expanded).to_json() == parse_topo(text).to_json()


def test_nic_legend() -> None:
    data = _parse("8x-a100-sxm4-80gb-nv12-4nic-sys-distserve-issue3.txt").to_json()
    assert data["nic_devices"] == {f"NIC{i}": f"mlx5_{i}" for i in range(4)}
    princeton = _parse(
        "h100-sxm-8gpu-nv18-6nic-princeton-della-empty-cpuaffinity-UNRESOLVED-SOURCE.txt")
    assert princeton.nic_devices["NIC5"] == "mlx5_5"
    assert _parse("alcf-polaris-4x-a100-sxm4-nv4-2x-mlx5-header-damaged.txt").nic_devices == {}


def test_princeton_empty_cpu_affinity_keeps_numa_and_gpu_numa_id() -> None:
    matrix = _parse(
        "h100-sxm-8gpu-nv18-6nic-princeton-della-empty-cpuaffinity-UNRESOLVED-SOURCE.txt")
    assert [matrix.cpu_affinity[g] for g in _gpus(8)] == [None] * 4 + ["1"] * 4
    assert [matrix.numa_node(g) for g in _gpus(8)] == [0] * 4 + [1] * 4
    assert all(matrix.gpu_numa_id(g) is None for g in _gpus(8))


def test_aws_old_driver_has_no_numa() -> None:
    matrix = _parse("aws-p3.8xlarge-4x-v100-sxm2-nv1-nv2.txt")
    assert matrix.numa_node(0) is None
    assert matrix.cpu_affinity["GPU2"] == "0-31"


def test_helpers() -> None:
    matrix = _parse("aws-p3.8xlarge-4x-v100-sxm2-nv1-nv2.txt")
    assert matrix.nvlink_count(0, 3) == 2
    assert matrix.nvlink_count("GPU0", "GPU1") == 1
    assert matrix.link(1, 2) == "NV2"
    assert matrix.link(0, 9) is None
    assert matrix.gpu_count == 4
    sys_only = _parse("8x-pcie-gpu-all-sys-2-numa-no-nics.txt")
    assert sys_only.nvlink_count(0, 1) == 0
    assert _parse("8x-h100-sxm-nv18-no-nics-spaces.txt").nvlink_count(3, 5) == 18


def test_ansi_escapes_in_header() -> None:
    text = (REAL / FOLDER / "hpe-dl380a-gen11-2x-h100-pcie-nvlink-bridge-nv12.txt").read_text()
    bold = text.replace("GPU0    GPU1", "\x1b[4mGPU0\x1b[0m    \x1b[4mGPU1\x1b[0m", 1)
    assert bold != text
    assert parse_topo(bold).to_json() == parse_topo(text).to_json()


def test_gpu_numa_id_column_when_set() -> None:
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" \
           "GPU0\t X \tNV18\t0-71\t0\t\t4\n" \
           "GPU1\tNV18\t X \t0-71\t0\t\t5\n"
    matrix = parse_topo(text)
    assert matrix.gpu_numa_id("GPU0") == "4"
    assert matrix.gpu_numa_id(1) == "5"


def test_single_gpu() -> None:
    matrix = parse_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
                        "GPU0\t X \t0-15\t0\t\tN/A\n")
    assert matrix.gpus == ["GPU0"]
    assert matrix.links == {"GPU0": {}}
    assert matrix.cpu_affinity == {"GPU0": "0-15"}


HEADER = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("", "empty", None),
        ("   \n\n", "empty", None),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "no header", None),
        ("GPU0\t X \tNV12\t0-7\t0\t\tN/A\n", "before any header", 1),
        (HEADER, "no GPU rows", 1),
        (HEADER + "GPU0\t X \tNV12\t0-7\t0\t\tN/A\nGPU1\tNV12\t0-7\t0\t\tN/A\n",
         "GPU1", 3),
        (HEADER + "GPU0\t X \tNV12\tSYS\t0-7\t0\t\tN/A\nGPU1\tNV12\t X \t0-7\t0\t\tN/A\n",
         "more matrix cells", 2),
        (HEADER + "GPU0\t X \tFOO\t0-7\t0\t\tN/A\nGPU1\tNV12\t X \t0-7\t0\t\tN/A\n",
         "'FOO'", 2),
        (HEADER + "GPU0\t X \tNV12\t0-7\t0\t\tN/A\nGPU1\tX\tNV12\t0-7\t0\t\tN/A\n",
         "diagonal", 3),
        (HEADER + "GPU0\t X \tNV12\t0-7\t0\t\tN/A\n", "no row for GPU1", 1),
        (HEADER + "GPU0\t X \tNV12\t0-7\t0\t\tN/A\nGPU2\tNV12\t X \t0-7\t0\t\tN/A\n",
         "'GPU2'", 3),
        (HEADER + "GPU0\t X \tNV12\t0-7\t0\t\tN/A\nGPU0\t X \tNV12\t0-7\t0\t\tN/A\n",
         "two rows", 3),
        (HEADER + "GPU0\t X \tNV12\t0-7\t0\t1\t2\t3\nGPU1\tNV12\t X \t0-7\t0\t\tN/A\n",
         "values after the matrix", 2),
        ("\tGPU0\tGPU1\tGPU0\n", "twice", 1),
    ],
)
def test_unreadable_input_raises(text: str, message: str, line: int | None) -> None:
    with pytest.raises(ParseError) as info:
        parse_topo(text)
    assert message in str(info.value)
    assert info.value.line == line
    assert info.value.source == "nvidia-smi topo -m"


def test_damaged_header_that_rows_do_not_confirm_raises() -> None:
    text = (REAL / FOLDER / "alcf-polaris-4x-a100-sxm4-nv4-2x-mlx5-header-damaged.txt").read_text()
    # Join one more device name into the damaged header: now the rows are one cell wider.
    broken = text.replace("mlx5_0\tmlx5_1 CPU", "mlx5_0 mlx5_1 CPU", 1)
    with pytest.raises(ParseError):
        parse_topo(broken)


def test_row_with_missing_cell_in_space_format_raises() -> None:
    text = (REAL / FOLDER / "8x-h100-sxm-nv18-no-nics-spaces.txt").read_text()
    lines = text.split("\n")
    lines[3] = lines[3].replace("NV18    ", "", 1)
    with pytest.raises(ParseError) as info:
        parse_topo("\n".join(lines))
    assert info.value.line == 4
    assert "row GPU2 has 7 matrix cells but the header names 8 devices" in str(info.value)
