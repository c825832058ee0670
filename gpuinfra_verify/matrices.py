"""What test_gpu, test_rdma and test_sharing record for `gpuinfra report`: small JSON properties.

The report draws its matrices and groups its causes from these (gpuinfra_verify/report.py);
docs/report.md lists them. Each is one compact JSON document per test (a matrix of short
codes; each distinct cause and fix once, the failed findings pointing at it), so an 8-GPU node
adds a few kilobytes to the junit XML, not one cause text per pair. Pure: no host, no pytest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuinfra.parsers.p2p import P2PMatrix
from gpuinfra.parsers.topo import TopoMatrix
from gpuinfra.verdicts import Finding

# Property names (the report reads the same names).
NVLINK_SEEN = "nvlink_matrix_seen"
NVLINK_EXPECTED = "nvlink_matrix_expected"
P2P = "p2p_matrix"
FAILED = "failed_findings"
RDMA_PORTS = "rdma_ports"
MIG_LAYOUT = "mig_layout"


def dump(value: Any) -> str:
    """Compact JSON (no spaces) for a junit property."""
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


def nvlink_seen(topo: TopoMatrix) -> dict[str, Any]:
    """``topo -m`` among the GPUs: {"gpus": [GPU0, ...], "cells": rows of codes ("X" self)}."""
    gpus = list(topo.gpus)
    return {"gpus": gpus,
            "cells": [["X" if a == b else (topo.link(a, b) or "") for b in gpus] for a in gpus]}


def nvlink_expected(findings: Iterable[Finding], gpus: Sequence[str]) -> dict[str, Any]:
    """What each pair must show (``NV>=12``) from the nvlink-topology findings; ``null`` where
    the profile asks nothing of a pair (a bridged pair's GPUs and the others' e.g.)."""
    index = {name: i for i, name in enumerate(gpus)}
    cells: list[list[str | None]] = [[None] * len(gpus) for _ in gpus]
    for i in range(len(gpus)):
        cells[i][i] = "X"
    for finding in findings:
        if finding.check != "nvlink-topology":
            continue
        pair = finding.subject.split("-")
        if len(pair) == 2 and all(p in index for p in pair):
            a, b = index[pair[0]], index[pair[1]]
            cells[a][b] = cells[b][a] = finding.expected
    return {"gpus": list(gpus), "cells": cells}


def p2p_matrix(matrices: Sequence[P2PMatrix]) -> dict[str, Any]:
    """Every ``topo -p2p`` matrix read: {"gpus": [...], "r": rows of codes, "w": ...}."""
    if not matrices:
        return {"gpus": []}
    gpus = list(matrices[0].gpus)
    out: dict[str, Any] = {"gpus": gpus}
    for matrix in matrices:
        out[matrix.mode or "?"] = [["X" if a == b else (matrix.code(a, b) or "") for b in gpus]
                                   for a in gpus]
    return out


def failed_findings(findings: Iterable[Finding]) -> dict[str, Any]:
    """The failed findings: {"causes": [[cause, fix], ...], "failed": [[check, subject,
    expected, observed, cause index], ...]}: each cause text once."""
    causes: list[list[str]] = []
    failed = []
    for finding in findings:
        if not finding.failed:
            continue
        key = [finding.cause, finding.fix]
        if key not in causes:
            causes.append(key)
        failed.append([finding.check, finding.subject, finding.expected, finding.observed,
                       causes.index(key)])
    return {"causes": causes, "failed": failed}


def expand_failed(value: Mapping[str, Any]) -> list[dict[str, str]]:
    """:func:`failed_findings` back into finding dicts (check, subject, expected, observed,
    severity, cause, fix)."""
    causes = value.get("causes") or []
    out = []
    for row in value.get("failed") or []:
        check, subject, expected, observed, i = (list(row) + [""] * 5)[:5]
        cause, fix = (causes[i] if isinstance(i, int) and 0 <= i < len(causes) else ["", ""])
        out.append({"check": str(check), "subject": str(subject), "expected": str(expected),
                    "observed": str(observed), "severity": "fail", "cause": str(cause),
                    "fix": str(fix)})
    return out


def rdma_ports(nics: Sequence[Any], ports: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each spec NIC's port 1 as seen (``state`` "absent" when the host has no such device):
    nic, link_layer, spec_rate_gbps, state, physical_state, rate_gbps."""
    out = []
    for nic in nics:
        port = ports.get(nic.name)
        row: dict[str, Any] = {"nic": nic.name, "link_layer": nic.link_layer,
                               "spec_rate_gbps": nic.rate_gbps}
        if port is None:
            row["state"] = "absent"
        else:
            row.update(state=port.state, physical_state=port.physical_state,
                       rate_gbps=port.rate_gbps)
        out.append(row)
    return out


def mig_layout(layout: Sequence[Mapping[str, int]], states: Sequence[Any]) -> dict[str, Any]:
    """The MIG layout asked (one {profile: count} per GPU) and seen: each GPU's MIG mode
    (current, pending) and its MIG devices' profiles (`nvidia-smi -L`)."""
    return {"expected": [dict(gpu) for gpu in layout],
            "seen": [{"gpu": s.index, "mode": s.mig_current, "pending": s.mig_pending,
                      "devices": list(s.mig_devices)} for s in states]}
