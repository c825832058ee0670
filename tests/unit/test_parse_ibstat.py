"""`ibstat` parser on real captures (tabs or spaces, no trailing newline, ports down)."""

from __future__ import annotations

from gpuinfra.parsers.ibstat import IbStat, parse_ibstat
from tests.conftest import REAL

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

