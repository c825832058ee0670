"""The driver suite's pure helpers (gpuinfra_verify/expect.py) and the lab's device-node script."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

from gpuinfra_verify.expect import (
    csv_column,
    device_problems,
    driver_version_problems,
    loaded_modules,
    reboot_pending_message,
)

DEVICES_SCRIPT = Path(__file__).resolve().parents[2] / "gpuinfra_lab" / "gpuinfra-lab-devices"


def _devices_module():
    loader = importlib.machinery.SourceFileLoader("gpuinfra_lab_devices", str(DEVICES_SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_reboot_pending_message_names_reasons_cause_and_fix():
    text = reboot_pending_message("w1", ["NVIDIA driver packages installed or changed", "x"])
    first, cause, fix = text.splitlines()
    assert first == "w1: reboot pending: NVIDIA driver packages installed or changed; x"
    assert cause.startswith("  cause: ") and fix.startswith("  fix: reboot")


def test_driver_versions_on_and_off_branch():
    assert driver_version_problems(csv_column("535.161.08\n535.161.08\n"), "535") == []
    assert driver_version_problems(["555.42.02"], "535") == [
        "GPU0: driver 555.42.02, expected branch 535 (535.*)"]
    # a prefix is not a branch: 5350.x is not 535
    assert driver_version_problems(["5350.1"], "535")


def test_device_problems():
    lines = ("/dev/nvidia0 root video 660\n/dev/nvidia1 root root 666\n"
             "/dev/nvidia2 root video 666\n")
    assert device_problems(lines, "video", "0660") == [
        "/dev/nvidia1: root:root 0666, expected group video mode 0660",
        "/dev/nvidia2: root:video 0666, expected group video mode 0660",
    ]


def test_loaded_modules():
    text = "nouveau 2801664 0 - Live 0x0\nnvidia 56807424 1 nvidia_uvm, Live 0x0\n"
    assert loaded_modules(text) == {"nouveau", "nvidia"}


def test_lab_devices_follow_driver_options(tmp_path, monkeypatch):
    module = _devices_module()
    assert module.c_number("0660") == 0o660 and module.c_number("44") == 44
    assert module.c_number("0x1b6") == 0o666
    monkeypatch.setattr(module, "MODPROBE_D", str(tmp_path))
    assert module.driver_options() == (0, 0, 0o666)  # the driver's defaults
    (tmp_path / "gpuinfra-nvidia-devices.conf").write_text(
        "# comment\noptions nvidia NVreg_DeviceFileUID=0 NVreg_DeviceFileGID=44 "
        "NVreg_DeviceFileMode=0660\noptions nouveau modeset=0\n")
    assert module.driver_options() == (0, 44, 0o660)
