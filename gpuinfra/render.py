"""Text of the files the GPU roles write: computed here, so it is unit-tested without hosts.

Each function returns a whole file. Values that end up in a file or a command line are
validated first (group and user names, octal modes, URLs): a bad value raises GpuinfraError
naming it, instead of landing on a host.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER, header
from gpuinfra.knowledge.repositories import TOOLKIT_REPO
from gpuinfra.spec.rules import clip, octal_mode, posix_name, url_problem
from gpuinfra.units import unit_file

NOUVEAU_BLACKLIST = "/etc/modprobe.d/blacklist-nouveau.conf"
NVIDIA_OPTIONS = "/etc/modprobe.d/gpuinfra-nvidia-devices.conf"
DEVICE_UDEV_RULE = "/etc/udev/rules.d/70-gpuinfra-nvidia-devices.rules"
PERSISTENCED_DROPIN = "/etc/systemd/system/nvidia-persistenced.service.d/gpuinfra.conf"
PERSISTENCED_BINARY = "/usr/bin/nvidia-persistenced"

TOOLKIT_KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
TOOLKIT_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"

_NAME = posix_name()
_MODE = octal_mode()


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


def check_url(value: str, what: str) -> str:
    """An http(s) URL without a trailing slash, or GpuinfraError (the spec's URL rule)."""
    problem = url_problem(value)
    if problem:
        raise GpuinfraError(f"{what} {clip(value)} is not an http(s) URL: {problem}")
    return value.rstrip("/")


def nouveau_blacklist() -> str:
    """/etc/modprobe.d/blacklist-nouveau.conf (docs/hardware-reference.md 1.2) [cuda-ig]."""
    return HEADER + "blacklist nouveau\noptions nouveau modeset=0\n"


def nvidia_device_options(gid: int, mode: str | int) -> str:
    """Driver options making the driver create /dev/nvidia* as root:<gid> with ``mode``.

    The proprietary driver creates its device files itself (through nvidia-modprobe), with the
    owner, group and mode these options give; udev rules do not see those nodes.
    """
    if not isinstance(gid, int) or isinstance(gid, bool) or gid < 0:
        raise GpuinfraError(f"device group id {gid!r} is not a number: NVreg_DeviceFileGID "
                            "needs the numeric gid")
    return (HEADER + "# /dev/nvidia* owned by root and the GPU group, nobody else.\n"
            f"options nvidia NVreg_DeviceFileUID=0 NVreg_DeviceFileGID={gid} "
            f"NVreg_DeviceFileMode={check_mode(mode)}\n")


def device_udev_rule(group: str, mode: str | int) -> str:
    """A udev rule giving nvidia device nodes that do come through udev the same access."""
    return (HEADER + "# Same access as the driver options in "
            f"{NVIDIA_OPTIONS}, for nodes udev creates.\n"
            f'KERNEL=="nvidia*", OWNER="root", GROUP="{check_name(group, "device group")}", '
            f'MODE="{check_mode(mode)}"\n')


def persistenced_dropin(user: str, group: str) -> str:
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


# The proxy file can hold credentials (http://user:password@proxy:3128): root only, and apt's
# download methods, which run as _apt, get the setting from apt itself, not from the file.
APT_PROXY_MODE = "640"


def apt_proxy_conf(url: str) -> str:
    """/etc/apt/apt.conf.d/95gpuinfra-proxy: apt's HTTP and HTTPS proxy.

    The value lands between quotes in apt's configuration syntax, so it is checked with the
    one URL rule first: a quote, a semicolon or a newline in it would add apt directives
    (which run as root on every node)."""
    problem = url_problem(url, need_port=True)
    if problem:
        raise GpuinfraError(f"apt proxy {clip(url)}: {problem}")
    return (header("//") + f'Acquire::http::Proxy "{url}";\nAcquire::https::Proxy "{url}";\n')


def apt_preferences(pins: Mapping[str, str], why: str) -> str:
    """apt_preferences(5) stanzas holding each subject at its exact version (priority 1001).

    A priority above 1000 makes apt install (or downgrade to) that version and never move off
    it: unattended upgrades included.
    """
    if not pins:
        raise GpuinfraError("no packages to pin")
    stanzas = [f"Package: {subject}\nPin: version {version}\nPin-Priority: 1001\n"
               for subject, version in pins.items()]
    return HEADER + f"# {why}\n" + "\n".join(stanzas)


def origin_preference(url: str, priority: int = 100) -> str:
    """An apt pin lowering everything served from ``url``'s host to ``priority``.

    For NVIDIA's CUDA repository: it also carries driver packages newer than the
    distribution's, which would otherwise replace them on the next upgrade.
    """
    host = urlsplit(check_url(url, "repository URL")).hostname
    return (HEADER + "# Take only what is asked for by name from this repository.\n"
            f"Package: *\nPin: origin {host}\nPin-Priority: {priority}\n")


def toolkit_list(base_url: str | None = None) -> str:
    """The container toolkit's list file: exactly NVIDIA's line, or a mirror of it.

    ``$(ARCH)`` is literal: apt expands it.
    """
    base = check_url(base_url, "nvidia_repo_mirror") if base_url else TOOLKIT_REPO
    return f"deb [signed-by={TOOLKIT_KEYRING}] {base}/stable/deb/$(ARCH) /\n"


def toolkit_key_url(base_url: str | None = None) -> str:
    """Where the toolkit repository's signing key is served (the mirror keeps the layout)."""
    base = check_url(base_url, "nvidia_repo_mirror") if base_url else TOOLKIT_REPO
    return f"{base}/gpgkey"


def flat_repo_list(url: str, keyring: str) -> str:
    """A list file for a flat repository such as NVIDIA's CUDA repo (``deb [...] URL /``)."""
    return f"deb [signed-by={keyring}] {check_url(url, 'repository URL')}/ /\n"
