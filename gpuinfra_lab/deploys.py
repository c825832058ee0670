"""What a pyinfra run changed, read from its ``--json`` results (the idempotence check of
`make demo`, gpuinfra_cli/idempotence.py, and the lab proofs)."""

from __future__ import annotations

from typing import Any


def changed_operations(results: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(operation name, hosts it changed) for every operation that changed a host."""
    out = []
    for op in results.get("operations", []):
        hosts = op.get("success") or []
        if hosts:
            out.append((str(op.get("name") or op.get("names") or "?"), list(hosts)))
    return out
