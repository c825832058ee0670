"""The QEMU guests' disk image: the lab's container image plus Debian's kernel, an initramfs
and GRUB, on a partitioned raw disk, cached machine-wide and keyed by a hash of its recipe.

Recipe: the container image (its tag is itself a hash of its recipe: gpuinfra_lab/image.py) and
gpuinfra_lab/image/vm-customize.sh. Build (about 2-3 minutes on two cores, see
gpuinfra_lab/README.md): export
the container image's root, run vm-customize.sh in it (apt installs the kernel, initramfs-tools
and GRUB), write it into partition 1 of a sparse raw disk (mkfs.ext4 -d: no loop device, no
mount), then boot the disk once with its own kernel to install GRUB on its MBR and generate
grub.cfg there (gpuinfra_lab/qemu.py DiskImage).

The cache lives in :data:`CACHE` (/var/cache/gpuinfra-lab), not in the checkout's .lab/: a
fresh clone of the repository on the same machine (a CI run) finds the image of the same
recipe there and boots in seconds; the build is locked, so two checkouts never build the same
image twice at once. Guests never write to it: each runs from its own overlay
(gpuinfra_lab/qemu.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

from gpuinfra_lab.podman import Podman, last_line, sbin_path
from gpuinfra_lab.qemu import CPU, MARKER_OK, QEMU, DiskImage, accelerator
from gpuinfra_lab.state import LabError, Paths, say

CACHE = Path("/var/cache/gpuinfra-lab")
DISK_BYTES = 4 * 1024**3
PARTITION_START = 2048  # sectors: partition 1 starts at 1 MiB, GRUB's core image fits before
INSTALL_TIMEOUT_S = 600
KEEP = 4  # recipes kept in the cache: each release's current one and the one before


def image_key(container_tag: str, vm_customize: bytes) -> str:
    """The VM image's key: a hash of the container image's tag and vm-customize.sh."""
    digest = hashlib.sha256(container_tag.encode() + b"\0" + vm_customize)
    return digest.hexdigest()[:12]


def mbr(disk_bytes: int) -> bytes:
    """A DOS partition table with one bootable Linux partition from 1 MiB to the end (the 64
    bytes of the table and the boot signature, written at offset 446)."""
    sectors = disk_bytes // 512 - PARTITION_START
    entry = struct.pack("<B3sB3sII", 0x80, b"\xfe\xff\xff", 0x83, b"\xfe\xff\xff",
                        PARTITION_START, sectors)
    return entry + bytes(48) + b"\x55\xaa"


def ensure_vm_image(podman: Podman, paths: Paths, container_tag: str) -> DiskImage:
    """The guests' disk image for the current recipe: reused from the cache, else built."""
    key = image_key(container_tag, paths.vm_customize.read_bytes())
    image = DiskImage(CACHE / f"vm-{key}", key)
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (image.folder / "ready").is_file():
            say(f"VM image {key}: reused ({image.folder})")
            return image
        start = time.monotonic()
        say(f"VM image {key}: building (kernel, initramfs, GRUB: a few minutes)")
        build = CACHE / f"vm-{key}.build"
        shutil.rmtree(build, ignore_errors=True)
        build.mkdir()
        try:
            rootfs = build / "rootfs"
            _export(podman, container_tag, rootfs)
            _customize(rootfs, paths.vm_customize, build / "customize.log")
            _disk(rootfs, build)
            shutil.rmtree(rootfs)
            _install_bootloader(DiskImage(build, key))
            (build / "ready").write_text(f"{container_tag}\n")
            shutil.rmtree(image.folder, ignore_errors=True)
            build.rename(image.folder)
        finally:
            shutil.rmtree(build, ignore_errors=True)
        _drop_old(image.folder)
    say(f"VM image {key}: built in {time.monotonic() - start:.0f} s")
    return image


def _export(podman: Podman, tag: str, rootfs: Path) -> None:
    """The container image's root file system, as `podman export` of a container of it."""
    rootfs.mkdir()
    container = podman.run("create", tag, "/bin/true").strip()
    try:
        export = subprocess.Popen(["podman", "export", container], stdout=subprocess.PIPE,
                                  env=podman.env)
        tar = subprocess.run(["tar", "-C", str(rootfs), "-x"], stdin=export.stdout,
                             capture_output=True)
        export.stdout.close()
        if export.wait() != 0 or tar.returncode != 0:
            raise LabError(f"VM image: podman export of {tag} failed: {last_line(tar.stderr)}")
    finally:
        podman.run("rm", "-f", container, check=False)


def _customize(rootfs: Path, script: Path, log: Path) -> None:
    """vm-customize.sh in the root (chroot), with the build machine's resolver for apt and no
    service started by a package."""
    resolv = rootfs / "etc" / "resolv.conf"
    resolv.unlink(missing_ok=True)
    shutil.copyfile("/etc/resolv.conf", resolv)
    policy = rootfs / "usr" / "sbin" / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    shutil.copyfile(script, rootfs / "tmp" / "gpuinfra-vm-customize.sh")
    with log.open("wb") as out:
        proc = subprocess.run(["chroot", str(rootfs), "/bin/sh", "/tmp/gpuinfra-vm-customize.sh"],
                              stdout=out, stderr=out, env={**os.environ, "PATH": sbin_path()})
    (rootfs / "tmp" / "gpuinfra-vm-customize.sh").unlink()
    policy.unlink()
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise LabError(f"VM image: vm-customize.sh failed: {tail[0]} (see {log})")


def _disk(rootfs: Path, build: Path) -> None:
    """disk.raw (sparse): the partition table, the root in partition 1 (mkfs.ext4 -d writes
    the files at the partition's offset: no loop device, no mount); the kernel and initramfs
    copied beside it."""
    boot = rootfs / "boot"
    kernels = sorted(boot.glob("vmlinuz-*"))
    initrds = sorted(boot.glob("initrd.img-*"))
    if len(kernels) != 1 or len(initrds) != 1:
        raise LabError(f"VM image: expected one kernel and one initramfs in /boot, found "
                       f"{[p.name for p in kernels + initrds]}")
    shutil.copyfile(kernels[0], build / "vmlinuz")
    shutil.copyfile(initrds[0], build / "initrd.img")
    disk = build / "disk.raw"
    with disk.open("wb") as out:
        out.truncate(DISK_BYTES)
        out.seek(446)
        out.write(mbr(DISK_BYTES))
    size_k = (DISK_BYTES - PARTITION_START * 512) // 1024
    proc = subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "gpuinfra-root",
                           "-E", f"offset={PARTITION_START * 512}", "-d", str(rootfs),
                           str(disk), f"{size_k}k"],
                          capture_output=True, env={**os.environ, "PATH": sbin_path()})
    if proc.returncode != 0:
        raise LabError(f"VM image: mkfs.ext4 failed: {last_line(proc.stderr)}")


def _install_bootloader(image: DiskImage) -> None:
    """Boot the disk once with its own kernel and an init that installs GRUB on the MBR and
    generates grub.cfg (grub-install needs the disk as the guest sees it), then powers off."""
    log = image.folder / "install.log"
    accel = accelerator(CACHE, image.kernel)
    command = [QEMU, "-machine", f"q35,accel={accel}", "-cpu", CPU, "-smp", "2", "-m", "1024",
               "-nodefaults", "-display", "none", "-no-reboot", "-serial", f"file:{log}",
               "-kernel", str(image.kernel), "-initrd", str(image.initrd),
               "-append", "console=ttyS0 root=/dev/vda1 rw panic=-1 mitigations=off "
               "init=/usr/local/sbin/gpuinfra-lab-install-bootloader",
               "-drive", f"file={image.disk},if=virtio,format=raw"]
    try:
        subprocess.run(command, capture_output=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise LabError(f"VM image: the GRUB install boot did not finish in "
                       f"{INSTALL_TIMEOUT_S} s (see {log})") from None
    if MARKER_OK not in log.read_text(errors="replace"):
        raise LabError(f"VM image: GRUB was not installed (see {log})")


def _drop_old(current: Path) -> None:
    """Keep the newest :data:`KEEP` images (other checkouts may still run an older recipe)."""
    images = sorted((p for p in CACHE.glob("vm-*") if p.is_dir() and (p / "ready").is_file()),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in images[KEEP:]:
        if old != current:
            shutil.rmtree(old, ignore_errors=True)
