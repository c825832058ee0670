"""The "reboot required" marker the GPU roles leave on a host, and how to read it back.

When a change only takes effect after a reboot (first driver install or upgrade, nouveau
blacklisted, driver options changed, IOMMU kernel arguments, vfio-pci boot-time binding), the
role appends one line per reason to
:data:`REBOOT_MARKER`. It lives under /run (a tmpfs), so the reboot that applies the change
also clears it: a marker present means "changed since the last boot". The verification suite
reads it to report "reboot pending" instead of a misleading driver failure.

Line format: ``<reason>`` (free text, one per line); duplicates are ignored when reading.
"""

from __future__ import annotations

REBOOT_MARKER = "/run/gpuinfra/reboot-required"

# Reasons, as the roles write them (the verification suite may match on them).
DRIVER_CHANGED = "NVIDIA driver packages installed or changed"
NOUVEAU_BLACKLISTED = "nouveau blacklisted (initramfs rebuilt)"
DEVICE_OPTIONS_CHANGED = "NVIDIA device file options changed"
KERNEL_ARGS_CHANGED = "IOMMU kernel arguments changed (boot loader updated)"
CGROUP_V1_ARGS_CHANGED = ("kernel arguments for cgroup v1 added (boot loader updated): "
                          "slurmd's cgroup/v1 plugin needs them")
VFIO_OPTIONS_CHANGED = "vfio-pci options changed (initramfs rebuilt)"
VFIO_INITRAMFS_CHANGED = "VFIO modules added to the initramfs"
ATS_CHANGED = "ATS_ENABLED set in NIC firmware (applies at the next reboot or mstfwreset)"


def reboot_reasons(text: str | None) -> list[str]:
    """The reasons recorded in the marker's ``text`` (None or empty: no reboot pending)."""
    if not text:
        return []
    seen: dict[str, None] = {}
    for line in text.splitlines():
        if line.strip():
            seen.setdefault(line.strip(), None)
    return list(seen)
