"""What a host itself runs on, per PCI function: read before VFIO takes any function away.

:data:`HOST_USE_COMMAND` reads sysfs and /proc in one command and prints one line per fact::

    vga 0000:00:02.0                                   the boot VGA device (boot_vga = 1)
    net enp0s1 0x1003 /sys/devices/pci0000:00/0000:00:01.0/virtio0/net/enp0s1
    blk vda1 254:1 - /sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/vda1
    mnt 254:1 /                                        /proc/self/mountinfo: device, mount point
    swap /dev/vda2                                     /proc/swaps

``net``: the interface's flags (/sys/class/net/<if>/flags, hexadecimal) and its resolved sysfs
path; ``blk``: every block device and partition (/sys/class/block), its ``major:minor``, the
devices holding it (``holders/``: dm for LVM and dm-crypt, md for RAID; ``-``: none) and its
resolved path. The PCI function a netdev or block device belongs to is the last PCI address
in that path (a virtio device's ``virtioN`` child, a SATA disk's ``ata``/``host`` chain, an
NVMe namespace, a USB NIC behind its xHCI controller all resolve below their function).

Sources: ``boot_vga`` is 1 on the VGA device the firmware booted with (Linux
drivers/pci/pci-sysfs.c, commit 217f45de3d2f "PCI: expose boot VGA device via sysfs");
``IFF_UP`` is bit 0x1 of the interface flags (include/uapi/linux/if.h); ``holders/`` lists the
devices that claimed a block device (block/holder.c, ``bd_link_disk_holder``:
``/sys/block/sda/holders/dm-0``).
"""

from __future__ import annotations

import re

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "host use of PCI functions"

# One command: sysfs and /proc only, one `readlink -f` per netdev and block device.
HOST_USE_COMMAND = (
    "for d in /sys/bus/pci/devices/*; do v=0; [ -r \"$d/boot_vga\" ] && "
    "read -r v < \"$d/boot_vga\"; if [ \"$v\" = 1 ]; then echo \"vga ${d##*/}\"; fi; done; "
    "for n in /sys/class/net/*; do [ -r \"$n/flags\" ] || continue; read -r f < \"$n/flags\"; "
    "echo \"net ${n##*/} $f $(readlink -f \"$n\")\"; done; "
    "for b in /sys/class/block/*; do [ -r \"$b/dev\" ] || continue; read -r mm < \"$b/dev\"; "
    "h=; for x in \"$b\"/holders/*; do [ -e \"$x\" ] && h=\"$h${h:+,}${x##*/}\"; done; "
    "echo \"blk ${b##*/} $mm ${h:--} $(readlink -f \"$b\")\"; done; "
    "while read -r _ _ mm _ mp _; do echo \"mnt $mm $mp\"; done < /proc/self/mountinfo; "
    "while read -r f _; do case $f in /*) echo \"swap $f\";; esac; done < /proc/swaps"
)

IFF_UP = 0x1
_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_NAME = r"[A-Za-z0-9_.:@+-]+"
_LINES = {
    "vga": re.compile(rf"vga (?P<address>{_BDF.pattern})"),
    "net": re.compile(rf"net (?P<name>{_NAME}) (?P<flags>0x[0-9a-fA-F]+) (?P<path>/\S*)"),
    "blk": re.compile(rf"blk (?P<name>{_NAME}) (?P<dev>\d+:\d+) (?P<holders>\S+) (?P<path>/\S*)"),
    "mnt": re.compile(r"mnt (?P<dev>\d+:\d+) (?P<mountpoint>\S+)"),
    "swap": re.compile(r"swap (?P<path>/\S+)"),
}


def function_of(path: str) -> str | None:
    """The PCI function a sysfs device path lies below (the last PCI address in it)."""
    found = _BDF.findall(path)
    return found[-1] if found else None


def parse_host_use(text: str) -> dict[str, list[str]]:
    """``{address: [why the host uses it]}`` from :data:`HOST_USE_COMMAND`'s output: the boot
    VGA device, netdevs that are up, block devices (or partitions) mounted, used as swap or
    held by dm/md. Functions the host does not use this way are absent. ParseError on any
    other line."""
    mounts: dict[str, str] = {}
    swaps: set[str] = set()
    vga: list[str] = []
    nets: list[re.Match[str]] = []
    blocks: list[re.Match[str]] = []
    for no, line in enumerate(clean_lines(text), 1):
        line = line.strip()
        if not line:
            continue
        kind = line.split(" ", 1)[0]
        pattern = _LINES.get(kind)
        match = pattern.fullmatch(line) if pattern else None
        if match is None:
            raise ParseError(SOURCE, f"unexpected line {line[:60]!r}", line=no)
        if kind == "vga":
            vga.append(match["address"])
        elif kind == "net":
            nets.append(match)
        elif kind == "blk":
            blocks.append(match)
        elif kind == "mnt":
            mounts.setdefault(match["dev"], match["mountpoint"])
        else:
            swaps.add(match["path"].rsplit("/", 1)[1])
    use: dict[str, list[str]] = {}
    for address in vga:
        use.setdefault(address, []).append("it is the boot VGA device (the host's console)")
    for net in nets:
        address = function_of(net["path"])
        if address and int(net["flags"], 16) & IFF_UP:
            use.setdefault(address, []).append(f"its network interface {net['name']} is up")
    for blk in blocks:
        address = function_of(blk["path"])
        if address is None:
            continue
        name = blk["name"]
        if blk["dev"] in mounts:
            use.setdefault(address, []).append(
                f"its block device {name} is mounted at {mounts[blk['dev']]}")
        if name in swaps:
            use.setdefault(address, []).append(f"its block device {name} is swap")
        if blk["holders"] != "-":
            use.setdefault(address, []).append(
                f"its block device {name} is held by {blk['holders'].replace(',', ', ')} "
                "(LVM, RAID or dm-crypt)")
    return use
