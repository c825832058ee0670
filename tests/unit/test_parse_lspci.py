"""`lspci` parser (plain, -nn, -k/-nnk, with and without PCI domains) on real captures."""

from __future__ import annotations

import json

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.lspci import (
    PciDevices,
    mellanox_nics,
    nvidia_gpus,
    nvswitches,
    parse_lspci,
)
from tests.conftest import REAL, real_files

FOLDER = "lspci"
H100 = "4x-h100-sxm5-80gb-lspci-nn-grep-nvidia.txt"
AZURE = "azure-nd96amsr-a100-v4-8x-a100-sxm4-80gb-nvswitch-cx6-vf-lspci-nn.txt"
DGX_V100 = "dgx-8x-v100-sxm2-10de-1db1-lspci-nnk-vfio-pci.txt"
GB200 = "gb200-compute-tray-lspci-plain-cx7-bf3.txt"
KVM_A10 = "kvm-vm-1x-a10-mlx5gen-vf-lspci-nn.txt"
L40S_NN = "openshift-node-2x-l40s-lspci-nn-grep-nvidia.txt"
L40S_K = "openshift-node-l40s-e1-00.0-lspci-k-nvidia.txt"
# Beyond the shared set: tests/fixtures/lspci/INDEX.md
MORE = REAL.parent / "lspci"
KATA_A10 = "nvidia-gpu-operator-kata-docs-1x-a10-lspci-nnk-vfio-pci.txt"
SANDBOX_P40 = "nvidia-sandbox-device-plugin-1x-tesla-p40-lspci-nnk-vfio-pci.txt"

# file -> (devices, NVIDIA GPUs, Mellanox NIC functions, NVSwitches)
COUNTS = {
    H100: (4, 4, 0, 0), AZURE: (31, 8, 9, 6), DGX_V100: (8, 8, 0, 0), GB200: (87, 4, 8, 0),
    KVM_A10: (20, 1, 1, 0), L40S_NN: (2, 2, 0, 0), L40S_K: (1, 1, 0, 0),
}


def _parse(name: str) -> PciDevices:
    path = REAL / FOLDER / name
    return parse_lspci((path if path.is_file() else MORE / name).read_text())


@pytest.mark.parametrize("path", real_files(FOLDER), ids=lambda p: p.name)
def test_every_capture_parses(path):
    devs = parse_lspci(path.read_text())
    assert (len(devs.devices), len(nvidia_gpus(devs)), len(mellanox_nics(devs)),
            len(nvswitches(devs))) == COUNTS[path.name]
    assert all(d.address.count(":") == 2 and len(d.address) >= 12 for d in devs.devices)
    json.dumps(devs.to_json())


def test_nn_without_domain():
    devs = _parse(H100)
    assert devs.to_json()["devices"][0] == {
        "address": "0000:06:00.0", "slot": "06:00.0", "class_name": "3D controller",
        "class_code": "0302", "description": "NVIDIA Corporation GH100 [H100 SXM5 80GB]",
        "vendor_name": "NVIDIA Corporation", "vendor_id": "10de", "device_id": "2330",
        "revision": "a1", "subsystem": None, "subsystem_vendor_id": None,
        "subsystem_device_id": None, "driver": None, "modules": [],
    }
    assert [d.slot for d in devs.devices] == ["06:00.0", "0c:00.0", "46:00.0", "4c:00.0"]


def test_azure_vm_domains_nvswitches_and_vfs():
    devs = _parse(AZURE)
    assert {d.device_id for d in nvidia_gpus(devs)} == {"20b2"}
    assert [d.address for d in nvswitches(devs)] == [f"000{n}:00:00.0" for n in "56789a"]
    nics = mellanox_nics(devs)
    assert [d.device_id for d in nics] == ["101c"] * 8 + ["1016"]
    assert nics[0].address == "0101:00:00.0" and nics[0].class_name == "Infiniband controller"
    assert nics[-1].class_code == "0200" and nics[-1].revision == "80"
    last = devs.devices[-1]  # no trailing newline in the capture
    assert (last.address, last.vendor_id, last.device_id, last.revision) == (
        "f392:00:00.0", "1414", "b111", None)


def test_nnk_driver_and_modules():
    devs = _parse(DGX_V100)
    first = devs.devices[0]
    assert (first.address, first.device_id, first.description) == (
        "0000:08:00.0", "1db1", "NVIDIA Corporation Device")
    assert first.subsystem == "NVIDIA Corporation Device [10de:1212]"
    assert (first.subsystem_vendor_id, first.subsystem_device_id) == ("10de", "1212")
    assert {d.driver for d in devs.devices} == {"vfio-pci"}
    assert devs.devices[7].modules == ["nvidiafb", "nouveau", "nvidia_drm", "nvidia_vgpu_vfio",
                                       "nvidia"]


# Every `Subsystem:` line of the real -nn captures, read by hand: capture -> {address: (name as
# printed, subsystem vendor ID, subsystem device ID)}. The IDs end the line; a subsystem name
# may hold brackets of its own ("GA102GL [A10] [10de:1482]").
SUBSYSTEMS = {
    DGX_V100: {f"0000:{bus}:00.0": ("NVIDIA Corporation Device [10de:1212]", "10de", "1212")
               for bus in ("08", "0a", "18", "1a", "89", "8b", "92", "94")},
    KATA_A10: {"0000:65:00.0": ("NVIDIA Corporation GA102GL [A10] [10de:1482]", "10de", "1482")},
    SANDBOX_P40: {"0000:04:00.0": ("NVIDIA Corporation Device [10de:11d9]", "10de", "11d9")},
}


@pytest.mark.parametrize("name", sorted(SUBSYSTEMS))
def test_nn_subsystem_ids_are_read_from_the_end_of_the_line(name):
    devs = _parse(name)
    assert {d.address: (d.subsystem, d.subsystem_vendor_id, d.subsystem_device_id)
            for d in devs.devices} == SUBSYSTEMS[name]
    assert {d.driver for d in devs.devices} == {"vfio-pci"}


def test_subsystem_without_ids_has_none():
    """Without -nn the line names the subsystem only: no IDs are invented from its words."""
    (dev,) = _parse(L40S_K).devices
    assert (dev.subsystem_vendor_id, dev.subsystem_device_id) == (None, None)


def test_plain_lspci_with_domains():
    devs = _parse(GB200)
    gpus = nvidia_gpus(devs)
    assert [d.address for d in gpus] == ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0",
                                         "0019:01:00.0"]
    assert {(d.device_id, d.vendor_id, d.class_code, d.revision) for d in gpus} == {
        ("2941", None, None, "a1")}
    # Grace root ports are NVIDIA "PCI bridge"s (0604), not NVSwitches (0680 "Bridge").
    assert nvswitches(devs) == []
    nics = mellanox_nics(devs)
    assert [d.class_name for d in nics].count("Infiniband controller") == 4
    assert [d.address for d in nics if d.class_name == "Ethernet controller"] == [
        "0006:03:00.0", "0006:03:00.1", "0016:03:00.0", "0016:03:00.1"]
    aspeed = next(d for d in devs.devices if d.address == "0005:07:00.0")
    assert (aspeed.class_name, aspeed.vendor_name) == ("VGA compatible controller",
                                                       "ASPEED Technology, Inc.")


def test_kvm_vm_virtio_vga_is_not_an_nvidia_gpu():
    devs = _parse(KVM_A10)
    assert [(d.address, d.device_id) for d in nvidia_gpus(devs)] == [("0000:06:00.0", "2236")]
    assert [(d.address, d.device_id) for d in mellanox_nics(devs)] == [("0000:05:00.0", "101e")]
    virtio_gpu = devs.devices[1]
    assert (virtio_gpu.class_code, virtio_gpu.vendor_id) == ("0300", "1af4")


def test_k_without_ids():
    (dev,) = _parse(L40S_K).devices
    assert (dev.address, dev.slot, dev.class_code, dev.vendor_id, dev.device_id) == (
        "0000:e1:00.0", "e1:00.0", None, None, None)
    assert dev.description == "NVIDIA Corporation AD102GL [L40S]"
    assert (dev.subsystem, dev.driver, dev.modules) == (
        "NVIDIA Corporation Device 1851", "nvidia", ["nouveau"])


def test_verbose_detail_lines_are_skipped():
    text = ("0000:17:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family "
            "[ConnectX-7] [15b3:1021]\n"
            "\tSubsystem: Mellanox Technologies Device [15b3:0041]\n"
            "\tFlags: bus master, fast devsel, latency 0, IRQ 18, NUMA node 0\n"
            "\tCapabilities: [48] Vital Product Data\n"
            "\t\tProduct Name: ConnectX-7\n"
            "\tKernel driver in use: mlx5_core\n"
            "\n")
    (dev,) = parse_lspci(text).devices
    assert (dev.device_id, dev.driver, dev.subsystem_device_id) == ("1021", "mlx5_core", "0041")


@pytest.mark.parametrize("text, message", [
    ("", "no device lines"),
    ("hello world\n", "expected a device line"),
    ("\tKernel driver in use: nvidia\n", "before any device"),
    ("06:00.0 3D contr", "expected a device line"),
    ("06:00.0 3D controller: NVIDIA\n0000:06:00.0 3D controller: NVIDIA\n", "listed twice"),
    ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n", "expected a device line"),
])
def test_bad_input_raises_parse_error(text, message):
    with pytest.raises(ParseError, match=message) as err:
        parse_lspci(text)
    assert err.value.source == "lspci"


def test_error_names_the_line():
    with pytest.raises(ParseError) as err:
        parse_lspci("06:00.0 3D controller: NVIDIA Corporation Device 2330\n\nbroken\n")
    assert err.value.line == 3
