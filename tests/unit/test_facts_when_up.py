"""when_up: a fact read just after a reboot (or a controller's takeover) waits, bounded, for a
daemon that is active but not answering yet, so the deploy after `gpuinfra lab reboot` plans no
change that is none (measured: one operation changed in the broken-nvlink scenario's
idempotence step, the lab's controllers just rebooted)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpuinfra_deploy.facts._base import when_up


def run(script: str, tmp_path: Path, active: bool) -> subprocess.CompletedProcess:
    """``script`` with a stand-in systemctl saying the service is (not) active."""
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    (stub / "systemctl").write_text(f"#!/bin/sh\nexit {0 if active else 3}\n")
    (stub / "systemctl").chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                          timeout=30)


def test_an_active_daemon_answering_late_is_waited_for(tmp_path: Path) -> None:
    count = tmp_path / "tries"
    # Fails twice, then answers: the fact sees the answer, not "not answering".
    command = (f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}; "
               '[ "$n" -ge 3 ] && echo NodeName=gpu01')
    out = run(when_up("slurmctld", command, wait_s=10), tmp_path, active=True)
    assert out.returncode == 0 and out.stdout == "NodeName=gpu01\n"
    assert count.read_text().strip() == "3"


def test_a_stopped_daemon_is_not_waited_for_and_the_wait_is_bounded(tmp_path: Path) -> None:
    stopped = run(when_up("slurmdbd", "false", wait_s=30, down="'#not-answering'"), tmp_path,
                  active=False)
    assert (stopped.returncode, stopped.stdout) == (0, "#not-answering\n")
    silent = run(when_up("slurmctld", "false", wait_s=2), tmp_path, active=True)
    assert (silent.returncode, silent.stdout) == (0, "")
