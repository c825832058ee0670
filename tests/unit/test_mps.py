"""MPS: the control commands for the spec's limits and the daemon's unit (gpuinfra.sharing.mps)."""

from __future__ import annotations

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.sharing.mps import (
    CLIENT_PROFILE,
    COMPUTE_MODE,
    PIPE_DIRECTORY,
    client_profile,
    control_commands,
    expected_thread_percentage,
    pinned_limit,
    unit_text,
)
from gpuinfra.spec.model import GpuSharing
from gpuinfra_deploy.templates import text as file_text

MPS = GpuSharing(mode="mps", mps_clients=4, mps_thread_percentage=25,
                 mps_pinned_mem_limit="8G")


@pytest.mark.parametrize(("size", "expected"), [("8G", "8G"), ("8GB", "8G"), ("512MB", "512M"),
                                                ("1T", "1024G"), ("8589934592", "8192M"),
                                                ("1024K", "1M")])
def test_pinned_limit_is_written_in_m_or_g(size, expected):
    assert pinned_limit(size) == expected


def test_control_commands_per_gpu():
    assert control_commands(MPS, 2) == [
        "set_default_active_thread_percentage 25",
        "set_default_device_pinned_mem_limit 0 8G",
        "set_default_device_pinned_mem_limit 1 8G"]
    assert control_commands(GpuSharing(mode="mps", mps_clients=4), 2) == []
    with pytest.raises(GpuinfraError):
        control_commands(GpuSharing(mode="mig"), 2)


def test_expected_thread_percentage_defaults_to_100():
    assert expected_thread_percentage(MPS) == 25
    assert expected_thread_percentage(GpuSharing(mode="mps", mps_clients=2)) == 100


def test_unit_sets_compute_mode_dirs_and_limits():
    unit = file_text(unit_text(MPS, 2))
    assert f"ExecStartPre=/usr/bin/nvidia-smi -c {COMPUTE_MODE}" in unit
    assert f"Environment=CUDA_MPS_PIPE_DIRECTORY={PIPE_DIRECTORY}" in unit
    assert "ExecStart=/usr/bin/nvidia-cuda-mps-control -d" in unit
    assert ("ExecStartPost=/bin/sh -c 'echo set_default_active_thread_percentage 25 | "
            "/usr/bin/nvidia-cuda-mps-control'") in unit
    assert "Before=slurmd.service" in unit and "PrivateTmp" not in unit


def test_the_pipes_live_in_a_root_runtime_directory_not_in_tmp():
    """Finding 6 of issue 23: in /tmp/nvidia-mps (MPS' default) a local user who makes the
    directory first owns the daemon's pipe namespace. systemd makes /run/nvidia-mps for the
    unit (root, 0755, afresh at each start); nothing in the unit or the clients' profile
    names /tmp, and no ExecStartPre makes a directory with mkdir -p."""
    unit = file_text(unit_text(MPS, 2))
    assert PIPE_DIRECTORY == "/run/nvidia-mps"
    assert "RuntimeDirectory=nvidia-mps\n" in unit and "RuntimeDirectoryMode=0755\n" in unit
    assert "LogsDirectory=nvidia-mps\n" in unit
    assert f"Environment=CUDA_MPS_PIPE_DIRECTORY={PIPE_DIRECTORY}\n" in unit
    assert "/tmp" not in unit and "mkdir" not in unit
    profile = file_text(client_profile())
    assert f"export CUDA_MPS_PIPE_DIRECTORY={PIPE_DIRECTORY}\n" in profile
    assert "/tmp" not in profile
    assert CLIENT_PROFILE.startswith("/etc/profile.d/") and CLIENT_PROFILE.endswith(".sh")


def test_unit_without_compute_mode_for_gpuless_hosts():
    assert "-c EXCLUSIVE_PROCESS" not in file_text(unit_text(MPS, 2, compute_mode=False))
