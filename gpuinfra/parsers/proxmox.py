"""What Proxmox VE's ``qm`` prints: ``qm config VMID``, one ``key: value`` line per option.

::

    boot: order=scsi0
    hostpci0: 0000:3b:00,pcie=1
    memory: 65536

The vfio role compares a VM's ``hostpciN`` options with the spec's
(:func:`gpuinfra.vfio.hostpci_changes`).
"""

from __future__ import annotations


def parse_qm_config(text: str) -> dict[str, str]:
    """``qm config VMID`` output (``key: value`` lines) as a dict; other lines are skipped."""
    config = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and " " not in key:
            config[key] = value.strip()
    return config
