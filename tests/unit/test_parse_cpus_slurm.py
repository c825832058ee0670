"""Parsers of the slurm role's inputs: lscpu, /proc/meminfo, CPU lists, `slurmd -G`, `sinfo`,
and the driver's /proc/driver/nvidia/gpus/*/information files (tests/fixtures/slurm/INDEX.md)."""

from __future__ import annotations

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.cpus import (
    CpuTopology,
    LogicalCpu,
    format_ranges,
    parse_cpu_list,
    parse_lscpu,
    parse_meminfo_mb,
)
from gpuinfra.parsers.slurm import gres_counts, parse_sinfo_nodes, parse_slurmd_gres
from gpuinfra.parsers.system import parse_gpu_minors
from gpuinfra.parsers.topo import parse_topo
from tests.conftest import REPO

SLURM = REPO / "tests" / "fixtures" / "slurm"
HGX_TOPO = REPO / "gpuinfra_lab" / "hardware" / "8x-h100-sxm-nvswitch" / "topo-m.txt"


def fixture(name: str) -> str:
    return (SLURM / name).read_text()


def lab_layout() -> CpuTopology:
    return parse_lscpu(fixture("lscpu-p-lab-worker-2cpu.txt"))


def hgx_layout() -> CpuTopology:
    return parse_lscpu(fixture("lscpu-p-hgx-2x48c-SYNTHESIZED.txt"))


# ----------------------------------------------------------------------------- lscpu

def test_lab_worker_lscpu_is_what_slurmd_c_reported():
    """slurmd -C on that machine: CPUs=2 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1."""
    layout = lab_layout()
    assert layout.cpus == (LogicalCpu(0, 0, 0, 0), LogicalCpu(1, 1, 0, 0))
    assert (layout.cpu_count, layout.sockets, layout.cores_per_socket,
            layout.threads_per_core) == (2, 1, 2, 1)
    assert layout.uniform


def test_synthesized_hgx_host_has_two_sockets_of_48_cores_with_two_threads():
    layout = hgx_layout()
    assert (layout.cpu_count, layout.sockets, layout.cores, layout.cores_per_socket,
            layout.threads_per_core) == (192, 2, 96, 48, 2)
    assert layout.uniform
    assert {c.node for c in layout.cpus} == {0, 1}


def test_lscpu_without_numa_column_values_reads_node_as_none():
    layout = parse_lscpu("# CPU,Core,Socket,Node\n0,0,0,\n1,0,0,\n")
    assert [c.node for c in layout.cpus] == [None, None]
    assert (layout.cores, layout.threads_per_core) == (1, 2)


@pytest.mark.parametrize("text, problem", [
    ("# CPU,Core,Socket,Node\n", "no CPU lines"),
    ("", "no CPU lines"),
    ("0,0,0,0\n0,1,0,0\n", "listed twice"),
    ("0,0\n", "expected CPU,CORE,SOCKET"),
    ("0,x,0,0\n", "expected CPU,CORE,SOCKET"),
    ("CPU   NODE  SOCKET  CORE\n0     0     0       0\n", "expected CPU,CORE,SOCKET"),
])
def test_lscpu_that_cannot_be_read_raises(text, problem):
    with pytest.raises(ParseError, match=problem):
        parse_lscpu(text)


def test_layout_json_round_trip_keeps_every_cpu():
    layout = hgx_layout()
    data = layout.to_json()
    assert (data["sockets"], data["cores_per_socket"], data["threads_per_core"]) == (2, 48, 2)
    assert CpuTopology.from_json(data) == layout
    assert CpuTopology.from_json(lab_layout().to_json()) != layout


def test_a_socket_with_fewer_cores_is_not_uniform():
    layout = parse_lscpu("0,0,0,0\n1,1,0,0\n2,2,1,1\n")  # 2 cores on socket 0, 1 on socket 1
    assert not layout.uniform
    smt_mixed = parse_lscpu("0,0,0,0\n1,0,0,0\n2,1,0,0\n")  # core 0 has 2 threads, core 1 one
    assert not smt_mixed.uniform


# ----------------------------------------------------------------------------- core index

def test_core_index_of_the_hgx_gpus_affinity_is_one_numa_half():
    """GPU0's affinity 0-47,96-143 is cores 0-47; GPU4's 48-95,144-191 is cores 48-95."""
    layout, topo = hgx_layout(), parse_topo(HGX_TOPO.read_text())
    for gpu, expected in (("GPU0", "0-47"), ("GPU3", "0-47"), ("GPU4", "48-95"),
                          ("GPU7", "48-95")):
        cpus = parse_cpu_list(topo.cpu_affinity[gpu])
        assert format_ranges({layout.core_index(c) for c in cpus}) == expected, gpu


def test_core_index_numbers_cores_socket_by_socket():
    layout = hgx_layout()
    assert [layout.core_index(c) for c in (0, 96, 47, 143, 48, 144, 191)] == \
        [0, 0, 47, 47, 48, 48, 95]
    # lscpu core ids that are per socket (not unique) still give Slurm's global index.
    per_socket = parse_lscpu("0,0,0,0\n1,1,0,0\n2,0,1,1\n3,1,1,1\n")
    assert [per_socket.core_index(c) for c in range(4)] == [0, 1, 2, 3]


def test_core_index_of_a_cpu_the_node_lacks_is_none():
    layout = lab_layout()
    assert layout.core_index(1) == 1
    assert layout.core_index(2) is None
    assert layout.core_index(96) is None


# ----------------------------------------------------------------------------- meminfo

def test_meminfo_of_the_lab_worker_is_slurmd_c_real_memory():
    assert parse_meminfo_mb(fixture("meminfo-lab-worker-memtotal.txt")) == 24105


def test_meminfo_finds_memtotal_among_other_lines():
    text = "MemFree:  1000 kB\nMemTotal:        2097152 kB\nSwapTotal: 0 kB\n"
    assert parse_meminfo_mb(text) == 2048


@pytest.mark.parametrize("text, problem", [
    ("MemFree:  1000 kB\n", "no MemTotal line"),
    ("MemTotal:  lots kB\n", "unreadable MemTotal"),
    ("MemTotal:  24684092 MB\n", "unreadable MemTotal"),
    ("MemTotal:\n", "unreadable MemTotal"),
])
def test_meminfo_that_cannot_be_read_raises(text, problem):
    with pytest.raises(ParseError, match=problem):
        parse_meminfo_mb(text)


# ----------------------------------------------------------------------------- CPU lists

@pytest.mark.parametrize("text, expected", [
    ("0-47,96-143", set(range(48)) | set(range(96, 144))),
    ("1", {1}),
    ("0-2,5", {0, 1, 2, 5}),
    (" 3 , 7-8 ", {3, 7, 8}),
    ("64-127,192-254", set(range(64, 128)) | set(range(192, 255))),
])
def test_cpu_lists(text, expected):
    assert parse_cpu_list(text) == expected


@pytest.mark.parametrize("text", ["", "a-b", "5-3", "0-", "1,,2", "N/A"])
def test_malformed_cpu_lists_raise(text):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


@pytest.mark.parametrize("numbers, expected", [
    ([0, 1, 2, 5], "0-2,5"),
    ({5, 0, 2, 1}, "0-2,5"),
    ([7], "7"),
    ([], ""),
    ([1, 3, 5], "1,3,5"),
    ([3, 3, 4], "3-4"),
    (list(range(48)) + list(range(96, 144)), "0-47,96-143"),
])
def test_format_ranges(numbers, expected):
    assert format_ranges(numbers) == expected


def test_format_ranges_inverts_parse_cpu_list():
    for text in ("0-47,96-143", "48-95,144-191", "0,2,4-6"):
        assert format_ranges(parse_cpu_list(text)) == text


# ----------------------------------------------------------------------------- slurmd -G

def test_slurmd_g_of_the_lab_h100_node_has_eight_nv18_gpus():
    result = parse_slurmd_gres(fixture("slurmd-G-lab-worker1-8x-h100.txt"))
    assert result.errors == []
    gpus = result.of("gpu")
    assert [(r.index, r.file) for r in gpus] == [(i, f"/dev/nvidia{i}") for i in range(8)]
    assert {(r.type, r.count, r.cores) for r in gpus} == {("h100-sxm5-80gb", 1, None)}
    for r in gpus:
        assert r.links == tuple(-1 if j == r.index else 18 for j in range(8))
    assert result.of("mps") == []


def test_slurmd_g_invalid_cores_keeps_records_and_reports_errors():
    result = parse_slurmd_gres(fixture("slurmd-G-invalid-cores.txt"))
    assert result.errors == ["error: xcpuinfo_abs_to_mac: failed",
                             "error: Invalid GRES data for gpu, Cores=0-47"]
    assert [(r.type, r.index, r.cores) for r in result.records] == [
        ("h100", 0, "0-47"), ("h100", 1, "0-1")]
    assert result.records[1].links == (18, -1, 18, 18, 18, 18, 18, 18)


def test_slurmd_g_fatal_parse_error_is_an_error_without_records():
    result = parse_slurmd_gres(fixture("slurmd-G-unknown-key.txt"))
    assert result.records == []
    assert result.errors == [
        "error: _parse_next_key: Parsing error at unrecognized key: SelectTypeParameter",
        "fatal: Unable to process configuration file"]


def test_slurmd_g_records_as_json():
    result = parse_slurmd_gres(fixture("slurmd-G-invalid-cores.txt"))
    data = result.to_json()
    assert data["records"][0] == {"name": "gpu", "type": "h100", "count": 1, "index": 0,
                                  "file": "/dev/nvidia0", "cores": "0-47",
                                  "links": [-1, 18, 18, 18, 18, 18, 18, 18]}
    assert len(data["errors"]) == 2


def test_slurmd_g_null_values_and_mps_records():
    text = ("slurmd: Gres Name=gpu Type=(null) Count=2 ID=7696487 File=(null) Links=(null)\n"
            "slurmd: Gres Name=mps Count=100 Index=0 ID=7564559 File=/dev/nvidia0\n")
    result = parse_slurmd_gres(text)
    gpu, mps = result.records
    assert (gpu.type, gpu.count, gpu.index, gpu.file, gpu.links) == (None, 2, None, None, None)
    assert [r.count for r in result.of("mps")] == [100] and mps.file == "/dev/nvidia0"


def test_slurmd_g_ignores_other_log_lines():
    text = "slurmd: debug:  Log file re-opened\nslurmd: info: something\n"
    assert parse_slurmd_gres(text).to_json() == {"records": [], "errors": []}


@pytest.mark.parametrize("line", [
    "slurmd: Gres Name=gpu Count=many Index=0",
    "slurmd: Gres Name=gpu Count=1 Index=zero",
    "slurmd: Gres Name=gpu Count=1 Index=0 Links=-1,NV18",
])
def test_slurmd_g_unreadable_record_raises(line):
    with pytest.raises(ParseError, match="unreadable GRES record"):
        parse_slurmd_gres(line)


# ----------------------------------------------------------------------------- sinfo

def test_sinfo_of_the_lab_lists_both_workers_idle_with_their_gpus():
    text = fixture("sinfo-N-lab.txt")
    headerless = text.split("\n", 1)[1]  # what `sinfo -N -h` prints
    nodes = parse_sinfo_nodes(headerless)
    assert list(nodes) == ["lab-worker1", "lab-worker2"]
    one, two = nodes["lab-worker1"], nodes["lab-worker2"]
    assert (one.state, one.base_state, one.responding, one.reason) == ("idle", "idle", True,
                                                                         "none")
    assert one.gres_counts() == {"gpu:h100-sxm5-80gb": 8}
    assert two.gres_counts() == {"gpu:h100-pcie-80gb": 2}
    assert two.to_json() == {"name": "lab-worker2", "state": "idle",
                             "gres": "gpu:h100-pcie-80gb:2", "reason": "none"}


def test_sinfo_states_with_flags():
    nodes = parse_sinfo_nodes("n1|down*|gpu:h100:8|Not responding\n"
                              "n2|drained|gpu:h100:8(S:0-1)|gres/gpu count reported lower\n"
                              "n1|down*|gpu:h100:8|Not responding\n")
    assert list(nodes) == ["n1", "n2"]  # a node in two partitions appears once
    assert (nodes["n1"].base_state, nodes["n1"].responding) == ("down", False)
    assert nodes["n2"].reason == "gres/gpu count reported lower"


@pytest.mark.parametrize("text", ["lab-worker1 idle gpu:8 none\n", "lab-worker1|idle|gpu:8\n",
                                  "|idle|gpu:8|none\n"])
def test_sinfo_lines_that_are_not_four_fields_raise(text):
    with pytest.raises(ParseError, match="NODE\\|STATE\\|GRES\\|REASON"):
        parse_sinfo_nodes(text)


@pytest.mark.parametrize("gres, expected", [
    ("gpu:h100-sxm5-80gb:8", {"gpu:h100-sxm5-80gb": 8}),
    ("gpu:h100:8(S:0-1),shard:32", {"gpu:h100": 8, "shard": 32}),
    ("gpu:h100:8(S:0-1),mps:800", {"gpu:h100": 8, "mps": 800}),
    ("gpu:1g.10gb:14,gpu:3g.40gb:2", {"gpu:1g.10gb": 14, "gpu:3g.40gb": 2}),
    ("gpu:4", {"gpu": 4}),
    ("gpu", {"gpu": 1}),
    ("(null)", {}),
    ("", {}),
])
def test_gres_counts(gres, expected):
    assert gres_counts(gres) == expected


def test_gres_counts_adds_repeated_items():
    assert gres_counts("gpu:a:2,gpu:a:3") == {"gpu:a": 5}
    assert gres_counts("gpu:a:2,gpu:b:3") != {"gpu:a": 5}


# ----------------------------------------------------------------------------- device minors

def test_gpu_minors_from_the_information_files():
    text = fixture("proc-driver-nvidia-gpus-information-2x-h100-pcie-CONSTRUCTED.txt")
    assert parse_gpu_minors(text) == {"0000:c2:00.0": 0, "0000:d5:00.0": 1}


def test_gpu_minors_follow_each_file_not_its_position():
    text = fixture("proc-driver-nvidia-gpus-information-2x-h100-pcie-CONSTRUCTED.txt")
    swapped = text.replace("Device Minor: \t 0", "Device Minor: \t 9")
    assert parse_gpu_minors(swapped) == {"0000:c2:00.0": 9, "0000:d5:00.0": 1}


def test_gpu_minors_of_no_driver_is_empty():
    assert parse_gpu_minors("") == {}


@pytest.mark.parametrize("text", [
    "==> /proc/driver/nvidia/gpus/0000:c2:00.0/information <==\nDevice Minor: \t 0\n",
    "Bus Location: \t 0000:c2:00.0\nDevice Minor: \t zero\n",
    # a header between the bus and the minor: the minor belongs to an unknown GPU
    "Bus Location: \t 0000:c2:00.0\n\n==> /proc/driver/nvidia/gpus/x/information <==\n"
    "Device Minor: \t 1\n",
])
def test_gpu_minor_without_its_bus_raises(text):
    with pytest.raises(ParseError, match="Device Minor"):
        parse_gpu_minors(text)
