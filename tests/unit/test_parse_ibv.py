"""`ibv_devinfo` parser on real captures (tabs, or spaces where the capture was pasted)."""

from __future__ import annotations

import json

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.ibv import IbvDevInfo, parse_ibv_devinfo
from tests.conftest import REAL, real_files

FOLDER = "ibv_devinfo"
IGX = "igx-orin-connectx7-p3740-1-eth-1-ib-port.txt"
KAUST = "kaust-ibex-login-connectx6-hdr100-1port.txt"


def _text(name: str) -> str:
    return (REAL / FOLDER / name).read_text()


def _parse(name: str) -> IbvDevInfo:
    return parse_ibv_devinfo(_text(name))


@pytest.mark.parametrize("path", real_files(FOLDER), ids=lambda p: p.name)
def test_every_capture_parses(path):
    info = parse_ibv_devinfo(path.read_text())
    assert info.devices
    for dev in info.devices.values():
        assert dev.phys_port_cnt == len(dev.ports) == 1
        assert dev.ports[1].state == "PORT_ACTIVE" and dev.ports[1].state_code == 4
    json.dumps(info.to_json())


def test_tab_indented_capture_exact():
    assert _parse(KAUST).to_json() == {"mlx5_0": {
        "transport": "InfiniBand", "transport_code": 0, "fw_ver": "20.35.1012",
        "node_guid": "b859:9f03:0022:626e", "sys_image_guid": "b859:9f03:0022:626e",
        "vendor_id": "0x02c9", "vendor_part_id": 4123, "hw_ver": "0x0",
        "board_id": "MT_0000000222", "phys_port_cnt": 1,
        "ports": {"1": {
            "state": "PORT_ACTIVE", "state_code": 4, "max_mtu": 4096, "max_mtu_code": 5,
            "active_mtu": 4096, "active_mtu_code": 5, "sm_lid": 8, "port_lid": 762,
            "port_lmc": 0, "link_layer": "InfiniBand",
        }},
    }}


def test_space_indented_capture_with_ethernet_and_ib_ports():
    info = _parse(IGX)
    assert list(info.devices) == ["mlx5_0", "mlx5_1"]
    assert [d.ports[1].link_layer for d in info.devices.values()] == ["Ethernet", "InfiniBand"]
    second = info.devices["mlx5_1"]
    assert (second.vendor_part_id, second.board_id, second.fw_ver, second.node_guid) == (
        4129, "NVD0000000033", "28.38.1002", "48b0:2d03:00f4:07fc")
    assert second.sys_image_guid == "48b0:2d03:00f4:07fb"


VERBOSE = """\
hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t28.39.1002
\tnode_guid:\t\t\ta088:c203:00ad:eab8
\tsys_image_guid:\t\t\ta088:c203:00ad:eab8
\tvendor_id:\t\t\t0x02c9
\tvendor_part_id:\t\t\t4129
\thw_ver:\t\t\t\t0x0
\tboard_id:\t\t\tMT_0000000838
\tphys_port_cnt:\t\t\t1
\tmax_mr_size:\t\t\t0xffffffffffffffff
\tdevice_cap_flags:\t\t0x25e1361
\t\t\t\t\tBAD_PKEY_CNTR
\t\t\t\t\tBAD_QKEY_CNTR
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_DOWN (1)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t1024 (3)
\t\t\tsm_lid:\t\t\t0
\t\t\tport_lid:\t\t0
\t\t\tport_lmc:\t\t0x00
\t\t\tlink_layer:\t\tEthernet
\t\t\tmax_msg_sz:\t\t0x40000000
\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:a288:c2ff:fead:eab8, RoCE v1
"""


def test_verbose_extras_are_kept_as_strings():
    dev = parse_ibv_devinfo(VERBOSE).devices["mlx5_0"]
    assert dev.extra["max_mr_size"] == "0xffffffffffffffff"
    assert dev.extra["device_cap_flags"] == "0x25e1361 BAD_PKEY_CNTR BAD_QKEY_CNTR"
    port = dev.ports[1]
    assert (port.state, port.state_code, port.active_mtu, port.active_mtu_code) == (
        "PORT_DOWN", 1, 1024, 3)
    assert port.extra["GID[  0]"] == "fe80:0000:0000:0000:a288:c2ff:fead:eab8, RoCE v1"


def test_no_devices():
    assert parse_ibv_devinfo("No IB devices found\n").to_json() == {}


def _cut(name: str, before: str) -> str:
    text = _text(name)
    return text[:text.index(before)]


@pytest.mark.parametrize("text, message", [
    ("", "no 'hca_id:'"),
    ("hello world\n", "expected 'key: value'"),
    ("\tport:\t1\n", "expected 'hca_id"),
    (_cut(KAUST, "\t\tport:"), "no 'port:' block"),
    (_cut(KAUST, "\t\t\tlink_layer"), "lacks state or link_layer"),
    (_text(KAUST) + _text(KAUST), "listed twice"),
    (_text(KAUST).replace("PORT_ACTIVE (4)", "PORT_ACTIVE"), "expected 'NAME \\(code\\)'"),
    (_text(KAUST).replace("4123", "CX6"), "expected a number"),
    (_text(KAUST).replace("port:\t1", "port:\tone"), "expected a number"),
    (_text(KAUST).replace("4096 (5)", "big (5)", 1), "expected a number"),
])
def test_bad_input_raises_parse_error(text, message):
    with pytest.raises(ParseError, match=message) as err:
        parse_ibv_devinfo(text)
    assert err.value.source == "ibv_devinfo"


def test_error_names_the_line():
    with pytest.raises(ParseError) as err:
        parse_ibv_devinfo(_text(KAUST).replace("4123", "CX6"))
    assert err.value.line == 7
