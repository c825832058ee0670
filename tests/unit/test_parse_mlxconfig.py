"""`mlxconfig`/`mstconfig` query parser on real captures (full, shortened, grep-filtered)."""

from __future__ import annotations

import json

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.mlxconfig import (
    MlxConfig,
    ats_enabled,
    parse_mlxconfig,
    parse_mlxconfig_devices,
    parse_value,
)
from tests.conftest import REAL, real_files

FOLDER = "mlxconfig"
CX5_FULL = "connectx5-mcx555a-edr-ib-mlxconfig-q-full-bluebanquise.txt"
CX7_SHORT = "connectx7-mcx715105as-weat-mlxconfig-q-abbreviated-by-author.txt"
CX7_EGREP = "connectx7-mcx715105as-weat-mlxconfig-q-egrep-sriov-8vfs-eth.txt"
CX8_LOOP = "8x-connectx8-p6612-ats-enabled-true-nvidia-bw-ultra-hgx-doc-TRUNCATED-8th.txt"
CX7_GREP_ATS = "connectx7-mt4129-q-grep-ats-enabled-false-nvidia-vm-inference-doc.txt"
CX7_DESCRIPTION = (
    "NVIDIA ConnectX-7 HHHL Adapter Card; 400GbE (default mode) / NDR IB; Single-port QSFP112; "
    "Port Split Capable; PCIe 5.0 x16 with x16 PCIe extension option; Crypto Disabled; "
    "Secure Boot Enabled")


def _parse(name: str) -> MlxConfig:
    return parse_mlxconfig((REAL / FOLDER / name).read_text())


@pytest.mark.parametrize("path", real_files(FOLDER), ids=lambda p: p.name)
def test_every_capture_parses(path):
    parsed = parse_mlxconfig_devices(path.read_text())
    assert parsed.devices
    for _, cfg, _ in parsed.devices:
        assert cfg.params and cfg.device_type in ("ConnectX5", "ConnectX7", "ConnectX8", None)
        assert all(p.raw == p.raw.strip() and p.raw for p in cfg.params.values())
    json.dumps(parsed.to_json())


def test_loop_over_eight_devices_read_one_by_one():
    """NVIDIA's HGX B300 guide: a loop printing ``----- <bdf> -----`` before each device's
    filtered query (padding collapsed); the copy stops at the 8th device's first line."""
    parsed = parse_mlxconfig_devices((REAL / FOLDER / CX8_LOOP).read_text())
    assert [label for label, _, _ in parsed.devices] == [
        "17:00.0", "39:00.0", "5f:00.0", "70:00.0", "97:00.0", "b9:00.0", "dc:00.0"]
    assert all((cfg.device_type, cfg.name, ats_enabled(cfg), cuts)
               == ("ConnectX8", "P6612_Ax", True, []) for _, cfg, cuts in parsed.devices)
    assert parsed.cuts == ["ed:00.0: the capture ends before its parameters: not judged"]


def test_one_device_capture_is_one_device():
    parsed = parse_mlxconfig_devices((REAL / FOLDER / CX5_FULL).read_text())
    [(label, cfg, cuts)] = parsed.devices
    assert (label, len(cfg.params), cuts, parsed.cuts) == ("/dev/mst/mt4119_pciconf0", 143, [], [])


def test_grep_of_the_ats_line_alone():
    parsed = parse_mlxconfig_devices((REAL / FOLDER / CX7_GREP_ATS).read_text())
    [(_, cfg, cuts)] = parsed.devices
    assert ats_enabled(cfg) is False and cfg.device_type is None
    assert cuts and "filtered" in cuts[0]


def test_a_broken_device_in_the_middle_of_a_loop_is_refused():
    text = (REAL / FOLDER / CX8_LOOP).read_text().replace("ATS_ENABLED True(1)\n----- 70",
                                                         "hello world\n----- 70", 1)
    with pytest.raises(ParseError, match="expected an indented") as err:
        parse_mlxconfig_devices(text)
    assert err.value.line == 13  # the capture's line, not the device's


def test_connectx5_full_query():
    cfg = _parse(CX5_FULL)
    assert (cfg.device, cfg.device_type, cfg.name, cfg.truncated) == (
        "/dev/mst/mt4119_pciconf0", "ConnectX5", "MCX555A-ECA_Ax_Bx", False)
    assert cfg.description.startswith("ConnectX-5 VPI adapter card; EDR IB (100Gb/s)")
    assert len(cfg.params) == 143
    assert ats_enabled(cfg) is False
    params = cfg.to_json()["params"]
    assert params["ATS_ENABLED"] == {"raw": "False(0)", "value": False, "label": "False",
                                     "next_boot": False, "current": None, "default": None,
                                     "modified": False}
    assert (params["LINK_TYPE_P1"]["value"], params["LINK_TYPE_P1"]["label"]) == (1, "IB")
    assert params["NUM_OF_VFS"]["value"] == 0 and params["SRIOV_EN"]["value"] is False
    assert params["DCR_LIFO_SIZE"]["value"] == 16384
    assert params["HOST_CHAINING_DESCRIPTORS"]["raw"] == "Array[0..7]"
    assert params["HOST_CHAINING_DESCRIPTORS"]["value"] is None
    assert params["EXP_ROM_UEFI_x86_ENABLE"]["value"] is True
    assert params["PCI_ATOMIC_MODE"]["label"] == "PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED"
    assert params["ADVANCED_PCI_SETTINGS"]["value"] is False
    assert list(params)[-1] == "SAFE_MODE_ENABLE"


def test_shortened_by_author():
    cfg = _parse(CX7_SHORT)
    assert cfg.truncated is True
    assert (cfg.device_type, cfg.name, cfg.description) == (
        "ConnectX7", "MCX715105AS-WEAT_Ax", CX7_DESCRIPTION)  # trailing padding stripped
    assert list(cfg.params) == ["MODULE_SPLIT_M0", "MEMIC_BAR_SIZE", "MEMIC_SIZE_LIMIT",
                                "ADVANCED_PCI_SETTINGS", "SAFE_MODE_THRESHOLD",
                                "SAFE_MODE_ENABLE"]
    assert cfg.params["MEMIC_SIZE_LIMIT"].raw == "_256KB(1)"
    assert cfg.params["SAFE_MODE_THRESHOLD"].value == 10
    assert ats_enabled(cfg) is None  # cut out by the author: unknown, not False


def test_egrep_filtered():
    cfg = _parse(CX7_EGREP)
    assert (cfg.device, cfg.name, cfg.truncated) == (None, "MCX715105AS-WEAT_Ax", False)
    assert {k: (p.raw, p.value, p.label) for k, p in cfg.params.items()} == {
        "NUM_OF_VFS": ("8", 8, None), "SRIOV_EN": ("True(1)", True, "True"),
        "LINK_TYPE_P1": ("ETH(2)", 2, "ETH"),
    }


QUERY_E = """\

Device #1:
----------

Device type:    ConnectX6
Name:           MCX653106A-HDA_Ax
Description:    ConnectX-6 VPI adapter card; HDR IB (200Gb/s) and 200GbE; dual-port QSFP56
Device:         0000:17:00.0

Configurations:                              Default         Current         Next Boot
*        ATS_ENABLED                         False(0)        False(0)        True(1)
         ADVANCED_PCI_SETTINGS               False(0)        False(0)        False(0)
         NUM_OF_VFS                          8               8               8
The '*' shows parameters with next value different from default/current value.
"""


def test_query_e_columns_and_modified_mark():
    cfg = parse_mlxconfig(QUERY_E)
    assert cfg.device == "0000:17:00.0"
    ats = cfg.params["ATS_ENABLED"]
    assert (ats.default, ats.current, ats.value, ats.modified) == (False, False, True, True)
    assert ats_enabled(cfg) is True and ats_enabled(cfg, "current") is False
    assert cfg.params["NUM_OF_VFS"].to_json()["current"] == 8
    assert cfg.params["ADVANCED_PCI_SETTINGS"].modified is False


def test_grep_for_one_parameter_without_header():
    cfg = parse_mlxconfig("        ATS_ENABLED                                 True(1)\n")
    assert ats_enabled(cfg) is True and cfg.device_type is None


@pytest.mark.parametrize("raw, expected", [
    ("True(1)", (True, "True")), ("False(0)", (False, "False")), ("IB(1)", (1, "IB")),
    ("8", (8, None)), ("0x10", (16, None)), ("_INVALID_", (None, None)),
    ("Array[0..7]", (None, None)), ("per_mkey(0)", (0, "per_mkey")), ("abc", ("abc", None)),
])
def test_parse_value(raw, expected):
    assert parse_value(raw) == expected


def _header_only() -> str:
    text = (REAL / FOLDER / CX5_FULL).read_text()
    return text[:text.index("Configurations:")]


@pytest.mark.parametrize("text, message", [
    ("", "no configuration parameters"),
    ("hello world\n", "expected an indented"),
    ("        hello world\n", "expected an indented"),
    (_header_only(), "no configuration parameters"),
    ("-E- Failed to open the device\n", "reported an error"),
    ("Device #1:\nConfigurations:   Next Boot\n        A_B   1\nDevice #2:\n", "several devices"),
    ("hello_world the second\n", "expected an indented"),
    ("Configurations:   Default   Current   Next Boot\n        ATS_ENABLED   False(0)\n",
     "1 values for 3"),
    ("Configurations:   Next Boot\n        A_B   1\n        A_B   2\n", "listed twice"),
    ("Configurations:   Next   Boot   Later\n", "unknown Configurations columns"),
    ("Configurations:   Next Boot\n        ATS_ENABLED\n", "expected an indented"),
    ("Configurations:   Next Boot\n        A_B   1\nName:  late\n", "after the parameters"),
])
def test_bad_input_raises_parse_error(text, message):
    with pytest.raises(ParseError, match=message) as err:
        parse_mlxconfig(text)
    assert err.value.source == "mlxconfig query"


def test_error_names_the_line():
    with pytest.raises(ParseError) as err:
        parse_mlxconfig("Configurations:   Next Boot\n        A_B   1\n        A_B   2\n")
    assert err.value.line == 3
