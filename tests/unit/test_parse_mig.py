"""MIG listing parser (`nvidia-smi mig -lgip/-lgi/-lcip/-lci/-lgipp`) on real captures."""

from __future__ import annotations

from gpuinfra.parsers.mig import MigListing, parse_mig
from tests.conftest import REAL

FOLDER = "nvidia-smi-mig-lgip"
H100_LGIP = "4x-h100-sxm5-80gb-mig-lgip-stackhpc.txt"
A30_LGIP = "a30-24gb-mig-lgip-all-slices-in-use.txt"
A30_LGI = "a30-24gb-mig-lgi-4x-1g.6gb.txt"
A30_LGIPP = "a30-24gb-mig-lgipp-placements.txt"
A100_LCIP = "a100-pcie-40gb-drv460-mig-lcip-7x-1g.5gb.txt"
A100_DISABLED = "a100-pcie-40gb-mig-lgip-mig-disabled.txt"

KINDS = {
    H100_LGIP: "gpu-instance-profiles", A30_LGIP: "gpu-instance-profiles",
    A30_LGI: "gpu-instances", A30_LGIPP: "placements", A100_LCIP: "compute-instance-profiles",
    A100_DISABLED: "none",
}


def _text(name: str) -> str:
    return (REAL / FOLDER / name).read_text()


def _parse(name: str) -> MigListing:
    return parse_mig(_text(name))

