"""The lab's fleet: many light GPU workers for the benchmarks at fleet size (bench/fleet.py).

    gpuinfra lab up --fleet N        the head, the workers, and lab-fleet1..N
    gpuinfra lab down                removes them with the rest

A fleet worker is a lab worker like any other (a container with systemd, sshd and the
replayed hardware of the healthy profiles in turn; in group ``workers``: the deploy and the
verify suite treat it as any host), started from the **fleet image**: the lab image with
every package the deploy installs on a worker already installed. Without it each of N
workers would download and unpack the same driver, Slurm and monitoring packages (about a
gigabyte of writable layer per container, measured on a deployed worker); with it they share
one read-only layer, and a fresh fleet worker's first deploy only configures. The packages
are what the deploy itself would install: `gpuinfra render` of the lab site with fresh
Debian 12 facts, its `apt-get install` commands read (versions left to the archive, as the
deploy's own pins then find them installed). The image is keyed by the lab image and that
list, built once (minutes: the downloads) and reused.

Nothing here is in `make test`: the fleet is for benchmarks.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

from gpuinfra_lab.podman import Podman
from gpuinfra_lab.state import LabError, Paths, say

FLEET_REPO = "localhost/gpuinfra-lab-fleet"
# Every SSH command a fleet worker runs is counted and timed (the benchmarks compare tools by
# it, bench/fleet.py): root's login shell, which sshd runs each command with, runs it with bash,
# then appends a line to this file: when it started and when it ended (the node's clock,
# seconds).
COMMAND_LOG = "/run/gpuinfra-ssh-commands"
COUNTING_SHELL = "/usr/local/bin/gpuinfra-counting-shell"
SHELL_SCRIPT = ("#!/bin/bash\nstart=$EPOCHREALTIME\n/bin/bash \"$@\"\nrc=$?\n"
                f"echo \"$start $EPOCHREALTIME\" >> {COMMAND_LOG}\nexit $rc\n")
# The archive components the nvidia_driver role enables on Debian 12 (its driver is in
# non-free): the image's sources need them to install the driver before the deploy runs.
COMPONENTS = "main contrib non-free non-free-firmware"


def install_args(command: str) -> list[str]:
    """The package arguments (``name`` or ``name=version``) of an ``apt-get ... install ...``
    command, as the deploy's plan prints it; none for any other command."""
    if "apt-get" not in command or " install " not in command:
        return []
    return [word for word in shlex.split(command.split(" install ", 1)[1].split(" && ")[0])
            if not word.startswith("-") and word not in (";", "&&", "||")]


def install_packages(commands: list[str]) -> list[str]:
    """The package names of every ``apt-get ... install ...`` command (versions dropped),
    sorted and unique."""
    return sorted({word.split("=", 1)[0] for command in commands
                   for word in install_args(command)})


def fleet_packages(repo: Path) -> list[str]:
    """What the deploy installs on the lab's workers, from a render of the lab's default site
    (head and the two healthy workers) with fresh Debian 12 facts."""
    from gpuinfra_lab.profiles import plan_hosts

    result = lab_render(repo)
    commands = [c for h in plan_hosts() if "workers" in h.groups
                for c in result.commands.get(h.name, [])]
    return install_packages(commands)


def lab_render(repo: Path) -> Any:
    """``gpuinfra render`` of the lab's default site (head and the two healthy workers) with
    fresh Debian 12 facts: a gpuinfra_deploy.render.Render."""
    from gpuinfra_deploy.render import render_site
    from gpuinfra_lab.profiles import plan_hosts

    with tempfile.TemporaryDirectory(prefix="gpuinfra-fleet-") as tmp:
        inventory = Path(tmp) / "lab.py"  # named lab: group_data/lab.py applies
        hosts = plan_hosts()
        members = {group: [(h.name, _spec(h.profile, i)) for i, h in enumerate(hosts)
                           if group in h.groups] for group in ("head", "workers")}
        lines = [f"{group} = {entries!r}" for group, entries in members.items()]
        inventory.write_text("\n".join(lines) + "\n")
        quiet = logging.getLogger("pyinfra")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # the render's warnings are about a site no one deploys
        try:
            result = render_site(str(inventory), os_name="debian-12",
                                 group_data=str(repo / "group_data"))
        finally:
            quiet.setLevel(level)
    return result


def _spec(profile: str | None, number: int) -> dict:
    from gpuinfra_lab.profiles import PROFILES

    spec = dict(PROFILES[profile].spec) if profile else {}
    spec["node_address"] = f"10.0.0.{10 + number}"  # any address: the render connects nowhere
    return spec


def image_tag(base: str, packages: list[str]) -> str:
    key = hashlib.sha256("\n".join([base, COMPONENTS, SHELL_SCRIPT, *packages]).encode()
                         ).hexdigest()[:12]
    return f"{FLEET_REPO}:{key}"


def ensure_fleet_image(podman: Podman, paths: Paths, base: str) -> str:
    """The fleet image for ``base`` (the lab image) and today's package list: reused when
    present, else built (a container from ``base`` installs the packages, then is committed
    with the lab image's command, /sbin/init)."""
    packages = fleet_packages(paths.repo)
    tag = image_tag(base, packages)
    if podman.ok("image", "exists", tag):
        say(f"fleet image {tag}: reused ({len(packages)} packages)")
        return tag
    start = time.monotonic()
    say(f"fleet image {tag}: installing {len(packages)} packages into the lab image "
        "(minutes: the downloads)")
    builder = f"gpuinfra-fleet-build-{paths.lab_id}"
    podman.run("rm", "-f", builder, check=False)
    script = ("set -e; export DEBIAN_FRONTEND=noninteractive; "
              f"sed -i 's/ main$/ {COMPONENTS}/' /etc/apt/sources.list; "
              "apt-get update -q >/dev/null; "
              "apt-get install -y -q --no-install-recommends "
              + " ".join(shlex.quote(p) for p in packages) + " >/dev/null; apt-get clean; "
              f"printf %s {shlex.quote(SHELL_SCRIPT)} > {COUNTING_SHELL}; "
              f"chmod 755 {COUNTING_SHELL}; echo {COUNTING_SHELL} >> /etc/shells; "
              f"usermod -s {COUNTING_SHELL} root")
    try:
        podman.run("run", "--name", builder, "--entrypoint", "sh", base, "-c", script)
        podman.run("commit", "--change", "ENTRYPOINT=[]", "--change", "CMD=/sbin/init",
                   builder, tag)
    except LabError as exc:
        raise LabError(f"fleet image: installing the workers' packages failed: {exc}") from None
    finally:
        podman.run("rm", "-f", builder, check=False)
    say(f"fleet image {tag}: built in {time.monotonic() - start:.0f} s")
    return tag


# Every container's systemd, journald, logind and path units take inotify instances of this
# machine's kernel, counted for root across all containers: the default 128 ran out at 13 lab
# hosts ("gpuinfra-oci-conf.path: Failed to enter waiting state: Too many open files").
HOST_LIMITS = {"fs/inotify/max_user_instances": 8192, "fs/inotify/max_user_watches": 1048576}


def raise_host_limits(proc_sys: Path = Path("/proc/sys")) -> None:
    """This machine's kernel limits the fleet needs, raised where lower (until its reboot)."""
    for key, minimum in HOST_LIMITS.items():
        path = proc_sys / key
        current = int(path.read_text().split()[0])
        if current < minimum:
            path.write_text(f"{minimum}\n")
            say(f"{key.replace('/', '.')}: {current} -> {minimum} on this machine (the fleet's "
                "containers share its kernel)")


def drop_old_fleet_images(podman: Podman, keep: str | None) -> None:
    out = podman.run("images", "--filter", f"reference={FLEET_REPO}", "--format",
                     "{{.Repository}}:{{.Tag}}", check=False)
    for tag in set(out.split()) - {keep}:
        podman.run("rmi", tag, check=False)
