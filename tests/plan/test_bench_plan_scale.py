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
