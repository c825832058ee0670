"""Runtime configuration detection, CDI spec versions, system listings and the reboot marker."""

from __future__ import annotations

import pytest

from gpuinfra.containers.runtimes import cdi_driver_version, has_nvidia_runtime
from gpuinfra.errors import GpuinfraError, ParseError
from gpuinfra.parsers.system import (
    parse_device_nodes,
    parse_group_ids,
    parse_held_packages,
    parse_proc_modules,
)
from gpuinfra.reboot import DRIVER_CHANGED, REBOOT_MARKER, reboot_reasons

# What `nvidia-ctk runtime configure --runtime=containerd` leaves in a version 2 config
# (docs/hardware-reference.md 2).
CONTAINERD_V2 = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
  SystemdCgroup = true
"""
# Toolkit 1.18+ on containerd 2.x: a drop-in under the v3 CRI plugin name.
CONTAINERD_V3_DROPIN = """[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
    BinaryName = '/usr/bin/nvidia-container-runtime'
"""


def test_containerd_with_the_nvidia_runtime():
    assert has_nvidia_runtime("containerd", CONTAINERD_V2)
    assert has_nvidia_runtime("containerd", 'version = 3\nimports = ["/etc/containerd/conf.d/*"]\n'
                              + CONTAINERD_V3_DROPIN)


@pytest.mark.parametrize("text", [
    "",
    "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n",
    CONTAINERD_V2.replace("[plugins", "# [plugins"),  # commented out
    CONTAINERD_V2.replace("/usr/bin/nvidia-container-runtime", "/usr/bin/runc"),
])
def test_containerd_without_it(text):
    assert not has_nvidia_runtime("containerd", text)


def test_docker_daemon_json():
    assert has_nvidia_runtime("docker", '{"runtimes": {"nvidia": {"path": '
                                        '"nvidia-container-runtime", "args": []}}}')
    assert not has_nvidia_runtime("docker", '{"log-driver": "json-file"}')
    assert not has_nvidia_runtime("docker", "")
    assert not has_nvidia_runtime("docker", "{not json")
    with pytest.raises(GpuinfraError, match="unknown container runtime"):
        has_nvidia_runtime("podman", "")


def test_cdi_spec_driver_version():
    spec = ("containerEdits:\n  mounts:\n"
            "  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03\n")
    assert cdi_driver_version(spec) == "535.261.03"
    assert cdi_driver_version("- hostPath: /usr/lib/libnvidia-ml.so.550.54.15\n") == "550.54.15"
    assert cdi_driver_version("kind: nvidia.com/gpu\n") is None


def test_system_listings():
    modules = parse_proc_modules("nvidia 56778752 20 nvidia_uvm,nvidia_modeset, Live 0x0 (POE)\n")
    assert modules.to_json() == {"modules": {"nvidia": {
        "size": 56778752, "instances": 20, "used_by": ["nvidia_uvm", "nvidia_modeset"],
        "state": "Live"}}}
    assert parse_group_ids("video:x:44:\ngpu:x:998:alice\n") == {"video": 44, "gpu": 998}
    assert parse_device_nodes("/dev/nvidia-uvm 44 video 660\n") == {
        "/dev/nvidia-uvm": {"gid": 44, "group": "video", "mode": "0660"}}
    assert parse_held_packages("b\na\n\n") == ["a", "b"]
    for parse, text in [(parse_proc_modules, "nvidia"), (parse_group_ids, "video:x"),
                        (parse_device_nodes, "/dev/nvidia0 root 666")]:
        with pytest.raises(ParseError):
            parse(text)


def test_reboot_marker():
    assert REBOOT_MARKER.startswith("/run/")  # cleared by the reboot that applies the change
    assert reboot_reasons(None) == [] and reboot_reasons("") == []
    assert reboot_reasons(f"{DRIVER_CHANGED}\n\n{DRIVER_CHANGED}\nother\n") == [
        DRIVER_CHANGED, "other"]
