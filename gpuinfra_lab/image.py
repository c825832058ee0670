"""The lab's image: Debian 12 (or 13, `gpuinfra lab up --os debian-13`) from debootstrap,
customised, imported into podman, tagged by a hash of its recipe (a changed recipe builds a new
image and recreates the containers). Each release's image is kept: a lab moved from one
release to the other and back rebuilds nothing."""

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
# The releases the lab runs (the distribution key gpuinfra.platforms.distro_key gives) -> the
# suite debootstrap installs.
SUITES = {"debian-12": "bookworm", "debian-13": "trixie"}
DEFAULT_OS = "debian-12"
MIRROR = "http://deb.debian.org/debian"
VARIANT = "minbase"
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "libpam-systemd", "openssh-server", "python3", "sudo",
    "iproute2", "iputils-ping", "ca-certificates", "procps", "kmod", "netbase",
)  # fmt: skip
IMAGE_REPO = "localhost/gpuinfra-lab"


def recipe_tag(customize_script: bytes, os_name: str = DEFAULT_OS) -> str:
    """Image tag keyed by a hash of the recipe: suite, mirror, variant, packages, customize.sh."""
    recipe = json.dumps([SUITES[os_name], MIRROR, VARIANT, sorted(PACKAGES)]).encode()
    return f"{IMAGE_REPO}:{hashlib.sha256(recipe + customize_script).hexdigest()[:12]}"


def ensure_image(podman: Podman, paths: Paths, os_name: str = DEFAULT_OS) -> str:
    """The lab image of ``os_name`` for the current recipe: reused when present, else built
    and imported."""
    tag = recipe_tag(paths.customize.read_bytes(), os_name)
    if podman.ok("image", "exists", tag):
        say(f"image {tag}: reused")
        return tag
    start = time.monotonic()
    say(f"image {tag}: building with debootstrap (about a minute)")
    rootfs = paths.lab / "build" / tag.rsplit(":", 1)[1]
    try:
        debootstrap(rootfs, paths.lab / "build.log", SUITES[os_name])
        customize(rootfs, paths.customize)
        import_rootfs(podman, rootfs, tag)
    finally:
        shutil.rmtree(rootfs.parent, ignore_errors=True)
    say(f"image {tag}: built in {time.monotonic() - start:.0f} s")
    return tag


def debootstrap(rootfs: Path, log: Path, suite: str) -> None:
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.mkdir(parents=True)
    cmd = [
        "debootstrap",
        f"--variant={VARIANT}",
        f"--include={','.join(PACKAGES)}",
        suite,
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


def drop_old_images(podman: Podman, keep: str, customize_script: bytes) -> None:
    """Remove lab images of older recipes (after their containers were recreated); the current
    recipe's image of every release stays."""
    out = podman.run(
        "images",
        "--filter",
        f"reference={IMAGE_REPO}",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        check=False,
    )
    current = {recipe_tag(customize_script, os_name) for os_name in SUITES}
    for tag in set(out.split()) - {keep} - current:
        podman.run("rmi", tag, check=False)
