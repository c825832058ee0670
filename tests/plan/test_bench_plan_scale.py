"""bench.plan_scale keeps planning the whole deploy.py: a role that reads a fact the bench's
recorded hosts lack breaks the benchmark (it did once, when monitoring joined the deploy)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_plan_scale_plans_every_role_on_a_small_cluster():
    result = subprocess.run([sys.executable, "-m", "bench.plan_scale", "--child", "3"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    row = json.loads(result.stdout)
    assert row["workers"] == 3
    assert row["ops_per_worker"] >= 60, row


def test_the_head_has_the_log_disk_a_cluster_of_that_size_needs():
    """The benchmark plans the site such a cluster would have: the logs role refuses a head
    whose disk cannot hold every worker's journal (10,000 need 1,254 GiB); the recorded 100 GiB
    where it is enough, else the whole TiB the role accepts, said on one line."""
    from bench.plan_scale import TIB, head_log_disk, logs_line
    from gpuinfra.logs.journal import disk_problem

    recorded = 100 * 1024 ** 3
    assert head_log_disk(recorded, 10, "4G") == recorded
    assert head_log_disk(recorded, 1000, "4G") == TIB
    assert head_log_disk(recorded, 10_000, "4G") == 2 * TIB
    assert disk_problem(2 * TIB, "4G", 10_000) is None and disk_problem(TIB, "4G", 10_000)
    rows = [{"workers": n, "log_disk": head_log_disk(recorded, n, "4G"),
             "log_disk_recorded": recorded, "logs_max_use": "4G"} for n in (10, 10_000)]
    line = logs_line(rows)
    assert "\n" not in line and line.startswith("central logs on (logs_max_use 4G")
    assert "100 GiB for 10 (as recorded), 2 TiB for 10000" in line
