"""`ibstat` parser on real captures (tabs or spaces, no trailing newline, ports down)."""

from __future__ import annotations

import json

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.ibstat import IbStat, parse_ibstat
from tests.conftest import REAL, real_files

FOLDER = "ibstat"
A100_VM = "a100-vm-8x-mt4126-vf-hdr-ib-plus-1-eth-vf.txt"
H100_ROCE = "h100-node-8x-cx7-400g-roce-plus-4x-cx6dx-100g-all-active.txt"
H100_IB_SPACES = "h100-node-8x-cx7-ndr-ib-plus-bluefield3-bond-spaces.txt"
H100_DOWN = "h100-node-8x-cx7-roce-1-port-polling-1-port-disabled.txt"
KAUST = "kaust-ibex-login-connectx6-hdr100-rate100.txt"

CA_COUNTS = {A100_VM: 9, H100_ROCE: 12, H100_IB_SPACES: 9, H100_DOWN: 12, KAUST: 1}


def _text(name: str) -> str:
    return (REAL / FOLDER / name).read_text()


def _parse(name: str) -> IbStat:
    return parse_ibstat(_text(name))


@pytest.mark.parametrize("path", real_files(FOLDER), ids=lambda p: p.name)
def test_every_capture_parses(path):
    stat = parse_ibstat(path.read_text())
    assert len(stat.cas) == CA_COUNTS[path.name]
    for ca in stat.cas.values():
        assert ca.number_of_ports == len(ca.ports) == 1
        assert ca.firmware and ca.ca_type.startswith("MT")
        assert ca.ports[1].link_layer in ("InfiniBand", "Ethernet")
    json.dumps(stat.to_json())


def test_single_ca_exact():
    assert _parse(KAUST).to_json() == {"mlx5_0": {
        "ca_type": "MT4123", "number_of_ports": 1, "firmware": "20.35.1012",
        "hardware_version": "0", "node_guid": "0xb8599f030022626e",
        "system_image_guid": "0xb8599f030022626e",
        "ports": {"1": {
            "state": "Active", "physical_state": "LinkUp", "rate": 100, "base_lid": 762,
            "lmc": 0, "sm_lid": 8, "capability_mask": "0xa651e848",
            "port_guid": "0xb8599f030022626e", "link_layer": "InfiniBand",
        }},
    }}


def test_polling_and_disabled_ports():
    stat = _parse(H100_DOWN)
    down = {name: (ca.ports[1].state, ca.ports[1].physical_state, ca.ports[1].rate)
            for name, ca in stat.cas.items() if ca.ports[1].state != "Active"}
    assert down == {"mlx5_11": ("Down", "Polling", 40), "mlx5_5": ("Down", "Disabled", 40)}
    assert stat.cas["mlx5_5"].ports[1].port_guid == "0x0000000000000000"
    last = stat.cas["mlx5_9"]  # the capture ends without a newline
    assert (last.ports[1].link_layer, last.ports[1].rate) == ("Ethernet", 400)


def test_roce_node_rates_by_adapter_type():
    stat = _parse(H100_ROCE)
    by_type = {(ca.ca_type, ca.firmware, ca.ports[1].rate) for ca in stat.cas.values()}
    assert by_type == {("MT4129", "28.39.1002", 400), ("MT4125", "22.39.1002", 100)}
    assert sum(ca.ca_type == "MT4129" for ca in stat.cas.values()) == 8
    assert {ca.ports[1].link_layer for ca in stat.cas.values()} == {"Ethernet"}


def test_space_indented_capture_with_bluefield_bond():
    stat = _parse(H100_IB_SPACES)
    bond = stat.cas["mlx5_bond_0"]
    assert (bond.ca_type, bond.firmware, bond.hardware_version) == ("MT41692", "32.38.3056", "1")
    assert (bond.ports[1].rate, bond.ports[1].link_layer) == (200, "Ethernet")
    ib = stat.cas["mlx5_0"].ports[1]
    assert (ib.rate, ib.base_lid, ib.sm_lid, ib.link_layer) == (400, 128, 1, "InfiniBand")


def test_vm_with_ethernet_and_infiniband_vfs():
    stat = _parse(A100_VM)
    eth = [n for n, ca in stat.cas.items() if ca.ports[1].link_layer == "Ethernet"]
    assert eth == ["mlx5_0"] and stat.cas["mlx5_0"].firmware == "22.35.2302"
    ib = [ca for ca in stat.cas.values() if ca.ports[1].link_layer == "InfiniBand"]
    assert len(ib) == 8
    assert {(ca.firmware, ca.ports[1].rate) for ca in ib} == {("28.37.1014", 200)}
    assert stat.cas["mlx5_1"].ports[1].base_lid == 1369


TWO_PORTS = """\
CA 'mlx4_0'
\tCA type: MT4099
\tNumber of ports: 2
\tFirmware version: 2.42.5000
\tHardware version: 1
\tNode GUID: 0x0002c90300a1b2c0
\tSystem image GUID: 0x0002c90300a1b2c3
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 56
\t\tBase lid: 3
\t\tLMC: 0
\t\tSM lid: 1
\t\tCapability mask: 0x02514868
\t\tPort GUID: 0x0002c90300a1b2c1
\t\tLink layer: InfiniBand
\tPort 2:
\t\tState: Down
\t\tPhysical state: Polling
\t\tRate: 2.5
\t\tBase lid: 0
\t\tLMC: 0
\t\tSM lid: 0
\t\tCapability mask: 0x02514868
\t\tPort GUID: 0x0002c90300a1b2c2
\t\tLink layer: InfiniBand
"""


def test_two_ports_and_fractional_rate():
    ca = parse_ibstat(TWO_PORTS).cas["mlx4_0"]
    assert sorted(ca.ports) == [1, 2]
    assert ca.ports[2].rate == 2.5 and ca.ports[1].rate == 56
    assert list(ca.to_json()["ports"]) == ["1", "2"]


def _truncations() -> list[str]:
    lines = _text(KAUST).splitlines()
    return ["\n".join(lines[:n]) for n in range(1, len(lines))]


@pytest.mark.parametrize("text", _truncations())
def test_truncated_output_is_rejected(text):
    with pytest.raises(ParseError, match="truncated"):
        parse_ibstat(text)


@pytest.mark.parametrize("text, message", [
    ("", "no \"CA"),
    ("hello world\n", "expected \"CA"),
    ("\tCA type: MT4123\n", "expected \"CA"),
    (TWO_PORTS.split("\tPort 2:")[0], "2 ports announced, 1 listed"),
    (TWO_PORTS + TWO_PORTS, "listed twice"),
    (TWO_PORTS.replace("Port 2:", "Port 1:"), "port 1 listed twice"),
    (TWO_PORTS.replace("Rate: 56", "Rate: fast"), "rate is not a number"),
    (TWO_PORTS.replace("Base lid: 3", "Base lid: three"), "base_lid is not a number"),
    (TWO_PORTS.replace("\tLMC: 0", "\tLMC 0", 1), "expected 'Key: value'"),
])
def test_bad_input_raises_parse_error(text, message):
    with pytest.raises(ParseError, match=message) as err:
        parse_ibstat(text)
    assert err.value.source == "ibstat"


def test_error_names_the_line():
    with pytest.raises(ParseError) as err:
        parse_ibstat(TWO_PORTS.replace("Rate: 56", "Rate: fast"))
    assert err.value.line == 11
