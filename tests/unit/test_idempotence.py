"""The idempotence gate reads pyinfra's --json results: changed operations fail it."""

from __future__ import annotations

from gpuinfra_cli.idempotence import changed_operations


def test_no_change_passes():
    results = {"operations": [{"name": "common | Run chrony", "success": [],
                               "no_change": ["a", "b"]}], "totals": {"success": 0}}
    assert changed_operations(results) == []


def test_changed_operation_is_named_with_its_hosts():
    results = {"operations": [
        {"name": "common | Set net.core.somaxconn", "success": ["lab-worker2"]},
        {"name": "common | Run chrony", "success": []},
    ], "totals": {"success": 1}}
    assert changed_operations(results) == [("common | Set net.core.somaxconn", ["lab-worker2"])]
