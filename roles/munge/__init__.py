"""The `munge` role: one MUNGE key for the whole cluster, and munged running on every node.

The key is created once on the head (``mungekey``, from the kernel's random source) unless the
head already has one, which is then kept: a rerun never replaces it. Setting the spec's
``munge_key_rotation`` to a new value (any string, e.g. the date) makes the next deploy create
a new key once. Every other node gets the head's key whenever its own differs, copied at
execution time from the head to the node through this machine's memory: read as the
output of a command on the head, written as the input of a command on the node that creates
it mode 0400 (umask 0277) inside /etc/munge. The key never touches a file outside /etc/munge
(munge:munge, 0700) on any host, nor the machine running pyinfra; it is never put in a command
line and never printed (only its SHA-256 is ever read, to compare). pyinfra's file transfer is
not used for it: with sudo, that stages files in /tmp, readable by other users (a local user
holding the key can forge credentials for any uid, root included). munged restarts only where
the key changed.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pyinfra import host
from pyinfra.api import FactBase, FunctionCommand, QuoteString, StringCommand, deploy, operation
from pyinfra.operations import apt, files, server, systemd

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.boot import BootNeeds, boot_order
from gpuinfra_deploy.ops.remote import sudo_args
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site

KEY = "/etc/munge/munge.key"
KEY_DIR = "/etc/munge"
ROTATION_FILE = "/var/lib/gpuinfra/munge-key-rotation"


class MungeKeyState(FactBase):
    """The MUNGE key's SHA-256 (never the key) and the rotation last applied:
    ``{"digest": "ab12..." or None, "rotation": "2026-11" or None}``."""

    def command(self) -> str:
        return (f"if [ -f {KEY} ]; then sha256sum {KEY} | cut -d' ' -f1; else echo -; fi; "
                f"cat {ROTATION_FILE} 2>/dev/null || echo -")

    def process(self, output: list[str]) -> dict[str, Any]:
        values = [line.strip() for line in output] + ["-", "-"]
        digest, rotation = values[0], values[1]
        return {"digest": None if digest == "-" else digest,
                "rotation": None if rotation == "-" else rotation}


def _rotation_pending(state: dict[str, Any], rotation: str | None) -> bool:
    return rotation is not None and state["rotation"] != rotation


@operation()
def cluster_key(bits: int, rotation: str | None = None):
    """The head's MUNGE key: created when missing, or once per new ``rotation`` value.

    + bits: key size for mungekey (256..8192)
    + rotation: any string; a value different from the last one applied creates a new key
    """
    state = host.get_fact(MungeKeyState)
    if state["digest"] and not _rotation_pending(state, rotation):
        host.noop("the cluster's MUNGE key exists (kept)")
        return
    yield StringCommand("mungekey", "--create", "--force", f"--bits={int(bits)}",
                        f"--keyfile={KEY}")
    yield StringCommand("chown", "munge:munge", KEY, "&&", "chmod", "0400", KEY)
    if rotation is not None:
        yield StringCommand("mkdir", "-p", ROTATION_FILE.rsplit("/", 1)[0], "&&", "printf",
                            "'%s\\n'", QuoteString(rotation), ">", ROTATION_FILE)


# The node's side of the copy: the key arrives base64-encoded on standard input and is written
# by root with umask 0277 (mode 0400 from its first byte) beside the live key, inside the
# 0700 directory, then given to munge and renamed over the live key.
STAGED = f"{KEY}.gpuinfra-new"
INSTALL_KEY = StringCommand("umask", "0277", "&&", "base64", "-d", ">", STAGED, "&&", "chown",
                            "munge:munge", STAGED, "&&", "mv", "-f", STAGED, KEY)
READ_KEY = StringCommand("base64", "-w0", KEY)


def _copy_key(state: Any, host: Any, source: Any) -> None:  # noqa: ARG001 - pyinfra's names
    """Execution time: the head's key into the node's /etc/munge, through memory only (a
    command's output on the head, a command's input on the node; never pyinfra's file
    transfer, which stages files in /tmp under sudo).

    pyinfra passes (state, host) to callbacks whose parameters have exactly those names."""
    target = host
    ok, output = source.run_shell_command(READ_KEY, print_output=False, print_input=False,
                                          **sudo_args(source))
    if not ok:
        raise GpuinfraError(f"munge: cannot read {KEY} on {source.name}: {output.stderr}")
    encoded = output.stdout.strip()
    try:
        if len(base64.b64decode(encoded, validate=True)) < 32:
            raise GpuinfraError(f"munge: {KEY} on {source.name} is too short to be a key")
    except binascii.Error:
        raise GpuinfraError(f"munge: {KEY} on {source.name} could not be read whole") from None
    ok, output = target.run_shell_command(INSTALL_KEY, _stdin=encoded, print_output=False,
                                          print_input=False, **sudo_args(target))
    if not ok:
        raise GpuinfraError(f"munge: installing the key on {target.name} failed: "
                            f"{output.stderr}")


@operation()
def key_from_head(head: Any, rotation: str | None = None):
    """This node's MUNGE key equal to the head's (copied when the SHA-256 differs).

    + head: the pyinfra host holding the cluster's key
    + rotation: the spec's munge_key_rotation (a rotation about to happen on the head means
      this node's key will differ after it, so the copy is planned now)
    """
    source = head.get_fact(MungeKeyState)
    mine = host.get_fact(MungeKeyState)
    if source["digest"] and source["digest"] == mine["digest"] \
            and not _rotation_pending(source, rotation):
        host.noop(f"MUNGE key already the same as {head.name}'s")
        return
    yield FunctionCommand(_copy_key, (head,), {})


@deploy("munge")
def munge(site: Site, node: NodeSpec) -> None:
    rotation = site.spec.munge_key_rotation
    apt.packages(name="Install munge", packages=packages(site, node), no_recommends=True,
                 update=True, cache_time=APT_CACHE_S)
    files.directory(name=f"{KEY_DIR}: munge only (0700)", path=KEY_DIR, user="munge",
                    group="munge", mode="700")
    if node.is_head:
        key = cluster_key(name="The cluster's MUNGE key on the head",
                          bits=node.settings["munge_key_bits"], rotation=rotation)
    else:
        # The spec has exactly one head when Slurm is deployed (checked at the gate).
        key = key_from_head(name="The head's MUNGE key on this node",
                            head=site.host(site.spec.head[0].name), rotation=rotation)
    files.file(name=f"{KEY}: munge:munge 0400", path=KEY, user="munge", group="munge",
               mode="400")
    boot_order([BootNeeds("munge.service", "the network and the clock (its credentials carry "
                          "a timestamp)", ("network-online.target", "time-sync.target"))])
    systemd.service(name="Run munged", service="munge", running=True, enabled=True)
    # Not systemd.service(restarted=True): that restarts only a unit running at plan time, and
    # on a fresh node the package's postinst starts munged with its own key after planning.
    server.shell(name="Restart munged on the new key", commands=["systemctl restart munge.service"],
                 _if=key.did_change)


def packages(site: Site, node: NodeSpec) -> list[str]:
    """MUNGE itself (its key comes from the head after it)."""
    return ["munge"]


def applies(site: Site, node: NodeSpec) -> bool:
    """Slurm nodes: the head and the workers whose node_schedulers include slurm."""
    return "slurm" in node.schedulers


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("munge", munge, applies, needs_head=True, packages=packages)
apply = ROLE.apply
