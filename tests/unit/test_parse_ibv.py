"""`ibv_devinfo` parser on real captures (tabs, or spaces where the capture was pasted)."""

from __future__ import annotations

from gpuinfra.parsers.ibv import IbvDevInfo, parse_ibv_devinfo
from tests.conftest import REAL

FOLDER = "ibv_devinfo"
IGX = "igx-orin-connectx7-p3740-1-eth-1-ib-port.txt"
KAUST = "kaust-ibex-login-connectx6-hdr100-1port.txt"


def _text(name: str) -> str:
    return (REAL / FOLDER / name).read_text()


def _parse(name: str) -> IbvDevInfo:
    return parse_ibv_devinfo(_text(name))

