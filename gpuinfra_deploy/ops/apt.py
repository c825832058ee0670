"""apt operations every role shares: apt made ready (lock wait, interrupted dpkg finished),
archive components, exact-version installs held against upgrades, repository keyrings, and the
one cache age for `apt-get update`.

Each reads facts, computes the difference with the gpuinfra library and yields commands only
for what is missing, saying why otherwise: a converged host gets no command.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.api import FactBase, OperationError, QuoteString, StringCommand, operation
from pyinfra.facts.files import File, FileContents
from pyinfra.operations import apt, files

from gpuinfra.apt.files import apt_conf, apt_preferences
from gpuinfra.apt.keys import KeyringKey, keyring_problem, needs_refresh
from gpuinfra.apt.sources import enable_components
from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.packages import PinnedPackages
from gpuinfra.parsers.aptpolicy import pin_problems
from gpuinfra.text import FileText
from gpuinfra_deploy.facts.apt import AptPolicy, HeldPackages, KeyringKeys
from gpuinfra_deploy.ops.checked import check_script, checked_files, upload_source
from gpuinfra_deploy.templates import text as render_text

# apt lists younger than this are not refreshed (`apt.packages(update=True, cache_time=...)`):
# a rerun within a day does not touch the network.
APT_CACHE_S = 86400


@operation()
def apt_components(path: str, codename: str, components: Sequence[str]):
    """Archive ``components`` enabled on every ``codename`` entry of the apt source ``path``.

    + path: ``/etc/apt/sources.list`` (one-line format) or a deb822 ``*.sources`` file
    + codename: the release (``bookworm``): only its suites are touched
    + components: e.g. ``["contrib", "non-free", "non-free-firmware"]``

    Everything already in the file stays; a missing file is left alone.

    .. code:: python

        apt_components(path="/etc/apt/sources.list", codename="bookworm",
                       components=["non-free", "non-free-firmware"])
    """
    lines = host.get_fact(FileContents, path=path)
    if lines is None:
        host.noop(f"{path} does not exist")
        return
    text = "".join(f"{line}\n" for line in lines)
    wanted = enable_components(path, text, codename, components)
    if wanted == text:
        host.noop(f"{path} already has {' '.join(components)} where {codename} has main")
        return
    yield from files.put._inner(src=StringIO(wanted), dest=path, mode="644")


@operation()
def apt_held(packages: Sequence[str]):
    """``packages`` on hold (``apt-mark hold``), so no upgrade moves them.

    + packages: package names

    .. code:: python

        apt_held(packages=["nvidia-smi", "libcuda1"])
    """
    current = set(host.get_fact(HeldPackages))
    missing = [p for p in packages if p not in current]
    if not missing:
        host.noop(f"already held: {', '.join(packages)}")
        return
    yield StringCommand("apt-mark", "hold", *(QuoteString(p) for p in missing))


def require_available(what: str, pinned: PinnedPackages, knob: str) -> None:
    """Stop before any change when the host's apt lists other versions of a pinned package but
    not the pinned one (the archive moved on), naming what it lists and the knob to set.

    Read at plan time (`apt-cache policy`); packages apt lists no version of yet (their
    component is enabled later in this run) are left to apt.
    """
    problems = pin_problems(host.get_fact(AptPolicy, packages=sorted(pinned.packages)),
                            pinned.packages)
    if problems:
        raise GpuinfraError(f"{what}: this host's apt does not list the pinned version, so the "
                            f"install would fail halfway: {'; '.join(problems)}. Set {knob} to "
                            "a version apt lists (one of the same branch), or point the host "
                            "at a mirror that keeps the pinned one; nothing was changed")


def install_pinned(what: str, pinned: PinnedPackages, pin_file: str):
    """Pin ``pinned`` in apt's preferences, install it at the exact versions, hold it.

    Returns the install operation (it changed: packages were installed or moved).
    ``--allow-change-held-packages`` and downgrades let a changed pin take effect on a host
    where the previous versions are held.
    """
    pins = apt_preferences(pinned.pins, f"{what}: exact versions only")
    files.put(name=f"Pin {what} to exact versions in apt preferences", dest=pin_file,
              src=upload_source(render_text(pins)), mode="644")
    install = apt.packages(name=f"Install {what}", packages=pinned.install_args, update=True,
                           cache_time=APT_CACHE_S, no_recommends=True, allow_downgrades=True,
                           extra_install_args="--allow-change-held-packages")
    apt_held(name=f"Hold {what} against upgrades", packages=list(pinned.packages))
    return install


def keyring_script(url: str, path: str, fingerprint: str, fresh_for_days: int = 0) -> str:
    """Shell: fetch the ASCII-armoured key at ``url`` into a private temporary directory and
    dearmor it into ``path`` only when it holds exactly one primary key whose fingerprint is
    ``fingerprint``; else exit 1 naming what was found (nothing is installed).

    ``fresh_for_days`` (a refresh of a key whose expiry is near): also refuse, installing
    nothing, a fetched key that expires within that many days, naming its expiry and the fix.
    """
    expected = fingerprint.upper()
    refusal = (f"gpuinfra: the signing key at {url} is not the pinned key {expected}: "
               "refused (a tampered download, or a mirror serving another key)")
    primaries = "awk -F: '$1==\"pub\"{p=1;next} $1==\"fpr\"&&p{print $10;p=0}'"
    fresh = ""
    if fresh_for_days:
        stale = (f"gpuinfra: the signing key at {url} ({expected}) still expires within "
                 f"{int(fresh_for_days)} day(s) (expiry, Unix time:)")
        fix = (f"; {path} was left as it was. The publisher has not extended it yet, or a "
               "mirror serves an old copy: point the repository at a current mirror, or ask "
               "the publisher")
        expiry = "awk -F: '$1==\"pub\"{print $7; exit}'"
        fresh = (f"expires=$(gpg --batch --with-colons --show-keys \"$tmp/key\" | {expiry}) && "
                 f"if [ -n \"$expires\" ] && [ \"$expires\" -le "
                 f"$(( $(date +%s) + {int(fresh_for_days) * 86400} )) ]; then "
                 f"echo {shlex.quote(stale)} \"$expires\"{shlex.quote(fix)} >&2; exit 1; fi && ")
    return (
        "tmp=$(mktemp -d) && trap 'rm -rf \"$tmp\"' EXIT && "
        f"curl -fsSL {shlex.quote(url)} -o \"$tmp/key\" && "
        f"found=$(gpg --batch --with-colons --show-keys \"$tmp/key\" | {primaries}) && "
        f"if [ \"$found\" != {shlex.quote(expected)} ]; then "
        f"echo {shlex.quote(refusal)} \"(found: ${{found:-no key}})\" >&2; exit 1; fi && "
        f"{fresh}gpg --batch --yes --dearmor -o {shlex.quote(path)} \"$tmp/key\""
    )


@operation()
def apt_keyring(url: str, path: str, fingerprint: str):
    """The key at ``url`` dearmored into ``path``, installed only when its fingerprint is the
    pinned ``fingerprint`` (see :func:`keyring_script`); fetched when missing, and again when
    a key in it expires within :data:`gpuinfra.apt.keys.REFRESH_DAYS` days. A keyring that
    exists is re-read on every run (gpg on the node): any other key in it fails the host,
    naming the file, both fingerprints and the fix (gpuinfra.apt.keys.keyring_problem).

    + url: where the repository publishes its signing key
    + path: keyring file named by the list file's ``signed-by=``
    + fingerprint: the key's full fingerprint (gpuinfra.knowledge.packages.SIGNING_KEYS)

    .. code:: python

        apt_keyring(url="https://nvidia.github.io/libnvidia-container/gpgkey",
                    path="/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg",
                    fingerprint=SIGNING_KEYS["container-toolkit"])
    """
    if not host.get_fact(File, path=path):
        yield StringCommand(keyring_script(url, path, fingerprint))
        return
    found = host.get_fact(KeyringKeys, path=path)
    if not found["gpg"]:
        raise OperationError(f"{host.name}: gpg is not installed, so the apt keyring {path} "
                             f"cannot be checked against the pinned key {fingerprint}: install "
                             "gnupg (apt-get install gnupg) and deploy again")
    keys = [KeyringKey(k["fingerprint"], k["expires"]) for k in found["keys"]]
    problem = keyring_problem(host.name, path, fingerprint, keys)
    if problem:
        raise OperationError(problem)
    if not needs_refresh(keys, found["now"]):
        host.noop(f"keyring {path} holds the pinned key {fingerprint} "
                  f"({_expiry(keys, found['now'])})")
        return
    # Extended in place by its publisher (pkgs.k8s.io): fetched again before apt refuses it.
    yield StringCommand(keyring_script(url, path, fingerprint, fresh_for_days=1))


def _expiry(keys: Sequence[KeyringKey], now: int) -> str:
    dated = [k.expires for k in keys if k.expires is not None]
    if not dated:
        return "no expiry"
    return f"expires in {(min(dated) - now) // 86400} days"


# ------------------------------------------------------------------------------ apt ready

# Every apt-get of a run waits this long for the dpkg lock instead of failing at once (a
# deploy started while an interrupted one's apt still runs, or unattended-upgrades).
LOCK_TIMEOUT_S = 300
LOCK_CONF = "/etc/apt/apt.conf.d/90gpuinfra-lock-timeout"
APT_STAGE = "/etc/apt/.gpuinfra-staged"
# Package tools whose running instance holds (or will take) apt's and dpkg's locks.
PACKAGE_TOOLS = ("apt", "apt-get", "aptitude", "dpkg", "unattended-upgr")


def lock_timeout_conf(seconds: int = LOCK_TIMEOUT_S) -> FileText:
    """:data:`LOCK_CONF`: apt-get waits ``seconds`` for the dpkg lock (template apt/conf.j2)."""
    return apt_conf([("DPkg::Lock::Timeout", int(seconds))],
                    "Wait for the dpkg lock (an interrupted deploy's apt, unattended-upgrades) "
                    "instead of failing.")


class AptHealth(FactBase):
    """What stands between this run and apt: ``{"interrupted": True}`` when dpkg stopped
    half-way (files in /var/lib/dpkg/updates, or packages `dpkg --audit` names: apt-get then
    refuses with "dpkg was interrupted"), ``"running"``: package tools running now."""

    @staticmethod
    def default() -> dict[str, Any]:
        """What pyinfra answers when the command prints nothing: all clear."""
        return {"interrupted": False, "running": []}

    def command(self) -> str:
        tools = "|".join(PACKAGE_TOOLS)
        return ("if [ -n \"$(ls -A /var/lib/dpkg/updates 2>/dev/null)\" ] || "
                "[ -n \"$(dpkg --audit 2>/dev/null)\" ]; then echo interrupted; fi; "
                f"pgrep -x '{tools}' -l 2>/dev/null | awk '{{print \"running \" $2}}'; true")

    def process(self, output: list[str]) -> dict[str, Any]:
        return {"interrupted": "interrupted" in output,
                "running": sorted({line.split()[1] for line in output
                                   if line.startswith("running ") and len(line.split()) > 1})}


def _wait_for_package_tools(seconds: int) -> str:
    tools = "|".join(PACKAGE_TOOLS)
    message = (f"gpuinfra: apt/dpkg still running after {seconds} s (another deploy, or "
               "unattended-upgrades): wait for it to finish, then deploy again")
    return (f"end=$(( $(date +%s) + {int(seconds)} )); "
            f"while pgrep -x '{tools}' >/dev/null; do "
            f"if [ $(date +%s) -ge $end ]; then echo {shlex.quote(message)} >&2; exit 1; fi; "
            "sleep 2; done")


@operation()
def dpkg_ready(wait_s: int = LOCK_TIMEOUT_S):
    """apt usable: wait (at most ``wait_s``) for running package tools, then finish what an
    interrupted dpkg left (``dpkg --configure -a``, which apt-get asks for by hand).

    + wait_s: the longest wait for another apt/dpkg to finish

    .. code:: python

        dpkg_ready()
    """
    health = host.get_fact(AptHealth)
    if not health["interrupted"] and not health["running"]:
        host.noop("dpkg is not interrupted and no package tool is running")
        return
    if health["running"]:
        yield StringCommand(_wait_for_package_tools(wait_s))
    if health["interrupted"]:
        yield StringCommand("DEBIAN_FRONTEND=noninteractive", "dpkg", "--configure", "-a",
                            "--force-confdef", "--force-confold")


def apt_ready() -> Any:
    """The first apt step of every host: the lock-wait setting (checked by apt-config before it
    goes live), then :func:`dpkg_ready`. Returns the setting's operation."""
    conf = checked_files(
        name=f"apt waits up to {LOCK_TIMEOUT_S} s for the dpkg lock ({LOCK_CONF})",
        files={LOCK_CONF: lock_timeout_conf()}, stage=APT_STAGE,
        check=check_script(f"apt-config -c {APT_STAGE}/{LOCK_CONF.rsplit('/', 1)[1]} dump",
                           "apt", APT_STAGE))
    dpkg_ready(name="dpkg ready: no interrupted install, no running apt")
    return conf
