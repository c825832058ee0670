"""`lspci` parser (plain, -nn, -k/-nnk, with and without PCI domains) on real captures."""

from __future__ import annotations

from gpuinfra.parsers.lspci import (
    PciDevices,
    parse_lspci,
)
from tests.conftest import REAL

FOLDER = "lspci"
H100 = "4x-h100-sxm5-80gb-lspci-nn-grep-nvidia.txt"
AZURE = "azure-nd96amsr-a100-v4-8x-a100-sxm4-80gb-nvswitch-cx6-vf-lspci-nn.txt"
DGX_V100 = "dgx-8x-v100-sxm2-10de-1db1-lspci-nnk-vfio-pci.txt"
GB200 = "gb200-compute-tray-lspci-plain-cx7-bf3.txt"
KVM_A10 = "kvm-vm-1x-a10-mlx5gen-vf-lspci-nn.txt"
L40S_NN = "openshift-node-2x-l40s-lspci-nn-grep-nvidia.txt"
L40S_K = "openshift-node-l40s-e1-00.0-lspci-k-nvidia.txt"

# file -> (devices, NVIDIA GPUs, Mellanox NIC functions, NVSwitches)
COUNTS = {
    H100: (4, 4, 0, 0), AZURE: (31, 8, 9, 6), DGX_V100: (8, 8, 0, 0), GB200: (87, 4, 8, 0),
    KVM_A10: (20, 1, 1, 0), L40S_NN: (2, 2, 0, 0), L40S_K: (1, 1, 0, 0),
}


def _parse(name: str) -> PciDevices:
    return parse_lspci((REAL / FOLDER / name).read_text())

