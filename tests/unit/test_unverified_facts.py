"""The facts the knowledge audit (../shared/docs/reviews/knowledge-audit-9735030.md, rows 3, 6,
28, 29, 45, 62, 63, 92) could not verify stay marked where they live, so that nobody reads them
as checked; the marker names the row. Remove a marker only with the source that resolves it."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARKED = {
    3: "gpuinfra/knowledge/gpus.py",  # MIG start slots of H200/GH200/H20/B200/GB200
    6: "gpuinfra/knowledge/gpus.py",  # A30 2g.12gb+me start slots
    28: "gpuinfra/knowledge/topology.py",  # H200 NVL bridge NV6/NV18
    29: "gpuinfra/knowledge/gpus.py",  # B200 per-link rate 53.125
    45: "roles/rdma/__init__.py",  # DOCA debian12 directory
    62: "gpuinfra/knowledge/packages.py",  # Ubuntu 550/570/580-server default versions
    63: "gpuinfra/knowledge/packages.py",  # Debian 12 later branches from the CUDA repository
    92: "roles/monitoring/defaults.py",  # DCGM / exporter .deb versions
}


@pytest.mark.parametrize("row, path", sorted(MARKED.items()))
def test_each_unverified_fact_is_marked_beside_its_value(row, path):
    assert f"UNVERIFIED (knowledge audit 9735030 row {row})" in (REPO / path).read_text()
