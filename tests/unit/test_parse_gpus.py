"""GPU list parser (`nvidia-smi --query-gpu --format=csv`, `nvidia-smi -L`) on real captures."""

from __future__ import annotations

from gpuinfra.parsers.gpus import GpuList, parse_gpus
from tests.conftest import REAL

CSV = "nvidia-smi-query-gpu"
LIST = "nvidia-smi-L"


def _parse(folder: str, name: str) -> GpuList:
    return parse_gpus((REAL / folder / name).read_text())

