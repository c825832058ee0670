"""The NVIDIA packages per distribution release, and the exact versions the roles pin by default.

Why every package is pinned to an exact version, and why the pin also goes into apt's
preferences (docs/hardware-reference.md 1.1, 1.3, 1.6, 2):
- Ubuntu: the archive now carries the ``*-535-server`` binaries twice under the same upstream
  version: ``535.309.01-0ubuntu0.24.04.1`` (noble-updates) is the real 535 driver,
  ``535.309.01-0ubuntu0.24.04.2`` (noble-security) is a *transitional* package depending on
  the 580-server driver [ub-535srv-noble]. The same split exists for ``fabric-manager-535`` on
  jammy (``...22.04.1`` real, ``...22.04.2`` transitional). ``apt install x-535-server``
  therefore lands 580; only the exact version keeps 535.
- Debian 12: ``nvidia-smi=535.261.03-1`` alone fails on a host that also has
  bookworm-security (535.309.01-0+deb12u1): its dependencies (``libnvidia-ml1 (= 535.261.03-1)``,
  ``nvidia-alternative``...) are not named on the command line, apt picks their newest version
  and gives up ("unmet dependencies"). An apt preference pinning the whole source package
  (``Package: src:nvidia-graphics-drivers``) at the version fixes every binary it builds.
  Checked with ``apt-get -s install`` against bookworm, bookworm-updates and bookworm-security.
- ``nvidia-persistenced`` is its own source package in Debian's *contrib* with its own version
  (``535.171.04-1~deb12u1``): it is pinned separately.

Versions are defaults: the operator sets the exact version current in their archive or mirror
(see roles/nvidia_driver/README.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuinfra.errors import GpuinfraError

# Driver version per (distribution, branch): what `apt-cache policy` lists as the real driver.
# debian-12: bookworm non-free; bookworm-security has 535.309.01-0+deb12u1.
# ubuntu-24.04: noble-updates (the .2 revision in noble-security is the 580 transitional).
# ubuntu-22.04: jammy-updates, same numbering as noble (fabric-manager-535 is published as
#   535.309.01-0ubuntu0.22.04.1 real / .2 transitional on jammy).
DRIVER_VERSIONS: dict[tuple[str, str], str] = {
    ("debian-12", "535"): "535.261.03-1",
    ("ubuntu-22.04", "535"): "535.309.01-0ubuntu0.22.04.1",
    ("ubuntu-24.04", "535"): "535.309.01-0ubuntu0.24.04.1",
}

# Debian builds nvidia-persistenced from its own source (contrib), versioned apart from the driver.
PERSISTENCED_VERSIONS: dict[str, str] = {"debian-12": "535.171.04-1~deb12u1"}

# Fabric Manager must match the driver's upstream version exactly (docs/hardware-reference.md 1.6).
# Ubuntu: the archive's fabric-manager-<BR> source. Debian: not in Debian's archive; NVIDIA's
# CUDA repository for debian12 names its builds <upstream>-1.
FABRIC_MANAGER_VERSIONS: dict[tuple[str, str], str] = {
    ("debian-12", "535"): "535.261.03-1",
    ("ubuntu-22.04", "535"): "535.309.01-0ubuntu0.22.04.1",
    ("ubuntu-24.04", "535"): "535.309.01-0ubuntu0.24.04.1",
}

# NVIDIA's repository signing keys, pinned by fingerprint: a key fetched from the repository (or
# a site mirror of it) is installed only when its one primary key has this fingerprint, so a
# tampered download or a wrong mirror cannot add a key apt would then trust. Where NVIDIA
# rotates a key, change it here (`gpg --show-keys --with-colons KEYFILE`, `fpr` of the `pub`).
# The apt errors NVIDIA's own issue trackers quote name the long key IDs (the last 16 digits):
# NO_PUBKEY DDCAE044F796ECB0 (toolkit), NO_PUBKEY A4B469963BF863CC (CUDA, "3bf863cc.pub").
SIGNING_KEYS = {
    # https://nvidia.github.io/libnvidia-container/gpgkey (the container toolkit's repository)
    "container-toolkit": "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
    # .../compute/cuda/repos/<distro>/x86_64/3bf863cc.pub (the CUDA repository, Fabric Manager)
    "cuda": "EB693B3035CD5710E231E123A4B469963BF863CC",
}

# NVIDIA Container Toolkit: the four packages NVIDIA's install guide pins together [ctk-install]
# (their version is the container_toolkit role's knob, roles/container_toolkit/defaults.py).
CONTAINER_TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)

_VERSION = re.compile(r"^(?:\d+:)?(?P<upstream>\d+(?:\.\d+)+)(?:-[0-9A-Za-z.+~]+)?$")


@dataclass(frozen=True)
class PinnedPackages:
    """Packages to install at exact versions, and the apt preference pins that hold them.

    packages: package name -> exact version (``apt-get install name=version``).
    pins: apt preferences ``Package:`` subject (a package name or ``src:<source>``) -> version.
    """

    packages: dict[str, str] = field(default_factory=dict)
    pins: dict[str, str] = field(default_factory=dict)

    @property
    def install_args(self) -> list[str]:
        """``name=version`` for each package, in a stable order."""
        return [f"{name}={version}" for name, version in self.packages.items()]


def upstream_version(version: str) -> str:
    """``535.261.03`` from ``535.261.03-1`` (epoch and Debian revision dropped).

    Raises GpuinfraError for a string that is not a package version.
    """
    match = _VERSION.match(version.strip()) if isinstance(version, str) else None
    if not match:
        raise GpuinfraError(f"{version!r} is not a package version (e.g. '535.261.03-1')")
    return match["upstream"]


def check_branch(version: str, branch: str, what: str = "driver") -> None:
    """Raise GpuinfraError unless ``version`` belongs to driver ``branch`` (535.x for 535)."""
    upstream = upstream_version(version)
    if upstream.split(".")[0] != str(branch):
        raise GpuinfraError(f"the pinned {what} version {version} is not in branch {branch}: "
                            f"set a {branch}.x version, or change driver_branch")


def default_driver_version(distro: str, branch: str) -> str:
    """The default pinned driver version, or GpuinfraError naming what is known."""
    try:
        return DRIVER_VERSIONS[(distro, str(branch))]
    except KeyError:
        known = ", ".join(f"{d} {b}" for d, b in DRIVER_VERSIONS)
        raise GpuinfraError(f"no default driver version for {distro} branch {branch} "
                            f"(known: {known}): set nvidia_driver_version") from None


@dataclass(frozen=True)
class DriverRelease:
    """The NVIDIA driver a node gets, resolved once per node and handed to every GPU role
    (the driver itself, Fabric Manager at the same upstream version, the CDI spec)."""

    distro: str  # debian-12, ubuntu-22.04, ...
    branch: str  # 535
    version: str  # exact package version, 535.261.03-1

    @property
    def upstream(self) -> str:
        return upstream_version(self.version)


def driver_release(distro: str, branch: str, version: str | None = None) -> DriverRelease:
    """The release for ``distro``: ``version`` (the site's pin) or the distribution's default
    for ``branch``; GpuinfraError when there is none, or the pin is not in the branch."""
    version = version or default_driver_version(distro, branch)
    check_branch(version, branch)
    return DriverRelease(distro, str(branch), version)


def driver_packages(distro: str, branch: str, version: str, *, full: bool = False,
                    server_stream: bool = True,
                    persistenced_version: str | None = None) -> PinnedPackages:
    """The driver's packages for ``distro`` at ``version``.

    Headless by default (no X/GL stack); ``full`` installs the distribution's full driver
    metapackage. ``server_stream``: Ubuntu's ``-server`` (datacenter) packages, else the
    desktop stream. ``persistenced_version``: Debian's separately versioned daemon.
    """
    check_branch(version, branch)
    if distro == "debian-12":
        names = ["nvidia-driver"] if full else []
        names += ["nvidia-kernel-dkms", "firmware-nvidia-gsp", "nvidia-smi", "libcuda1"]
        packages = dict.fromkeys(names, version)
        pins = {"src:nvidia-graphics-drivers": version}
        daemon = persistenced_version or PERSISTENCED_VERSIONS[distro]
        packages["nvidia-persistenced"] = daemon
        pins["nvidia-persistenced"] = daemon
        return PinnedPackages(packages, pins)
    if distro in ("ubuntu-22.04", "ubuntu-24.04"):
        suffix = f"{branch}-server" if server_stream else str(branch)
        meta = f"nvidia-driver-{suffix}" if full else f"nvidia-headless-{suffix}"
        names = [meta, f"nvidia-utils-{suffix}", f"nvidia-compute-utils-{suffix}"]
        return PinnedPackages(dict.fromkeys(names, version),
                              {f"src:nvidia-graphics-drivers-{suffix}": version})
    raise GpuinfraError(f"no driver package table for {distro}")


def fabric_manager_packages(distro: str, branch: str, version: str) -> PinnedPackages:
    """``nvidia-fabricmanager-<branch>`` at ``version`` (which must match the driver's)."""
    check_branch(version, branch, what="Fabric Manager")
    name = f"nvidia-fabricmanager-{branch}"
    if distro.startswith("ubuntu-"):
        return PinnedPackages({name: version}, {f"src:fabric-manager-{branch}": version})
    return PinnedPackages({name: version}, {name: version})


def default_fabric_manager_version(distro: str, branch: str) -> str:
    try:
        return FABRIC_MANAGER_VERSIONS[(distro, str(branch))]
    except KeyError:
        raise GpuinfraError(f"no default Fabric Manager version for {distro} branch {branch}: "
                            "set fabric_manager_version") from None


def container_toolkit_packages(version: str) -> PinnedPackages:
    """The toolkit's four packages, all at ``version`` (each pinned by name)."""
    upstream_version(version)  # raises on a malformed version
    packages = dict.fromkeys(CONTAINER_TOOLKIT_PACKAGES, version)
    return PinnedPackages(packages, dict(packages))


def same_upstream(a: str, b: str) -> bool:
    """Whether two package versions carry the same upstream version (FM vs driver)."""
    return upstream_version(a) == upstream_version(b)
