"""`mlxconfig`/`mstconfig` query parser on real captures (full, shortened, grep-filtered)."""

from __future__ import annotations

from gpuinfra.parsers.mlxconfig import MlxConfig, parse_mlxconfig
from tests.conftest import REAL

FOLDER = "mlxconfig"
CX5_FULL = "connectx5-mcx555a-edr-ib-mlxconfig-q-full-bluebanquise.txt"
CX7_SHORT = "connectx7-mcx715105as-weat-mlxconfig-q-abbreviated-by-author.txt"
CX7_EGREP = "connectx7-mcx715105as-weat-mlxconfig-q-egrep-sriov-8vfs-eth.txt"
CX7_DESCRIPTION = (
    "NVIDIA ConnectX-7 HHHL Adapter Card; 400GbE (default mode) / NDR IB; Single-port QSFP112; "
    "Port Split Capable; PCIe 5.0 x16 with x16 PCIe extension option; Crypto Disabled; "
    "Secure Boot Enabled")


def _parse(name: str) -> MlxConfig:
    return parse_mlxconfig((REAL / FOLDER / name).read_text())

