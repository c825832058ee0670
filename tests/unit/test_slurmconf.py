"""gpuinfra.slurm.conf and the slurm templates, on real captures (nvidia-smi topo -m, the lab's
lscpu, /proc/meminfo and `slurmd -G`) and the synthesized 2-socket HGX lscpu
(tests/fixtures/slurm/INDEX.md)."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER
from gpuinfra.knowledge.gpus import GPU_MODELS
from gpuinfra.parsers.cpus import CpuTopology, parse_lscpu, parse_meminfo_mb
from gpuinfra.parsers.slurm import parse_slurmd_gres
from gpuinfra.parsers.system import parse_gpu_minors
from gpuinfra.parsers.topo import TopoMatrix, parse_topo
from gpuinfra.slurm.conf import slurm_conf
from gpuinfra.slurm.extra import (
    CONF_EXTRA,
    MANAGED_KEYS,
    MERGED_KEYS,
    SlurmConfigError,
    ctld_parameters,
    extra_lines,
    extra_problem,
)
from gpuinfra.slurm.gres import (
    MPS_COUNT_PER_GPU,
    GpuDevice,
    check_gres_type,
    gpu_devices,
    gpu_type,
    gres_plan,
    gres_types,
    node_gres,
)
from gpuinfra.slurm.nodes import NodeHardware, node_hardware, node_line, partition_lines
from gpuinfra.slurm.running import (
    ALL_RESTART_KEYS,
    CTLD_RESTART_KEYS,
    ConfChange,
    RunningConfig,
    conf_change,
    conf_server,
    configless_dropin,
    node_gres_lines,
    running_config,
)
from gpuinfra.spec import ClusterSpec, HostInput, NodeSpec, build_cluster
from gpuinfra_deploy.templates import TemplateProblem, role_file
from gpuinfra_deploy.templates import text as file_text
from tests.conftest import REAL, REPO

SLURM = REPO / "tests" / "fixtures" / "slurm"
HARDWARE = REPO / "gpuinfra_lab" / "hardware"
TOPO = REAL / "nvidia-smi-topo-m"

HGX = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}
PCIE_PAIR = {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"}
RTX = {"gpu_model": "RTX-4090", "gpu_count": 8}
HGX_TYPE, PAIR_TYPE = "h100-sxm5-80gb", "h100-pcie-80gb"
ADDRESSES = {"lab-head": "10.0.0.10", "lab-worker1": "10.0.0.11", "lab-worker2": "10.0.0.12"}


# ----------------------------------------------------------------------------- helpers

def spec_of(workers: dict[str, dict], **cluster) -> ClusterSpec:
    """A valid spec: lab-head in 'head', ``workers`` (name -> host data) in 'workers'."""
    data = {"cluster_name": "lab", **cluster}
    hosts = [HostInput("lab-head", ("head",), data)]
    hosts += [HostInput(name, ("workers",), {**data, **node}) for name, node in workers.items()]
    return build_cluster(hosts)


def node_of(data: dict, name: str = "lab-worker1") -> NodeSpec:
    return spec_of({name: data}).node(name)


def lab_layout() -> CpuTopology:
    return parse_lscpu((SLURM / "lscpu-p-lab-worker-2cpu.txt").read_text())


def hgx_layout() -> CpuTopology:
    return parse_lscpu((SLURM / "lscpu-p-hgx-2x48c-SYNTHESIZED.txt").read_text())


def topo(path) -> TopoMatrix:
    return parse_topo(path.read_text())


def profile_gpus(profile: str) -> list[dict]:
    """The GPU list of a lab hardware profile, as the NvidiaGpus fact gives it (int index)."""
    gpus = json.loads((HARDWARE / profile / "gpus.json").read_text())
    return [{**g, "index": int(g["index"])} for g in gpus]


def devices_of(profile: str) -> list[GpuDevice]:
    return gpu_devices(profile_gpus(profile), {})[0]


HGX_TOPO = HARDWARE / "8x-h100-sxm-nvswitch" / "topo-m.txt"
PAIR_TOPO = HARDWARE / "2x-h100-pcie-bridged" / "topo-m.txt"
RTX_TOPO = TOPO / "8x-rtx4090-pcie-only-phb-node-sys-xeon8352v-drv570.txt"


def links(i: int, n: int, value: int) -> str:
    return ",".join("-1" if j == i else str(value) for j in range(n))


# ----------------------------------------------------------------------------- GRES type

def test_gpu_type_is_the_model_key_in_lower_case():
    assert gpu_type("H100-SXM5-80GB") == HGX_TYPE
    assert check_gres_type(HGX_TYPE) == HGX_TYPE
    assert gpu_type(" NVIDIA A100 80GB PCIe ") == "nvidia-a100-80gb-pcie"
    assert gpu_type("a:b,c") == "a-b-c"
    types = [gpu_type(key) for key in GPU_MODELS]  # one type per SKU (the NCCL job's --gres)
    assert len(set(types)) == len(types) and all(t == t.lower() for t in types)
    with pytest.raises(SlurmConfigError):
        gpu_type("::")


@pytest.mark.parametrize("value", ["h100:sxm", "a,b", "", "-h100", "x" * 65, None, 100])
def test_bad_gres_types_are_refused_naming_the_field(value):
    with pytest.raises(SlurmConfigError, match="slurm_gpu_type"):
        check_gres_type(value)


def test_a_gres_type_with_a_trailing_newline_is_refused():
    with pytest.raises(SlurmConfigError, match="slurm_gpu_type"):
        check_gres_type("h100\n")


# ----------------------------------------------------------------------------- node hardware

def test_lab_worker_hardware_is_what_slurmd_c_reported():
    memory = parse_meminfo_mb((SLURM / "meminfo-lab-worker-memtotal.txt").read_text())
    exact = node_hardware(lab_layout(), memory)
    assert exact == NodeHardware(cpus=2, sockets=1, cores_per_socket=2, threads_per_core=1,
                                 real_memory_mb=24105)  # slurmd -C: RealMemory=24105
    assert exact.slurm_fields() == ("CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 "
                                    "RealMemory=24105")


def test_memory_reserve_keeps_a_percentage_from_jobs():
    assert node_hardware(lab_layout(), 24105, 2).real_memory_mb == 23622  # 24105 * 98 // 100
    assert node_hardware(lab_layout(), 24105, 49).real_memory_mb == 12293
    assert node_hardware(hgx_layout(), 2063731, 2).slurm_fields() == (
        "CPUs=192 Sockets=2 CoresPerSocket=48 ThreadsPerCore=2 RealMemory=2022456")


@pytest.mark.parametrize("reserve", [-1, 50, 100])
def test_memory_reserve_out_of_range_is_refused(reserve):
    with pytest.raises(SlurmConfigError, match="slurm_memory_reserve_percent"):
        node_hardware(lab_layout(), 24105, reserve)


def test_non_uniform_layouts_are_refused():
    uneven_sockets = parse_lscpu("0,0,0,0\n1,1,0,0\n2,2,1,1\n")
    with pytest.raises(SlurmConfigError, match="describe it by hand"):
        node_hardware(uneven_sockets, 1024)
    half_smt = parse_lscpu("0,0,0,0\n1,0,0,0\n2,1,0,0\n")
    with pytest.raises(SlurmConfigError, match="same cores and threads"):
        node_hardware(half_smt, 1024)


# ----------------------------------------------------------------------------- GPU devices

def test_device_minors_come_from_the_driver_information_files():
    text = (SLURM / "proc-driver-nvidia-gpus-information-2x-h100-pcie-CONSTRUCTED.txt")
    devices, notes = gpu_devices(profile_gpus("2x-h100-pcie-bridged"),
                                 parse_gpu_minors(text.read_text()))
    assert [(d.index, d.minor, d.bus_id) for d in devices] == [
        (0, 0, "00000000:C2:00.0"), (1, 1, "00000000:D5:00.0")]
    assert notes == []


def test_device_files_follow_the_minor_not_the_index():
    minors = {"0000:C2:00.0": 7, "00000000:d5:00.0": 3}  # case and domain width differ
    devices, notes = gpu_devices(profile_gpus("2x-h100-pcie-bridged"), minors)
    assert [d.file for d in devices] == ["/dev/nvidia7", "/dev/nvidia3"]
    assert notes == []


def test_without_minors_the_index_is_assumed_and_said():
    devices, notes = gpu_devices(profile_gpus("8x-h100-sxm-nvswitch"), {})
    assert [d.file for d in devices] == [f"/dev/nvidia{i}" for i in range(8)]
    assert len(notes) == 1 and "device minors of GPU 0-7 not reported" in notes[0]


def test_a_gpu_missing_from_the_minors_is_named():
    gpus = list(reversed(profile_gpus("2x-h100-pcie-bridged")))  # any order in, index order out
    devices, notes = gpu_devices(gpus, {"0000:c2:00.0": 0})
    assert [(d.index, d.minor) for d in devices] == [(0, 0), (1, 1)]
    assert len(notes) == 1 and "GPU 1 not reported" in notes[0]


def test_no_gpus_no_devices():
    assert gpu_devices([], {"0000:c2:00.0": 0}) == ([], [])


# ----------------------------------------------------------------------------- gres.conf

def test_hgx_h100_with_its_lscpu_gets_cores_per_numa_half_and_nv18_links():
    plan = gres_plan(node_of(HGX), HGX_TYPE, devices_of("8x-h100-sxm-nvswitch"),
                     topo(HGX_TOPO), hgx_layout())
    assert plan.lines == tuple(
        f"Name=gpu Type={HGX_TYPE} File=/dev/nvidia{i} Cores={'0-47' if i < 4 else '48-95'} "
        f"Links={links(i, 8, 18)}" for i in range(8))
    assert plan.notes == () and not plan.nvml_needed


def test_hgx_links_read_back_as_slurmd_printed_them_on_the_lab():
    """A FORMAT check, not evidence that the values are right: slurmd -G on the lab echoes the
    gres.conf this role wrote (no NVML there), and lines 3-8 of the fixture were written by
    hand from lines 1-2 (tests/fixtures/slurm/INDEX.md). It shows slurmd reads our Links= as we
    mean them; the values themselves are held to the real topo capture in
    test_hgx_topology_on_the_2_cpu_lab_worker_leaves_cores_out_and_says_why and friends."""
    plan = gres_plan(node_of(HGX), HGX_TYPE, devices_of("8x-h100-sxm-nvswitch"),
                     topo(HGX_TOPO), None)
    ours = {int(re.search(r"nvidia(\d+)", line)[1]):
            tuple(int(v) for v in re.search(r"Links=(\S+)", line)[1].split(","))
            for line in plan.lines}
    slurmd = parse_slurmd_gres((SLURM / "slurmd-G-lab-worker1-8x-h100.txt").read_text())
    assert ours == {r.index: r.links for r in slurmd.of("gpu")}
    assert all("Cores=" not in line for line in plan.lines)  # no layout: no Cores, no guess


def test_hgx_topology_on_the_2_cpu_lab_worker_leaves_cores_out_and_says_why():
    plan = gres_plan(node_of(HGX), HGX_TYPE, devices_of("8x-h100-sxm-nvswitch"),
                     topo(HGX_TOPO), lab_layout())
    assert all("Cores=" not in line for line in plan.lines)
    assert all("Links=" in line for line in plan.lines)
    assert len(plan.notes) == 1
    assert "does not have (online: 0-1)" in plan.notes[0] and "Cores= left out" in plan.notes[0]


def test_bridged_h100_pcie_pair_links_are_nv12():
    plan = gres_plan(node_of(PCIE_PAIR), PAIR_TYPE, devices_of("2x-h100-pcie-bridged"),
                     topo(PAIR_TOPO), None)
    assert plan.lines == (f"Name=gpu Type={PAIR_TYPE} File=/dev/nvidia0 Links=-1,12",
                          f"Name=gpu Type={PAIR_TYPE} File=/dev/nvidia1 Links=12,-1")


def test_pcie_only_capture_has_no_nvlink():
    devices = [GpuDevice(i, i) for i in range(8)]
    plan = gres_plan(node_of(RTX), "rtx-4090", devices, topo(RTX_TOPO), None)
    assert plan.lines == tuple(f"Name=gpu Type=rtx-4090 File=/dev/nvidia{i} "
                               f"Links={links(i, 8, 0)}" for i in range(8))


def test_mps_node_shares_each_gpu_in_percent():
    node = node_of({**HGX, "gpu_sharing": {"mode": "mps", "clients": 8}})
    plan = gres_plan(node, HGX_TYPE, devices_of("8x-h100-sxm-nvswitch"), topo(HGX_TOPO),
                     hgx_layout())
    assert len(plan.lines) == 16 and plan.lines[0].startswith("Name=gpu ")
    assert plan.lines[8:] == tuple(f"Name=mps Count={MPS_COUNT_PER_GPU} File=/dev/nvidia{i}"
                                   for i in range(8))
    assert MPS_COUNT_PER_GPU == 100


def test_time_sliced_node_has_one_shard_line_per_gpu():
    node = node_of({**PCIE_PAIR, "gpu_sharing": {"mode": "time-slicing", "replicas": 4}})
    plan = gres_plan(node, PAIR_TYPE, devices_of("2x-h100-pcie-bridged"), topo(PAIR_TOPO), None)
    assert plan.lines[2:] == ("Name=shard Count=4 File=/dev/nvidia0",
                              "Name=shard Count=4 File=/dev/nvidia1")
    assert not any(line.startswith("Name=mps") for line in plan.lines)


def test_mig_node_is_autodetected_through_nvml():
    node = node_of({**HGX, "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 2}}})
    plan = gres_plan(node, HGX_TYPE, devices_of("8x-h100-sxm-nvswitch"), topo(HGX_TOPO),
                     hgx_layout())
    assert plan.lines == ("AutoDetect=nvml",) and plan.nvml_needed
    assert "NVML" in plan.notes[0]


def test_without_gpu_facts_gres_conf_comes_from_the_spec():
    plan = gres_plan(node_of(HGX), HGX_TYPE, [], topo(HGX_TOPO), hgx_layout())
    assert plan.lines == tuple(f"Name=gpu Type={HGX_TYPE} File=/dev/nvidia{i}" for i in range(8))
    assert len(plan.notes) == 1 and "no GPU facts" in plan.notes[0]


def test_fewer_gpus_than_the_spec_says_is_noted_and_topology_not_trusted():
    two = devices_of("2x-h100-pcie-bridged")
    plan = gres_plan(node_of(HGX), HGX_TYPE, two, topo(HGX_TOPO), hgx_layout())
    assert len(plan.lines) == 2
    assert any("the spec says 8 GPUs, the node shows 2" in n for n in plan.notes)
    assert any("topo -m shows 8 GPUs" in n and "Links= left out" in n for n in plan.notes)
    assert all("Links=" not in line for line in plan.lines)


def test_unreadable_affinity_leaves_cores_out_with_a_note():
    matrix = TopoMatrix(gpus=["GPU0"], nics=[], nic_devices={}, links={"GPU0": {}},
                        cpu_affinity={"GPU0": "0-x"}, numa_affinity={"GPU0": "0"})
    plan = gres_plan(node_of({"gpu_model": "L4", "gpu_count": 1}), "l4", [GpuDevice(0, 0)],
                     matrix, lab_layout())
    assert plan.lines == ("Name=gpu Type=l4 File=/dev/nvidia0 Links=-1",)
    assert "'0-x' is unreadable" in plan.notes[0]


def test_gres_plan_refuses_a_bad_type_and_ignores_nodes_without_gpus():
    with pytest.raises(SlurmConfigError):
        gres_plan(node_of(HGX), "h100:sxm", [], None, None)
    head = spec_of({"lab-worker1": HGX}).node("lab-head")
    assert gres_plan(head, "none", [], None, None).lines == ()


# ----------------------------------------------------------------------------- slurm.conf parts

def test_node_gres_from_the_spec():
    assert node_gres(node_of(HGX), HGX_TYPE) == [f"gpu:{HGX_TYPE}:8"]
    mps = node_of({**HGX, "gpu_sharing": {"mode": "mps", "clients": 8}})
    assert node_gres(mps, HGX_TYPE) == [f"gpu:{HGX_TYPE}:8", "mps:800"]
    sliced = node_of({**PCIE_PAIR, "gpu_sharing": {"mode": "time-slicing", "replicas": 4}})
    assert node_gres(sliced, PAIR_TYPE) == [f"gpu:{PAIR_TYPE}:2", "shard:8"]
    head = spec_of({"lab-worker1": HGX}).node("lab-head")
    assert node_gres(head, "none") == []


def test_node_gres_of_a_mig_node_counts_instances_per_profile():
    same = node_of({**HGX, "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 2}}})
    assert node_gres(same, HGX_TYPE) == ["gpu:3g.40gb:16"]
    mixed_layout = [{"1g.10gb": 7}] * 4 + [{"3g.40gb": 2}] * 4
    spec = spec_of({"lab-worker1": {**HGX, "gpu_sharing": {"mode": "mig",
                                                           "mig_layout": mixed_layout}}},
                   mig_strategy="mixed")
    assert node_gres(spec.node("lab-worker1"), HGX_TYPE) == ["gpu:1g.10gb:28", "gpu:3g.40gb:8"]


def test_gres_types_cover_every_sharing_mode_in_use():
    plain = spec_of({"lab-worker1": HGX})
    assert gres_types(plain.nodes) == ["gpu"]
    mixed = spec_of({"lab-worker1": {**HGX, "gpu_sharing": {"mode": "mps", "clients": 4}},
                     "lab-worker2": {**PCIE_PAIR, "gpu_sharing": {"mode": "time-slicing",
                                                                  "replicas": 2}}})
    assert gres_types(mixed.nodes) == ["gpu", "mps", "shard"]
    cpu_only = spec_of({"lab-worker1": {}})
    assert gres_types(cpu_only.nodes) == []


def test_node_line_of_the_lab_worker():
    line = node_line(node_of(HGX), "10.0.0.11", node_hardware(lab_layout(), 24105, 2), HGX_TYPE)
    assert line.text == ("NodeName=lab-worker1 NodeAddr=10.0.0.11 CPUs=2 Sockets=1 "
                         "CoresPerSocket=2 ThreadsPerCore=1 RealMemory=23622 "
                         f"Gres=gpu:{HGX_TYPE}:8 Features=h100,h100-sxm5-80gb,gpus8,nvswitch "
                         "Weight=641 State=UNKNOWN")
    assert line.notes == ()


def test_node_line_without_hardware_address_or_gpus():
    from gpuinfra_deploy.run.knobs import build_spec

    hosts = [HostInput("lab-head", ("head",), {"node_address": "10.0.0.1"}),
             HostInput("cpu01.dc.example", ("workers",), {"slurm_node_weight": 10,
                                                          "node_address": "10.0.0.2"})]
    node = build_spec(hosts).node("cpu01.dc.example")
    line = node_line(node, None, None, "none")
    assert line.text == "NodeName=cpu01 CPUs=1 Weight=10 State=UNKNOWN"
    assert line.name == "cpu01" and "hardware unknown" in line.notes[0]


def test_node_line_refuses_a_bad_gres_type():
    with pytest.raises(SlurmConfigError, match="slurm_gpu_type"):
        node_line(node_of(HGX), None, None, "h100,sxm")


def test_partition_lines_default_and_explicit():
    spec = spec_of({"lab-worker1": HGX, "lab-worker2": PCIE_PAIR})
    assert partition_lines(spec) == [
        "PartitionName=gpu Nodes=lab-worker1,lab-worker2 MaxTime=INFINITE State=UP Default=YES"]
    parts = [{"name": "hgx", "nodes": ["gpu01.dc"], "default": True, "gpu": True},
             {"name": "pcie", "nodes": ["gpu02.dc"]}]
    spec = spec_of({"gpu01.dc": HGX, "gpu02.dc": PCIE_PAIR}, slurm_partitions=parts)
    assert partition_lines(spec, max_time="1-00:00:00") == [
        "PartitionName=hgx Nodes=gpu01 MaxTime=1-00:00:00 State=UP Default=YES",
        "PartitionName=pcie Nodes=gpu02 MaxTime=1-00:00:00 State=UP"]


def test_extra_lines_render_key_value():
    assert extra_lines({"MaxJobCount": 20000, "PropagateResourceLimits": "NONE",
                        "KillOnBadExit": True, "PrologFlags": "Alloc,Contain"}) == [
        "MaxJobCount=20000", "PropagateResourceLimits=NONE", "KillOnBadExit=true"]
    assert extra_lines(None) == [] and extra_lines({}) == []


@pytest.mark.parametrize("extra", [
    {"Max Job": 1}, {"1Key": 1}, {"Max-Job": 1}, {"": 1}, {5: 1},
    {"Key": "two words"}, {"Key": "'quoted'"}, {"Key": "a#b"}, {"Key": ""},
    {"Key": "line\nNodeName=evil"},
])
def test_extra_lines_refuse_bad_keys_and_values_naming_slurm_conf_extra(extra):
    with pytest.raises(SlurmConfigError, match=r"slurm_conf_extra\["):
        extra_lines(extra)


def test_extra_lines_refuse_a_value_with_a_trailing_newline():
    with pytest.raises(SlurmConfigError, match=r"slurm_conf_extra\["):
        extra_lines({"MaxJobCount": "20000\n"})


@pytest.mark.parametrize("extra", [["MaxJobCount=1"], "MaxJobCount=1", 5])
def test_extra_lines_must_be_a_dict(extra):
    with pytest.raises(SlurmConfigError, match="slurm_conf_extra = "):
        extra_lines(extra)


# ----------------------------------------------------------------------------- slurm_conf

# The lab's partition: 23622 MiB (24105 less 2 %) / 8 GPUs on lab-worker1, the smallest share;
# 2 CPUs for 8 GPUs there: no DefCpuPerGPU, and a note says why.
LAB_PARTITION = ("PartitionName=gpu Nodes=lab-worker1,lab-worker2 MaxTime=INFINITE State=UP "
                 "Default=YES DefMemPerGPU=2952")
LAB_CPU_NOTE = ("partition gpu: DefCpuPerGPU left out: lab-worker1 has fewer CPUs than GPUs (a "
                "job on all its GPUs could not get one per GPU); set it per partition if you "
                "want one")


def lab_conf(**kwargs):
    spec = spec_of({"lab-worker1": HGX, "lab-worker2": PCIE_PAIR})
    hardware = {"lab-worker1": node_hardware(lab_layout(), 24105, 2),
                "lab-worker2": node_hardware(lab_layout(), 24105, 2)}
    args = {"addresses": ADDRESSES, "hardware": hardware,
            "gres_type_of": {"lab-worker1": HGX_TYPE, "lab-worker2": PAIR_TYPE}, **kwargs}
    return slurm_conf(spec, **args)


def test_slurm_conf_of_the_lab():
    conf = lab_conf()
    assert (conf.cluster_name, conf.controller, conf.controller_host) == (
        "lab", "lab-head", "lab-head(10.0.0.10)")
    assert conf.gres_types == ["gpu"]
    assert [n.name for n in conf.nodes] == ["lab-worker1", "lab-worker2"]
    assert f"Gres=gpu:{PAIR_TYPE}:2" in conf.nodes[1].text
    assert conf.partitions == [LAB_PARTITION]
    assert conf.notes == [LAB_CPU_NOTE] and conf.extra == [] and not conf.accounting


def test_slurm_conf_without_addresses_or_hardware():
    conf = lab_conf(addresses={}, hardware={"lab-worker1": None}, accounting=True,
                    extra={"MaxJobCount": 5})
    assert conf.controller_host == "lab-head"
    assert "NodeAddr" not in conf.nodes[0].text
    assert [n.split(":")[0] for n in conf.notes] == ["lab-worker1", "lab-worker2",
                                                      "partition gpu", "partition gpu"]
    # no worker's hardware is known: neither per-GPU default is computed without it
    assert "DefMemPerGPU left out: the hardware of lab-worker1, lab-worker2 is unknown" \
        in conf.notes[2]
    assert "DefMemPerGPU" not in conf.partitions[0]
    assert conf.accounting and conf.extra == ["MaxJobCount=5"]


def test_slurm_conf_needs_exactly_one_head():
    spec = spec_of({"lab-worker1": HGX})
    head = spec.node("lab-head")
    two = dataclasses.replace(spec, nodes=(*spec.nodes, dataclasses.replace(head, name="h2")))
    with pytest.raises(SlurmConfigError, match="exactly one host in 'head', found 2"):
        slurm_conf(two, {}, {}, {"lab-worker1": HGX_TYPE})


def test_slurm_conf_refuses_bad_extra():
    with pytest.raises(SlurmConfigError, match="slurm_conf_extra"):
        lab_conf(extra={"Bad Key": 1})


# ----------------------------------------------------------------------------- templates

SETTINGS = {"slurmd_timeout": 300, "cgroup_plugin": "autodetect", "mpi_default": "pmix",
            "mpi_why": "PMIx", "resume_timeout": 900, "reboot_program": "/usr/sbin/reboot",
            "state_save_location": "/var/lib/slurm/slurmctld", "ctld_timeout": 120}


def settings_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_rendered_slurm_conf():
    conf = lab_conf()
    text = role_file("slurm", "/etc/slurm/slurm.conf", conf=conf, settings=SETTINGS)
    lines = settings_lines(text)
    for expected in ("ClusterName=lab", "SlurmctldHost=lab-head(10.0.0.10)", "GresTypes=gpu",
                     "SelectType=select/cons_tres", "SlurmdTimeout=300",
                     "AccountingStorageType=accounting_storage/none",
                     conf.nodes[0].text, conf.nodes[1].text, *conf.partitions):
        assert expected in lines, expected
    assert lines.index(conf.nodes[1].text) < lines.index(conf.partitions[0])
    # Every setting line is Key=Value (NodeName/PartitionName lines carry more of them).
    assert all(re.fullmatch(r"[A-Za-z]+=\S+( [A-Za-z]+=\S+)*", line) for line in lines), lines


def test_rendered_slurm_conf_with_accounting_and_site_settings():
    conf = lab_conf(accounting=True, extra={"MaxJobCount": 20000})
    lines = settings_lines(role_file("slurm", "/etc/slurm/slurm.conf", conf=conf,
                                  settings=SETTINGS))
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines
    assert "AccountingStorageHost=lab-head" in lines
    assert "AccountingStorageType=accounting_storage/none" not in lines
    assert "MaxJobCount=20000" in lines


def test_rendered_slurm_conf_without_gpus_has_no_gres_types():
    spec = spec_of({"lab-worker1": {}})
    conf = slurm_conf(spec, ADDRESSES, {"lab-worker1": None}, {"lab-worker1": "none"})
    text = role_file("slurm", "/etc/slurm/slurm.conf", conf=conf, settings=SETTINGS)
    assert "GresTypes" not in text
    assert "NodeName=lab-worker1 NodeAddr=10.0.0.11 CPUs=1 Weight=1 State=UNKNOWN" \
        in text.splitlines()


def test_rendered_gres_conf_has_the_lines_and_the_notes_as_comments():
    plan = gres_plan(node_of(HGX), HGX_TYPE, devices_of("8x-h100-sxm-nvswitch"),
                     topo(HGX_TOPO), lab_layout())
    lines = node_gres_lines("lab-worker1", plan.lines)
    text = role_file("slurm", "/etc/slurm/gres.conf", cluster="lab", sections=[
        {"node": "lab-worker1", "notes": list(plan.notes), "lines": lines},
        {"node": "lab-worker2", "notes": ["not reached"], "lines": []}])
    assert text.startswith(HEADER + "# gres.conf of cluster lab ")
    assert settings_lines(text) == lines
    assert all(line.startswith("NodeName=lab-worker1 Name=gpu ") for line in lines)
    assert f"# note: {plan.notes[0]}" in text.splitlines()
    assert "# note: not reached" in text.splitlines()


@pytest.mark.parametrize("plugin", ["autodetect", "cgroup/v1"])
def test_rendered_cgroup_conf_constrains_devices(plugin):
    text = role_file("slurm", "/etc/slurm/cgroup.conf", settings={**SETTINGS,
                                                               "cgroup_plugin": plugin})
    assert settings_lines(text) == [f"CgroupPlugin={plugin}", "ConstrainCores=yes",
                                    "ConstrainRAMSpace=yes", "ConstrainDevices=yes"]


def test_rendered_slurmdbd_conf():
    text = role_file("slurm", "/etc/slurm/slurmdbd.conf", cluster_name="lab", controller="lab-head",
                  settings={"db_name": "slurm_acct_db", "db_user": "slurm"})
    lines = settings_lines(text)
    assert {"DbdHost=lab-head", "StorageType=accounting_storage/mysql",
            "StorageLoc=slurm_acct_db", "StorageUser=slurm"} <= set(lines)
    assert not any(line.startswith("StoragePass") for line in lines)


def test_templates_refuse_missing_values():
    """A name the data does not have is an error naming the template's file and line, never
    an empty value in slurm.conf."""
    with pytest.raises(TemplateProblem, match=r"cgroup\.conf\.j2, line \d+: 'dict object' has "
                       "no attribute 'cgroup_plugin'"):
        role_file("slurm", "/etc/slurm/cgroup.conf", settings={})
    with pytest.raises(TemplateProblem, match=r"slurm\.conf\.j2, line \d+"):
        role_file("slurm", "/etc/slurm/slurm.conf", conf=lab_conf(), settings={})


# ----------------------------------------------------------------------------- managed keys

def test_managed_keys_cover_every_key_the_template_writes():
    template = (REPO / "roles/slurm/templates/etc/slurm/slurm.conf.j2").read_text()
    written = {k.lower() for k in re.findall(r"^([A-Za-z]+)=", template, re.MULTILINE)}
    assert written and written <= MANAGED_KEYS, written - MANAGED_KEYS


@pytest.mark.parametrize("extra,words", [
    ({"AuthType": "auth/none"}, "AuthType is written by the slurm role"),
    ({"clustername": "other"}, "is written by the slurm role"),
    ({"SlurmctldHost": "evil"}, "is written by the slurm role"),
    ({"NodeName": "x"}, "is written by the slurm role"),
    ({"PartitionName": "all"}, "is written by the slurm role"),
    ({"Prolog": "/tmp/p.sh"}, "Prolog runs as root"),
    ({"Epilog": "/etc/slurm/../../tmp/e"}, "Epilog runs as root"),
    ({"HealthCheckProgram": "/home/u/x"}, "HealthCheckProgram runs as root"),
])
def test_extra_settings_may_not_override_what_the_role_writes_nor_run_user_programs(extra, words):
    assert words in CONF_EXTRA.problem(extra)
    with pytest.raises(SlurmConfigError, match=words):
        extra_lines(extra)


def test_extra_settings_the_role_does_not_write_pass():
    fine = {"MaxJobCount": 20000, "Prolog": "/etc/slurm/prolog.d/gpu.sh",
            "HealthCheckProgram": "/usr/sbin/nhc"}
    assert CONF_EXTRA.problem(fine) is None
    assert extra_lines(fine) == ["MaxJobCount=20000", "Prolog=/etc/slurm/prolog.d/gpu.sh",
                                 "HealthCheckProgram=/usr/sbin/nhc"]


# ----------------------------------------------------------------------------- configless

def test_the_sites_slurmctld_parameters_are_added_to_enable_configless_once_each():
    assert ctld_parameters(None) == ["enable_configless"]
    assert ctld_parameters({"MaxJobCount": 5}) == ["enable_configless"]
    assert ctld_parameters({"SlurmctldParameters": "idle_on_node_suspend, reboot_from_controller"
                            }) == ["enable_configless", "idle_on_node_suspend",
                                   "reboot_from_controller"]
    # keys are read without case, as Slurm reads them; repeats and empty items go
    assert ctld_parameters({"slurmctldparameters": "enable_configless,,cloud_dns,cloud_dns"}) \
        == ["enable_configless", "cloud_dns"]


def test_slurmctld_parameters_from_the_site_are_accepted_and_merged_not_written_twice():
    extra = {"SlurmctldParameters": "idle_on_node_suspend", "MaxJobCount": 5}
    assert extra_problem("SlurmctldParameters", "idle_on_node_suspend") is None
    assert CONF_EXTRA.problem(extra) is None
    # its own line is the role's merged one (ctld_parameters), not a second line
    assert extra_lines(extra) == ["MaxJobCount=5"]
    conf = lab_conf(extra=extra)
    assert conf.ctld_parameters == ["enable_configless", "idle_on_node_suspend"]
    text = role_file("slurm", "/etc/slurm/slurm.conf", conf=conf, settings=SETTINGS)
    assert [line for line in settings_lines(text) if line.lower().startswith(
        "slurmctldparameters")] == ["SlurmctldParameters=enable_configless,idle_on_node_suspend"]
    assert MERGED_KEYS == {"slurmctldparameters", "prologflags"}


@pytest.mark.parametrize("key", sorted(MANAGED_KEYS - MERGED_KEYS))
def test_every_other_managed_key_is_still_refused(key):
    assert "is written by the slurm role" in extra_problem(key, "x")


def test_node_gres_lines_name_their_node():
    assert node_gres_lines("gpu01", ["Name=gpu Type=t File=/dev/nvidia0", "AutoDetect=nvml"]) \
        == ["NodeName=gpu01 Name=gpu Type=t File=/dev/nvidia0", "NodeName=gpu01 AutoDetect=nvml"]
    assert node_gres_lines("gpu01", []) == []


def test_conf_server_is_the_controllers_address_on_slurmctlds_port():
    assert conf_server("lab-head", "10.0.0.10") == "10.0.0.10:6817"
    assert conf_server("lab-head", None) == "lab-head:6817"


def test_configless_dropin_lets_slurmd_start_without_a_local_file_and_fetch_from_the_head():
    """Debian's slurmd.service (22.05.8) has ConditionPathExists=/etc/slurm/slurm.conf and
    ExecStart=/usr/sbin/slurmd -D -s $SLURMD_OPTIONS: both are reset, and ExecStart given
    --conf-server (configless_slurm.html)."""
    assert file_text(configless_dropin("10.0.0.10:6817")) == (
        HEADER +
        "# The node's Slurm configuration is the controller's (configless_slurm.html): "
        "gpuinfra_roles/slurm.\n"
        "[Unit]\n"
        "# No local slurm.conf: slurmd fetches it from slurmctld.\n"
        "ConditionPathExists=\n"
        "\n"
        "[Service]\n"
        "ExecStart=\n"
        "ExecStart=/usr/sbin/slurmd -D -s --conf-server 10.0.0.10:6817 $SLURMD_OPTIONS\n")


def test_configless_dropin_refuses_a_server_with_a_newline():
    with pytest.raises(GpuinfraError, match="newline"):
        file_text(configless_dropin("10.0.0.10:6817\nExecStartPre=/tmp/x"))


# The lab's configuration as the role renders it: slurm.conf and the cluster's one gres.conf.
def lab_gres_text(notes: tuple[str, ...] = ()) -> str:
    sections = []
    for name, data, kind, profile, path in (
            ("lab-worker1", HGX, HGX_TYPE, "8x-h100-sxm-nvswitch", HGX_TOPO),
            ("lab-worker2", PCIE_PAIR, PAIR_TYPE, "2x-h100-pcie-bridged", PAIR_TOPO)):
        plan = gres_plan(node_of(data, name), kind, devices_of(profile), topo(path), None)
        sections.append({"node": name, "notes": list(notes),
                         "lines": node_gres_lines(name, plan.lines)})
    return role_file("slurm", "/etc/slurm/gres.conf", cluster="lab", sections=sections)


def lab_texts(**kwargs) -> tuple[str, str]:
    return (role_file("slurm", "/etc/slurm/slurm.conf", conf=lab_conf(**kwargs), settings=SETTINGS),
            lab_gres_text())


def lab_running(**kwargs) -> RunningConfig:
    return running_config(*lab_texts(**kwargs))


def test_running_config_reads_the_node_lines_gres_lines_settings_and_partitions():
    slurm_text, gres_text = lab_texts(extra={"MinJobAge": 600})
    running = running_config(slurm_text, gres_text)
    assert running.node_lines == {n.name: n.text for n in lab_conf().nodes}
    assert running.node_lines["lab-worker2"].startswith("NodeName=lab-worker2 NodeAddr=10.0.0.12 ")
    assert running.gres_lines == {
        "lab-worker1": [f"NodeName=lab-worker1 Name=gpu Type={HGX_TYPE} File=/dev/nvidia{i} "
                        f"Links={links(i, 8, 18)}" for i in range(8)],
        "lab-worker2": [f"NodeName=lab-worker2 Name=gpu Type={PAIR_TYPE} File=/dev/nvidia0 "
                        "Links=-1,12",
                        f"NodeName=lab-worker2 Name=gpu Type={PAIR_TYPE} File=/dev/nvidia1 "
                        "Links=12,-1"]}
    assert running.settings["MinJobAge"] == "600"
    assert running.settings["SlurmctldParameters"] == "enable_configless"
    assert running.settings["SlurmctldHost"] == "lab-head(10.0.0.10)"
    assert running.partitions == (LAB_PARTITION,)
    assert not running.empty


def test_running_config_skips_comments_and_of_gres_conf_keeps_only_node_lines():
    running = running_config(
        "# NodeName=ghost CPUs=1\nClusterName=lab # a comment\n\nNodeName=w1 CPUs=2 # x\n",
        "# w1\nName=gpu File=/dev/nvidia0\nNodeName=w1 Name=gpu File=/dev/nvidia0 # first\n"
        "  NodeName=w1 Name=gpu File=/dev/nvidia1\n")
    assert running.settings == {"ClusterName": "lab"}
    assert running.node_lines == {"w1": "NodeName=w1 CPUs=2"}
    assert running.gres_lines == {"w1": ["NodeName=w1 Name=gpu File=/dev/nvidia0",
                                         "NodeName=w1 Name=gpu File=/dev/nvidia1"]}


def test_running_config_of_no_files_is_empty():
    assert running_config("", "").empty and RunningConfig().empty


def test_a_node_not_reached_keeps_its_running_line_never_a_placeholder():
    kept = ("NodeName=lab-worker1 NodeAddr=10.0.0.11 CPUs=192 Sockets=2 CoresPerSocket=48 "
            "ThreadsPerCore=2 RealMemory=505388 Gres=gpu:h100-sxm5-80gb:8 State=UNKNOWN")
    line = node_line(node_of(HGX), "10.0.0.11", None, HGX_TYPE, kept=kept)
    assert line.text == kept and "CPUs=1" not in line.text.split()
    assert line.notes == ("not reached in this run: its line is kept from the head's running "
                          "slurm.conf",)
    # no running line: the placeholder, with its note
    placeholder = node_line(node_of(HGX), "10.0.0.11", None, HGX_TYPE, kept=None)
    assert placeholder.text == ("NodeName=lab-worker1 NodeAddr=10.0.0.11 CPUs=1 "
                                f"Gres=gpu:{HGX_TYPE}:8 Features=h100,h100-sxm5-80gb,gpus8,"
                                "nvswitch Weight=641 State=UNKNOWN")
    assert "hardware unknown" in placeholder.notes[0]
    # hardware read in this run: computed, whatever the running file says
    read = node_line(node_of(HGX), "10.0.0.11", node_hardware(lab_layout(), 24105, 2),
                     HGX_TYPE, kept=kept)
    assert " CPUs=2 " in read.text and read.notes == ()


def test_slurm_conf_keeps_the_running_line_of_a_node_it_has_no_hardware_for():
    running = lab_running()
    kept = running.node_lines["lab-worker2"].replace("CPUs=2 ", "CPUs=4 ")
    running = RunningConfig({**running.node_lines, "lab-worker2": kept}, running.gres_lines,
                            running.settings, running.partitions)
    hardware = {"lab-worker1": node_hardware(lab_layout(), 24105, 2), "lab-worker2": None}
    conf = lab_conf(hardware=hardware, running=running)
    assert [n.text for n in conf.nodes][1] == kept
    assert conf.notes == ["lab-worker2: not reached in this run: its line is kept from the "
                          "head's running slurm.conf", LAB_CPU_NOTE]
    # the kept line's hardware counts for the per-GPU defaults (CPUs=4 / 2 GPUs there)
    assert conf.partitions == [LAB_PARTITION]


class TestConfChange:
    """gpuinfra.slurm.running.conf_change, one test per class of change, as slurm.conf(5) of Slurm
    22.05.8 (doc/man/man5/slurm.conf.5 at tag slurm-22-05-8-1) says:

    - DESCRIPTION: "Changes to the configuration file take effect upon restart of Slurm
      daemons, daemon receipt of the SIGHUP signal, or execution of the command 'scontrol
      reconfigure' unless otherwise noted." -> ``reconfigure``;
    - keys noted "a restart of slurmctld is required" (CTLD_RESTART_KEYS: MaxJobCount,
      SchedulerType, SlurmctldParameters...) -> ``restart``, no slurmd restart;
    - keys noted for slurmctld and the slurmd daemons (ALL_RESTART_KEYS: GresTypes,
      SelectType, SwitchType...) and NODE CONFIGURATION: "Changes in node configuration (e.g.
      adding nodes, changing their processor count, etc.) require restarting both the
      slurmctld daemon and the slurmd daemons" -> ``restart`` with ``slurmd``; gres.conf, read
      by each slurmd at its start, likewise.
    """

    def test_no_running_configuration_is_a_first_start(self):
        assert conf_change(RunningConfig(), *lab_texts()) == ConfChange(
            "restart", "no configuration yet", slurmd=True)

    def test_the_same_files_ask_nothing(self):
        assert conf_change(lab_running(), *lab_texts()) == ConfChange("none")

    def test_comments_alone_ask_nothing_of_slurm(self):
        slurm_text, _ = lab_texts()
        assert conf_change(lab_running(), slurm_text + "# a comment\n",
                           lab_gres_text(notes=("not reached",))) == ConfChange("none")

    @pytest.mark.parametrize("extra,key", [({"MinJobAge": 600}, "minjobage"),
                                           ({"KillWait": 60}, "killwait")])
    def test_a_key_slurm_reads_again_is_a_reconfigure(self, extra, key):
        assert conf_change(lab_running(), *lab_texts(extra=extra)) == ConfChange(
            "reconfigure", key)
        # and taking it away again
        assert conf_change(lab_running(extra=extra), *lab_texts()) == ConfChange(
            "reconfigure", key)

    def test_a_changed_value_is_a_change(self):
        assert conf_change(lab_running(extra={"MinJobAge": 600}),
                           *lab_texts(extra={"MinJobAge": 300})).kind == "reconfigure"

    def test_partitions_alone_are_a_reconfigure(self):
        slurm_text, gres_text = lab_texts()
        moved = slurm_text.replace("MaxTime=INFINITE", "MaxTime=1-00:00:00")
        assert conf_change(lab_running(), moved, gres_text) == ConfChange(
            "reconfigure", "partitions changed")

    @pytest.mark.parametrize("extra,key", [({"MaxJobCount": 20000}, "maxjobcount"),
                                           ({"SlurmctldParameters": "idle_on_node_suspend"},
                                            "slurmctldparameters")])
    def test_a_key_only_a_slurmctld_restart_takes_restarts_slurmctld_alone(self, extra, key):
        assert key in CTLD_RESTART_KEYS
        assert conf_change(lab_running(), *lab_texts(extra=extra)) == ConfChange(
            "restart", f"{key} changed", slurmd=False)

    def test_a_key_every_daemon_reads_at_start_restarts_every_daemon(self):
        slurm_text, gres_text = lab_texts()
        shards = slurm_text.replace("GresTypes=gpu\n", "GresTypes=gpu,shard\n")
        assert shards != slurm_text and "grestypes" in ALL_RESTART_KEYS
        assert conf_change(lab_running(), shards, gres_text) == ConfChange(
            "restart", "grestypes changed", slurmd=True)

    def test_nodes_added_or_removed_restart_every_daemon(self):
        slurm_text, gres_text = lab_texts()
        line = lab_conf().nodes[1].text
        fewer = slurm_text.replace(line + "\n", "")
        assert conf_change(lab_running(), fewer, gres_text) == ConfChange(
            "restart", "nodes added or removed: lab-worker2", slurmd=True)
        assert conf_change(running_config(fewer, gres_text), slurm_text, gres_text) == \
            ConfChange("restart", "nodes added or removed: lab-worker2", slurmd=True)

    def test_a_changed_node_restarts_every_daemon(self):
        slurm_text, gres_text = lab_texts()
        line = lab_conf().nodes[0].text
        bigger = slurm_text.replace(line, line.replace("RealMemory=23622", "RealMemory=47040"))
        assert conf_change(lab_running(), bigger, gres_text) == ConfChange(
            "restart", "node definitions changed: lab-worker1", slurmd=True)

    def test_changed_gres_lines_restart_every_daemon(self):
        slurm_text, gres_text = lab_texts()
        cores = gres_text.replace("File=/dev/nvidia0 Links=-1,12",
                                  "File=/dev/nvidia0 Cores=0-1 Links=-1,12")
        assert cores != gres_text
        assert conf_change(lab_running(), slurm_text, cores) == ConfChange(
            "restart", "gres.conf changed", slurmd=True)

    def test_the_strongest_change_wins(self):
        """Nodes first, then gres.conf, then keys for every daemon, then slurmctld's keys."""
        slurm_text, gres_text = lab_texts(extra={"MaxJobCount": 20000, "MinJobAge": 600})
        assert conf_change(lab_running(), slurm_text, gres_text) == ConfChange(
            "restart", "maxjobcount changed", slurmd=False)
        line = lab_conf().nodes[1].text
        assert conf_change(lab_running(), slurm_text.replace(line + "\n", ""), gres_text) == \
            ConfChange("restart", "nodes added or removed: lab-worker2", slurmd=True)

    def test_the_key_lists_do_not_overlap_and_are_lower_case(self):
        assert not CTLD_RESTART_KEYS & ALL_RESTART_KEYS
        assert all(k == k.lower() for k in CTLD_RESTART_KEYS | ALL_RESTART_KEYS)


def test_running_config_keeps_each_nodes_gres_notes_under_its_heading():
    """A node a run does not reach keeps its gres.conf section byte for byte: its NodeName=
    lines and the `# note:` lines under its `# <node>` heading (gres.conf.j2's layout)."""
    gres = "\n".join([
        "# Managed by gpuinfra: changes here are overwritten",
        "# gres.conf of cluster lab (gpuinfra_roles/slurm): the controller's alone",
        "", "# lab-worker1",
        "# note: device minors of GPU 0-7 not reported by the driver",
        "NodeName=lab-worker1 Name=gpu Type=h100 File=/dev/nvidia0",
        "", "# lab-worker2",
        "NodeName=lab-worker2 Name=gpu Type=h100 File=/dev/nvidia0 # trailing comment",
        "# note: a note below the lines is still this node's"])
    running = running_config("", gres)
    assert running.gres_notes == {
        "lab-worker1": ["device minors of GPU 0-7 not reported by the driver"],
        "lab-worker2": ["a note below the lines is still this node's"]}
    assert running.gres_lines == {
        "lab-worker1": ["NodeName=lab-worker1 Name=gpu Type=h100 File=/dev/nvidia0"],
        "lab-worker2": ["NodeName=lab-worker2 Name=gpu Type=h100 File=/dev/nvidia0"]}
    # A note above any heading belongs to no node.
    assert running_config("", "# note: stray\n").gres_notes == {}


def test_configless_dropin_on_debian_13_keeps_its_units_systemd_notification():
    """Debian 13's slurmd.service is Type=notify with `slurmd --systemd`: the drop-in keeps
    --systemd (without it every start timed out in the trixie lab)."""
    text = file_text(configless_dropin("10.0.0.10:6817", "debian-13"))
    assert "ExecStart=/usr/sbin/slurmd --systemd --conf-server 10.0.0.10:6817 $SLURMD_OPTIONS\n" \
        in text
    assert " -D" not in text
