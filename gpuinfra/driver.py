"""The files the nvidia_driver role writes for the driver, as data: nouveau blacklisted, GPU
device access limited to one group (driver options, udev rule), persistence mode on.

Each builder returns a :class:`gpuinfra.text.FileText`: the wording is in the role's
templates (roles/nvidia_driver/templates/<target path>.j2), the persistenced drop-in in the
shared systemd one. Values that end up in a file or a command line are validated first (group
and user names, octal modes): a bad value raises GpuinfraError naming it, instead of landing
on a host.
"""

from __future__ import annotations

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.rules import clip, octal_mode, posix_name
from gpuinfra.text import FileText
from gpuinfra.units import unit_file

NOUVEAU_BLACKLIST = "/etc/modprobe.d/blacklist-nouveau.conf"
NVIDIA_OPTIONS = "/etc/modprobe.d/gpuinfra-nvidia-devices.conf"
DEVICE_UDEV_RULE = "/etc/udev/rules.d/70-gpuinfra-nvidia-devices.rules"
PERSISTENCED_DROPIN = "/etc/systemd/system/nvidia-persistenced.service.d/gpuinfra.conf"
PERSISTENCED_BINARY = "/usr/bin/nvidia-persistenced"

_NAME = posix_name()
_MODE = octal_mode()


def _template(target: str) -> str:
    """The role's template of the file at ``target``."""
    return f"nvidia_driver{target}.j2"


def check_name(value: str, what: str) -> str:
    """A POSIX user or group name, or GpuinfraError (the spec's rule for such knobs)."""
    problem = _NAME.problem(value)
    if problem:
        raise GpuinfraError(f"{what} {clip(value)} is not a valid name ({_NAME.allowed})")
    return value


def check_mode(value: str | int) -> str:
    """An octal file mode as 4 digits (``"0660"``), or GpuinfraError.

    Given as text (``"0660"``, ``"660"``); an int is read as its octal digits only when they
    are all 0-7 (``660``), since Python's ``0o660`` == 432 would otherwise be ambiguous.
    """
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if _MODE.problem(text):
        raise GpuinfraError(f"device mode {clip(value)} is not an octal mode like '0660'")
    return text.rjust(4, "0")


def nouveau_blacklist() -> FileText:
    """/etc/modprobe.d/blacklist-nouveau.conf (docs/hardware-reference.md 1.2) [cuda-ig]."""
    return FileText(_template(NOUVEAU_BLACKLIST))


def nvidia_device_options(gid: int, mode: str | int) -> FileText:
    """Driver options making the driver create /dev/nvidia* as root:<gid> with ``mode``.

    The proprietary driver creates its device files itself (through nvidia-modprobe), with the
    owner, group and mode these options give; udev rules do not see those nodes.
    """
    if not isinstance(gid, int) or isinstance(gid, bool) or gid < 0:
        raise GpuinfraError(f"device group id {gid!r} is not a number: NVreg_DeviceFileGID "
                            "needs the numeric gid")
    return FileText(_template(NVIDIA_OPTIONS), {"gid": gid, "mode": check_mode(mode)})


def device_udev_rule(group: str, mode: str | int) -> FileText:
    """A udev rule giving nvidia device nodes that do come through udev the same access."""
    return FileText(_template(DEVICE_UDEV_RULE), {
        "options_file": NVIDIA_OPTIONS, "group": check_name(group, "device group"),
        "mode": check_mode(mode)})


def persistenced_dropin(user: str, group: str) -> FileText:
    """systemd drop-in running nvidia-persistenced with persistence mode ON.

    Ubuntu's unit starts the daemon with ``--no-persistence-mode`` (docs/hardware-reference.md 1.5):
    the first, empty ``ExecStart=`` drops the packaged command line. ``--group``: the daemon
    needs read/write access to /dev/nvidia*, which the device options restrict to that group.
    """
    user = check_name(user, "nvidia-persistenced user")
    group = check_name(group, "device group")
    return unit_file({"Service": [
        ("ExecStart", ""),
        ("ExecStart", f"{PERSISTENCED_BINARY} --user {user} --group {group} "
                      "--persistence-mode --verbose")]})
