"""The RDMA verify judgements (gpuinfra/rdma/verdicts.py, shared with `gpuinfra check`):
green on real captures of healthy NICs, red with the right cause on each broken state (a real
capture where one exists)."""

from __future__ import annotations

from gpuinfra.parsers.ibstat import parse_ibstat
from gpuinfra.parsers.mlxconfig import parse_mlxconfig
from gpuinfra.parsers.perftest import parse_ib_write_bw
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.rdma.node import gpudirect_path
from gpuinfra.rdma.verdicts import (
    acs_findings,
    affinity_findings,
    ats_findings,
    ats_lspci_findings,
    bandwidth_findings,
    gpudirect_findings,
    port_findings,
    ports_from_ibstat,
    ports_from_sysfs,
    presence_findings,
    rate_findings,
)
from gpuinfra.spec.model import RdmaNic
from tests.conftest import REPO
from tests.unit.test_rdma_lib import CX5, PENDING

REAL = REPO / "tests" / "fixtures" / "real"
HEALTHY = REAL / "ibstat/h100-node-8x-cx7-400g-roce-plus-4x-cx6dx-100g-all-active.txt"
BROKEN = REAL / "ibstat/h100-node-8x-cx7-roce-1-port-polling-1-port-disabled.txt"
TOPO = REAL / "nvidia-smi-topo-m"
PIX = TOPO / "h100-sxm-8gpu-nv18-6nic-princeton-della-empty-cpuaffinity-UNRESOLVED-SOURCE.txt"
SYS = TOPO / "8x-a100-sxm4-80gb-nv12-4nic-sys-distserve-issue3.txt"
SPARK = (REPO / "tests/fixtures/perftest"
         / "dgx-spark-cx7-rail1-rocep1s0f0-ib-write-bw-report-gbits.txt")

ROCE400 = [RdmaNic(f"mlx5_{i}", None, True, "ethernet", 400, "ConnectX-7")
           for i in (0, 3, 4, 5, 6, 9, 10, 11)]


def ports(path):
    return ports_from_ibstat(parse_ibstat(path.read_text()))


def test_healthy_node_is_green():
    healthy = ports(HEALTHY)
    assert presence_findings(ROCE400, healthy) == []
    assert port_findings(ROCE400, healthy) == []
    assert rate_findings(ROCE400, healthy) == []


def test_a_port_down_fails_on_that_port_only_with_its_cause():
    found = port_findings(ROCE400, ports(BROKEN))
    assert [f.what.split(":")[0] for f in found] == ["mlx5_5", "mlx5_11"]
    assert "DOWN/Polling" in found[1].what and "no link partner" in found[1].cause


def test_a_lower_rate_is_its_own_failure():
    nic = [RdmaNic("mlx5_1", None, True, "ethernet", 400)]  # a 100G CX-6 Dx said to be 400
    found = rate_findings(nic, ports(HEALTHY))
    assert len(found) == 1 and "rate 100 Gb/s, the spec says 400" in found[0].what
    assert "auto-negotiated down" in found[0].cause
    assert port_findings(nic, ports(HEALTHY)) == []  # the link itself is fine


def test_missing_device_and_wrong_link_layer():
    found = presence_findings([RdmaNic("mlx5_99", link_layer="ethernet"),
                               RdmaNic("mlx5_0", link_layer="infiniband")], ports(HEALTHY))
    assert "no such RDMA device" in found[0].what
    assert "link layer ethernet, the spec says infiniband" in found[1].what


def test_sysfs_ports_of_mlx5_and_rxe():
    text = ("mlx5_0|InfiniBand|4: ACTIVE|5: LinkUp|400 Gb/sec (4X NDR)\n"
            "rxe0|Ethernet|4: ACTIVE|5: LinkUp|2.5 Gb/sec (1X SDR)\n"
            "rxe1|Ethernet|1: DOWN|3: Disabled|2.5 Gb/sec (1X SDR)\n")
    found = ports_from_sysfs(text)
    assert found["mlx5_0"].rate_gbps == 400 and found["mlx5_0"].link_layer == "infiniband"
    assert found["rxe0"].state == "ACTIVE" and found["rxe0"].rate_gbps == 2.5
    rxe = [RdmaNic("rxe1", None, False, "ethernet", 2.5)]
    assert "DOWN/Disabled" in port_findings(rxe, found)[0].what


def test_ats_current_is_what_counts():
    nic = RdmaNic("mlx5_0", "0000:17:00.0", True)
    off = ats_findings(nic, parse_mlxconfig(CX5.read_text()))
    assert "the rdma role did not run" in off[0].cause
    pending = ats_findings(nic, parse_mlxconfig(PENDING))
    assert "not in effect" in pending[0].cause and "reboot" in pending[0].fix
    done = parse_mlxconfig(PENDING.replace("False(0)        True(1)", "True(1)         True(1)"))
    assert ats_findings(nic, done) == []
    assert "cannot read" in ats_findings(nic, None)[0].what


def test_ats_in_lspci():
    nic = RdmaNic("mlx5_0")
    assert ats_lspci_findings(nic, "\tCapabilities: [480] Address Translation Service (ATS)\n"
                                   "\t\tATSCap:\tInvalidate Queue Depth: 00\n"
                                   "\t\tATSCtl:\tEnable+, Smallest Translation Unit: 00\n") == []
    assert "Enable-" in ats_lspci_findings(nic, "\t\tATSCtl:\tEnable-, Smallest")[0].what


def test_peermem_must_be_loaded_where_it_is_the_path():
    peermem = gpudirect_path("doca-ofed", False, True)
    assert gpudirect_findings(peermem, ["nvidia", "nvidia_peermem"]) == []
    assert "not loaded" in gpudirect_findings(peermem, ["nvidia"])[0].what
    assert gpudirect_findings(gpudirect_path("inbox", True, True), ["nvidia"]) == []
    assert gpudirect_findings(gpudirect_path("inbox", False, True), [])[0].severity == "warn"


def test_acs_on_a_path_bridge_fails_naming_it():
    assert acs_findings(["0000:02:00.0"], {"0000:02:00.0": 0}) == []
    found = acs_findings(["0000:02:00.0", "0000:02:01.0"], {"0000:02:00.0": 0,
                                                           "0000:02:01.0": 0x1D})
    assert "0000:02:01.0 (ACSCtl 0x001d)" in found[0].what


def test_affinity_pix_is_green_sys_is_a_warning():
    nics = [RdmaNic(f"mlx5_{i}") for i in range(6)]
    assert affinity_findings(nics, parse_topo(PIX.read_text())) == []
    sys_topo = parse_topo(SYS.read_text())
    found = affinity_findings([RdmaNic(sys_topo.nic_devices.get(n, n))
                               for n in sys_topo.nics], sys_topo)
    assert found and all(f.severity == "warn" and "SYS to every GPU" in f.what for f in found)


def test_bandwidth_floor_per_rate_and_for_soft_roce():
    run = parse_ib_write_bw(SPARK.read_text())  # ~92.6 Gb/s on a PCIe-limited CX-7 rail
    assert bandwidth_findings(run, RdmaNic("rocep1s0f0", rate_gbps=100), False) == []
    slow = bandwidth_findings(run, RdmaNic("rocep1s0f0", rate_gbps=400), False)
    assert "below 360 Gb/s" in slow[0].what
    assert bandwidth_findings(run, RdmaNic("rxe0"), True) == []
