"""The lab's image: Debian 12 from debootstrap, customised, imported into podman, tagged by a
hash of its recipe (a changed recipe builds a new image and recreates the containers)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from gpuinfra_lab.podman import Podman, last_line, sbin_path
from gpuinfra_lab.state import LABEL, LabError, Paths, say

# The recipe. Any change here or in gpuinfra_lab/image/customize.sh changes the image tag.
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
VARIANT = "minbase"
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "libpam-systemd", "openssh-server", "python3", "sudo",
    "iproute2", "iputils-ping", "ca-certificates", "procps", "kmod", "netbase",
)  # fmt: skip
IMAGE_REPO = "localhost/gpuinfra-lab"


def recipe_tag(customize_script: bytes) -> str:
    """Image tag keyed by a hash of the recipe: suite, mirror, variant, packages, customize.sh."""
    recipe = json.dumps([SUITE, MIRROR, VARIANT, sorted(PACKAGES)]).encode() + customize_script
    return f"{IMAGE_REPO}:{hashlib.sha256(recipe).hexdigest()[:12]}"


def ensure_image(podman: Podman, paths: Paths) -> str:
    """The lab image for the current recipe: reused when present, else built and imported."""
    tag = recipe_tag(paths.customize.read_bytes())
    if podman.ok("image", "exists", tag):
        say(f"image {tag}: reused")
        return tag
    start = time.monotonic()
    say(f"image {tag}: building with debootstrap (about a minute)")
    rootfs = paths.lab / "build" / tag.rsplit(":", 1)[1]
    try:
        debootstrap(rootfs, paths.lab / "build.log")
        customize(rootfs, paths.customize)
        import_rootfs(podman, rootfs, tag)
    finally:
        shutil.rmtree(rootfs.parent, ignore_errors=True)
    say(f"image {tag}: built in {time.monotonic() - start:.0f} s")
    return tag


def debootstrap(rootfs: Path, log: Path) -> None:
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.mkdir(parents=True)
    cmd = [
        "debootstrap",
        f"--variant={VARIANT}",
        f"--include={','.join(PACKAGES)}",
        SUITE,
        str(rootfs),
        MIRROR,
    ]
    with log.open("wb") as out:
        rc = subprocess.run(
            cmd, stdout=out, stderr=out, env={**os.environ, "PATH": sbin_path()}
        ).returncode
    if rc != 0:
        raise LabError(f"image build failed: debootstrap exited {rc} (see {log})")


def customize(rootfs: Path, script: Path) -> None:
    """Run gpuinfra_lab/image/customize.sh inside the new root."""
    target = rootfs / "tmp" / "gpuinfra-customize.sh"
    shutil.copyfile(script, target)
    proc = subprocess.run(
        ["chroot", str(rootfs), "/bin/sh", "/tmp/gpuinfra-customize.sh"],
        capture_output=True,
        env={**os.environ, "PATH": sbin_path()},
    )
    target.unlink()
    if proc.returncode != 0:
        raise LabError(f"image build failed: customize.sh: {last_line(proc.stderr)}")


def import_rootfs(podman: Podman, rootfs: Path, tag: str) -> None:
    """tar the root into `podman import`, with /sbin/init as the command."""
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    proc = subprocess.run(
        [
            "podman",
            "import",
            "--change",
            "CMD=/sbin/init",
            "--change",
            f"LABEL={LABEL}=1",
            "-",
            tag,
        ],
        stdin=tar.stdout,
        capture_output=True,
        env=podman.env,
    )
    tar.stdout.close()
    if tar.wait() != 0 or proc.returncode != 0:
        raise LabError(f"image build failed: podman import: {last_line(proc.stderr)}")


def drop_old_images(podman: Podman, keep: str) -> None:
    """Remove lab images of older recipes (after their containers were recreated)."""
    out = podman.run(
        "images",
        "--filter",
        f"reference={IMAGE_REPO}",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        check=False,
    )
    for tag in set(out.split()) - {keep}:
        podman.run("rmi", tag, check=False)
