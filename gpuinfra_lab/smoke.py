"""Smoke test of a running lab over SSH with testinfra (not part of `make test`).

    .venv/bin/pytest -q -p no:cacheprovider gpuinfra_lab/smoke.py \
        --hosts=ssh://lab-worker1 --ssh-config=.lab/ssh_config

It proves the path the verify suite takes: testinfra's ssh backend, the lab's key and
ssh_config, systemd, sshd and the replayed hardware of a worker.
"""

from __future__ import annotations

import json

import pytest


def test_systemd_booted(host) -> None:
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded")
    assert host.service("ssh").is_running


MANIFEST = "/usr/local/share/gpuinfra-lab/hardware/manifest.json"


def worker_only(host) -> None:
    if not host.file(MANIFEST).exists:
        pytest.skip("no replayed hardware on this host (the head has none)")


def test_device_nodes_match_manifest(host) -> None:
    worker_only(host)
    manifest = json.loads(host.file(MANIFEST).content_string)
    for node in manifest["device_nodes"]:
        kind, major, minor = host.check_output(f"stat -c '%F %t %T' {node['path']}").rsplit(" ", 2)
        assert kind == "character special file", node["path"]
        assert (int(major, 16), int(minor, 16)) == (node["major"], node["minor"])


def test_nvidia_smi_replays(host) -> None:
    worker_only(host)
    listing = host.run("nvidia-smi -L")
    assert listing.rc == 0
    assert listing.stdout.startswith("GPU 0: NVIDIA ")
    assert host.run("nvidia-smi --no-such-flag").rc == 6
