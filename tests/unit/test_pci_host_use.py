"""What a host runs on, per PCI function (gpuinfra.parsers.pciuse), and VFIO's refusal of it
(gpuinfra.vfio.host_use_refusals, class_warnings, disk_escape): issue 23, findings 4 and 5.

The lab guest's capture (tests/fixtures/vfio/host-use-lab-hv-fresh.txt) is real: its SSH NIC
and its root disk. The other lines below are constructed, in the command's format, for what
the guest does not have (a boot VGA, swap, LVM, NVMe, a USB NIC)."""

from __future__ import annotations

import subprocess

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.pcisysfs import parse_pci_sysfs
from gpuinfra.parsers.pciuse import HOST_USE_COMMAND, function_of, parse_host_use
from gpuinfra.vfio import binding, class_warnings, disk_escape, host_use_refusals
from tests.conftest import REPO

CAPTURES = REPO / "tests" / "fixtures" / "vfio"
GUEST = parse_host_use((CAPTURES / "host-use-lab-hv-fresh.txt").read_text())
PCI = parse_pci_sysfs((CAPTURES / "sysfs-pci-lab-hv-fresh.txt").read_text())


def test_the_guests_ssh_nic_and_root_disk_are_what_it_runs_on():
    assert GUEST == {"0000:00:01.0": ["its network interface enp0s1 is up"],
                     "0000:00:02.0": ["its block device vda1 is mounted at /"]}


CONSTRUCTED = """\
vga 0000:00:02.0
net eno1 0x1002 /sys/devices/pci0000:00/0000:00:1f.6/net/eno1
net enx0 0x1003 /sys/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/net/enx0
net lo 0x9 /sys/devices/virtual/net/lo
blk nvme0n1 259:0 - /sys/devices/pci0000:00/0000:3d:00.0/nvme/nvme0/nvme0n1
blk nvme0n1p2 259:2 dm-0 /sys/devices/pci0000:00/0000:3d:00.0/nvme/nvme0/nvme0n1/nvme0n1p2
blk sda 8:0 - /sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda
blk sda2 8:2 - /sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda2
blk sdb 8:16 - /sys/devices/pci0000:00/0000:00:17.1/ata2/host1/target1:0:0/1:0:0:0/block/sdb
blk dm-0 253:0 - /sys/devices/virtual/block/dm-0
mnt 253:0 /
mnt 0:21 /proc
swap /dev/sda2
"""


def test_boot_vga_up_nics_swap_and_held_partitions_are_found_below_their_function():
    assert parse_host_use(CONSTRUCTED) == {
        "0000:00:02.0": ["it is the boot VGA device (the host's console)"],
        # eno1 is down (flags 0x1002: no IFF_UP); the USB NIC is below its xHCI controller
        "0000:00:14.0": ["its network interface enx0 is up"],
        "0000:3d:00.0": ["its block device nvme0n1p2 is held by dm-0 (LVM, RAID or dm-crypt)"],
        "0000:00:17.0": ["its block device sda2 is swap"],
    }


def test_a_device_path_belongs_to_the_last_function_in_it():
    assert function_of("/sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0") == \
        "0000:3d:00.0"
    assert function_of("/sys/devices/virtual/net/lo") is None


@pytest.mark.parametrize("line", ["net eth0 up /sys/x", "blk vda 254 - /sys/x", "vga 00:02.0",
                                  "disk vda"], ids=["flags", "dev", "short-address", "kind"])
def test_lines_it_cannot_read_are_refused(line):
    with pytest.raises(ParseError):
        parse_host_use(line)


def test_the_command_runs_under_sh_and_its_output_parses():
    """On this machine (Linux: sysfs and /proc): exit 0, nothing on stderr, every line read."""
    ran = subprocess.run(["sh", "-c", HOST_USE_COMMAND], capture_output=True, text=True,
                         check=False, timeout=30)
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    assert ran.stdout.startswith(("vga ", "net ")), ran.stdout[:200]
    parse_host_use(ran.stdout)


# ----------------------------------------------------------------------------- the refusals

def refusals(devices: list[str]) -> list[str]:
    addresses = [d for d in devices if "." in d]
    ids = [d for d in devices if "." not in d]
    return host_use_refusals(ids, binding(addresses, ids, PCI), PCI, GUEST)


def test_the_ssh_nic_by_address_is_refused_once_with_why_and_fix():
    [problem] = refusals(["0000:00:01.0"])
    assert problem.startswith("0000:00:01.0 (1af4:1000, class 0x020000) is a device this host "
                              "runs on: its network interface enp0s1 is up. Fix: remove it")


def test_an_id_matching_the_ssh_nic_is_refused_as_the_ids_doing():
    [problem] = refusals(["1af4:1000"])
    assert "'options vfio-pci ids=1af4:1000' takes every function with that ID, including " \
           "0000:00:01.0" in problem and "by address (lspci -D), not by ID" in problem


def test_stand_ins_the_host_does_not_use_pass():
    assert refusals(["0000:01:00.0", "0000:04:01.0", "8086:293e"]) == []


def test_functions_that_are_not_display_or_their_companions_are_warned_about():
    warned = class_warnings(binding(["0000:01:00.0"], [], PCI), PCI)
    assert warned == ["0000:01:00.0 (1af4:1044) has class 0x00ff00: not a display/3D "
                      "controller (0x03xx) nor the audio/USB function of one; passed through "
                      "as vfio_devices says: check it is meant for a VM"]


def test_a_gpu_and_its_audio_function_are_not_warned_about():
    gpu = parse_pci_sysfs("0000:3b:00.0 0x10de 0x2331 0x030200 - 30 (null)\n"
                          "0000:3b:00.1 0x10de 0x22a3 0x040300 - 30 (null)\n")
    assert class_warnings(binding(["0000:3b:00.0"], [], gpu), gpu) == []


@pytest.mark.parametrize(("real", "kind", "words"), [
    ("/etc/shadow", "file", "resolves to /etc/shadow, outside /srv/images"),
    ("/srv/images-old/a.qcow2", "file", "outside /srv/images"),
    ("/srv/images/a.qcow2", "block", "is a block device"),
    ("/srv/images/a.qcow2", "dir", "is a dir"),
], ids=["shadow", "prefix", "block", "dir"])
def test_a_disk_leading_out_of_the_image_directory_is_named(real, kind, words):
    problem = disk_escape("/srv/images/a.qcow2", real, kind, "/srv/images")
    assert problem and words in problem


@pytest.mark.parametrize("kind", ["file", "missing"])
def test_a_disk_inside_the_image_directory_passes(kind):
    assert disk_escape("/srv/images/a.qcow2", "/data/images/a.qcow2", kind, "/data/images") \
        is None


def test_no_acs_unit_is_what_a_host_without_output_gives():
    """pyinfra answers a fact whose command prints nothing with its default(), without
    process(): a host the rdma role never touched (found on the lab guest: None crashed)."""
    from gpuinfra_deploy.facts.pci import AcsOffUnit

    assert AcsOffUnit().default() == {"unit": False, "script": False, "active": False}
    assert AcsOffUnit().process(["unit", "active"]) == {"unit": True, "script": False,
                                                        "active": True}
