"""The GPU facts (gpuinfra_deploy/facts/): process() on real captures, commands that never fail.

No host is needed: process() gets the lines a command printed, command() is checked as text and,
for the guard, run in a local shell.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pyinfra.api.exceptions import FactProcessError

from gpuinfra_deploy.facts import nvidia
from gpuinfra_deploy.facts._base import GPU_FIELDS, quiet
from gpuinfra_deploy.facts.apt import HeldPackages
from gpuinfra_deploy.facts.kernel import LoadedModules
from gpuinfra_deploy.facts.nvidia import (
    ContainerRuntimeConfig,
    NvidiaDeviceNodes,
    NvidiaGpus,
    NvidiaTopology,
)
from gpuinfra_deploy.facts.system import GroupIds
from tests.conftest import REAL, REPO, real_files

LAB = REPO / "gpuinfra_lab"
TOPO = REAL / "nvidia-smi-topo-m"


def lines(path) -> list[str]:
    return path.read_text().split("\n")


# ----------------------------------------------------------------------------- nvidia-smi facts

@pytest.mark.parametrize("path", real_files("nvidia-smi-topo-m"), ids=lambda p: p.name)
def test_topology_reads_every_real_capture(path):
    topo = NvidiaTopology().process(lines(path))
    assert topo["gpus"] and set(topo["links"]) >= set(topo["gpus"])


def test_topology_of_an_hgx_h100_is_nv18_everywhere():
    topo = NvidiaTopology().process(lines(TOPO / "8x-h100-sxm-nv18-no-nics-spaces.txt"))
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert {topo["links"]["GPU0"][f"GPU{i}"] for i in range(1, 8)} == {"NV18"}



def _stand_in(profile: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUINFRA_LAB_HARDWARE": str(LAB / "hardware" / profile)}
    return subprocess.run([sys.executable, str(LAB / "nvidia-smi"), *args], env=env,
                          capture_output=True, text=True, check=False)


@pytest.mark.parametrize("profile,count,model", [
    ("8x-h100-sxm-nvswitch", 8, "H100-SXM5-80GB"),
    ("2x-h100-pcie-bridged", 2, "H100-PCIE-80GB"),
    ("2x-a100-pcie-bridge-missing", 2, "A100-PCIE-40GB"),
])
def test_gpus_from_the_exact_query_the_fact_runs(profile, count, model):
    """The lab's replay answers the fact's own --query-gpu (values from real captures)."""
    out = _stand_in(profile, f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv,noheader,nounits")
    assert out.returncode == 0, out.stderr
    gpus = NvidiaGpus().process(out.stdout.rstrip("\n").split("\n"))["gpus"]
    assert [g["index"] for g in gpus] == list(range(count))
    assert {g["model"] for g in gpus} == {model}
    assert all(isinstance(g["memory.total"], int) and g["uuid"].startswith("GPU-") for g in gpus)


def test_gpus_no_devices_is_an_empty_list():
    assert NvidiaGpus().process(["No devices were found"]) == {"gpus": []}


def test_unreadable_output_fails_the_host_with_the_parser_message():
    with pytest.raises(FactProcessError, match="nvidia-smi topo -m"):
        NvidiaTopology().process(["this is not a matrix"])


# ----------------------------------------------------------------------------- other facts


# /proc/modules lines in the kernel's format (no real capture in tests/fixtures/real).
PROC_MODULES = [
    "nvidia_uvm 1527808 0 - Live 0x0000000000000000 (POE)",
    "nvidia_drm 77824 0 - Live 0x0000000000000000 (POE)",
    "nvidia_modeset 1314816 1 nvidia_drm, Live 0x0000000000000000 (POE)",
    "nvidia 56778752 20 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)",
]


def test_loaded_modules():
    modules = LoadedModules().process(PROC_MODULES)["modules"]
    assert list(modules) == ["nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"]
    assert modules["nvidia"]["used_by"] == ["nvidia_uvm", "nvidia_modeset"]
    assert modules["nvidia"]["instances"] == 20 and modules["nvidia_uvm"]["used_by"] == []


def test_loaded_modules_rejects_other_text():
    with pytest.raises(FactProcessError, match="/proc/modules"):
        LoadedModules().process(["Module                  Size  Used by"])  # lsmod, not /proc


def test_small_system_facts():
    assert HeldPackages().process(["nvidia-smi", "libcuda1", ""]) == ["libcuda1", "nvidia-smi"]
    assert GroupIds().process(["root:x:0:", "video:x:44:alice,bob"]) == {"root": 0, "video": 44}
    assert NvidiaDeviceNodes().process(["/dev/nvidia0 0 root 666", "/dev/nvidiactl 44 video 660"]) \
        == {"/dev/nvidia0": {"gid": 0, "group": "root", "mode": "0666"},
            "/dev/nvidiactl": {"gid": 44, "group": "video", "mode": "0660"}}


def test_container_runtime_config_reads_main_file_and_drop_ins(tmp_path, monkeypatch):
    command = ContainerRuntimeConfig().command("containerd")
    assert "/etc/containerd/config.toml /etc/containerd/conf.d/*.toml" in command
    with pytest.raises(Exception, match="unknown container runtime"):
        ContainerRuntimeConfig().command("crio")
    # Run the real command on files under tmp_path: a missing drop-in folder hides nothing.
    main = tmp_path / "config.toml"
    main.write_text("version = 2\n")
    monkeypatch.setitem(nvidia.CONFIG_PATHS, "containerd",
                        (str(main), str(tmp_path / "conf.d" / "*.toml")))
    out = subprocess.run(["sh", "-c", ContainerRuntimeConfig().command("containerd")],
                         capture_output=True, text=True, check=False)
    assert (out.returncode, out.stdout) == (0, "version = 2\n")
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "99-nvidia.toml").write_text("[nvidia]\n")
    out = subprocess.run(["sh", "-c", ContainerRuntimeConfig().command("containerd")],
                         capture_output=True, text=True, check=False)
    assert out.stdout == "version = 2\n[nvidia]\n"


# ----------------------------------------------------------------------------- never an error

@pytest.mark.parametrize("fact", [NvidiaGpus, NvidiaTopology])
def test_facts_on_optional_tools_are_guarded(fact):
    assert fact().requires_command() == "nvidia-smi"
    assert fact().command().endswith("; true")
    assert fact.default() == {}


def test_the_guard_prints_only_successful_output_and_always_succeeds():
    def sh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", "-c", quiet(command)], capture_output=True, text=True,
                              check=False)

    failing = sh("echo 'NVIDIA-SMI has failed because it could not communicate' ; exit 9")
    assert (failing.returncode, failing.stdout) == (0, "")
    working = sh("printf 'GPU0\\tX\\n'")
    assert (working.returncode, working.stdout) == (0, "GPU0\tX\n")
