"""The RDMA library (gpuinfra.rdma.node): ATS decisions from real firmware queries, the GPU-NIC
bridges from the PCI tree (parsed by gpuinfra.parsers.pcitree), the GPUDirect path, NCCL's
settings, the boot scripts."""

from __future__ import annotations

import subprocess

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.mlxconfig import parse_mlxconfig
from gpuinfra.parsers.pcitree import parse_acs_control, parse_nic_addresses, parse_pci_paths
from gpuinfra.rdma.node import (
    acs_bridges,
    acs_script,
    ancestors_of,
    ats_plan,
    ats_set_command,
    gpudirect_path,
    nccl_env,
    nearest_pairs,
    rxe_script,
    rxe_unit,
)
from gpuinfra.spec.model import RdmaNic
from gpuinfra_deploy.templates import text as file_text
from tests.conftest import REPO

CX5 = (REPO / "tests/fixtures/real/mlxconfig"
       / "connectx5-mcx555a-edr-ib-mlxconfig-q-full-bluebanquise.txt")

# `mstconfig -e q ATS_ENABLED` shape (Default / Current / Next Boot), made here: no public
# capture of -e output with ATS_ENABLED was found. Current False, Next Boot True: set, not
# yet rebooted.
PENDING = """Device #1:
----------

Device type:    ConnectX7
Device:         0000:17:00.0

Configurations:                              Default         Current         Next Boot
*       ATS_ENABLED                          False(0)        False(0)        True(1)
"""


def test_real_connectx5_query_with_ats_off_is_set():
    plan = ats_plan("mlx5_0", True, parse_mlxconfig(CX5.read_text()))
    assert plan.action == "set" and plan.next_boot is False and plan.current is None
    assert "Next-Boot False" in plan.why and "next reboot" in plan.why


def test_ats_off_wanted_off_is_left_alone():
    plan = ats_plan("mlx5_0", False, parse_mlxconfig(CX5.read_text()))
    assert plan.action == "none"


def test_next_boot_set_but_current_not_is_a_pending_reboot_not_a_second_set():
    plan = ats_plan("mlx5_0", True, parse_mlxconfig(PENDING))
    assert plan.action == "reboot" and plan.current is False and plan.next_boot is True
    assert "waiting for a reboot" in plan.why


def test_firmware_without_ats_enabled_is_an_error_naming_the_fix():
    text = PENDING.replace("ATS_ENABLED", "SRIOV_EN")
    with pytest.raises(GpuinfraError, match="set ats=False"):
        ats_plan("mlx5_0", True, parse_mlxconfig(text))


def test_set_command_is_mstconfig_by_address():
    assert ats_set_command("0000:17:00.0", True) == \
        ["mstconfig", "-y", "-d", "0000:17:00.0", "set", "ATS_ENABLED=1"]


# A switch under root port 00:01.0 holding GPU 03:00.0 and NIC 04:00.0; a second GPU on its
# own root port; a passed-through device behind 00:03.0.
PATHS = """0000:00:01.0 /sys/devices/pci0000:00/0000:00:01.0
0000:01:00.0 /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0
0000:02:00.0 /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0
0000:02:01.0 /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0
0000:03:00.0 /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0
0000:04:00.0 /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0
0000:00:02.0 /sys/devices/pci0000:00/0000:00:02.0
0000:05:00.0 /sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0
"""


def test_pci_paths_give_each_function_its_bridges():
    paths = parse_pci_paths(PATHS)
    assert paths["0000:03:00.0"] == ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0")
    assert paths["0000:00:01.0"] == ()


def test_acs_goes_off_only_on_the_switch_ports_between_a_gpu_and_its_nic():
    paths = parse_pci_paths(PATHS)
    pairs = nearest_pairs(["0000:03:00.0", "0000:05:00.0"], ["0000:04:00.0"], paths)
    assert [(p.gpu, p.nic) for p in pairs] == [("0000:03:00.0", "0000:04:00.0")]
    assert acs_bridges(pairs) == ["0000:02:00.0", "0000:02:01.0"]  # not the root port


def test_acs_stays_on_bridges_vfio_needs():
    paths = parse_pci_paths(PATHS)
    pairs = nearest_pairs(["0000:03:00.0"], ["0000:04:00.0"], paths)
    protected = ancestors_of(["0000:03:00.0"], paths)  # a hypervisor passes the GPU through
    assert acs_bridges(pairs, protected) == ["0000:02:01.0"]


def test_acs_control_values_and_bridges_without_acs():
    found = parse_acs_control("0000:02:00.0 001d\n0000:01:00.0 -\n")
    assert found == {"0000:02:00.0": 0x1D, "0000:01:00.0": None}


def test_nic_addresses_from_sysfs():
    assert parse_nic_addresses("mlx5_0 0000:17:00.0\nrxe0 -\n") == \
        {"mlx5_0": "0000:17:00.0", "rxe0": None}


def test_acs_script_reads_each_write_back_and_passes_sh(tmp_path):
    script = file_text(acs_script(["0000:02:00.0"]))
    assert "setpci -s 0000:02:00.0 ECAP_ACS+0x6.w=0000" in script
    assert "ACS still on" in script
    path = tmp_path / "acs"
    path.write_text(script)
    assert subprocess.run(["sh", "-n", str(path)]).returncode == 0
    with pytest.raises(GpuinfraError):
        acs_script(["0000:02:00.0; reboot"])


def test_rxe_script_makes_each_device_once():
    nics = [RdmaNic("rxe0", None, False, "ethernet", 2.5, "soft-roce", 1, "enp0s3")]
    script = file_text(rxe_script(nics))
    assert "rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev " \
        "enp0s3" in script
    assert "sys-subsystem-net-devices-enp0s3.device" in file_text(rxe_unit(nics))


@pytest.mark.parametrize("stack, open_modules, peermem, path", [
    ("doca-ofed", False, True, "peermem"),
    ("doca-ofed", True, True, "peermem"),
    ("doca-ofed", True, False, "dma-buf"),
    ("inbox", True, True, "dma-buf"),
    ("inbox", False, True, "none"),
])
def test_gpudirect_path_per_stack_and_modules(stack, open_modules, peermem, path):
    chosen = gpudirect_path(stack, open_modules, peermem)
    assert chosen.path == path and chosen.reason


def test_nccl_env_from_the_spec():
    ib = [RdmaNic("mlx5_0"), RdmaNic("mlx5_1")]
    assert nccl_env(ib) == {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"}
    roce = [RdmaNic("mlx5_0", link_layer="ethernet", gid_index=3)]
    assert nccl_env(roce) == {"NCCL_IB_HCA": "=mlx5_0", "NCCL_IB_GID_INDEX": "3"}
    assert nccl_env([]) == {}
