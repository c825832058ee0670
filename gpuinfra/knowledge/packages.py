"""The NVIDIA packages per distribution release, and the exact versions the roles pin by default.

Why every package is pinned to an exact version, and why the pin also goes into apt's
preferences (docs/hardware-reference.md 1.1, 1.3, 1.6, 2):
- Ubuntu: the archive carries the ``*-535-server`` binaries twice under the same upstream
  version: ``535.309.01-0ubuntu0.24.04.1`` is the real 535 driver, ``...24.04.2`` (noble-security,
  and in a later snapshot noble-updates too) is a *transitional* package depending on the
  580-server driver [ub-535srv-noble]; jammy has the same split (``...22.04.1`` in jammy-updates,
  ``...22.04.2`` transitional in jammy-security). ``apt install x-535-server`` therefore lands
  580; only the exact version keeps 535, and only while a pocket still lists it: the roles read
  ``apt-cache policy`` on the host before touching it and stop, naming what apt lists, when the
  pinned version is not there (gpuinfra_deploy/ops/apt.py).
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
from gpuinfra.knowledge.drivers import NARROWER, SUPPORTED_BRANCHES, branch_source
from gpuinfra.knowledge.gpus import GpuModel

# Driver version per (distribution, branch): what `apt-cache policy` lists as the real driver.
# debian-12 535: bookworm non-free (bookworm-security has 535.309.01-0+deb12u1).
# debian-12 550/570/580: NVIDIA's CUDA repository for debian12, which names its builds
#   <upstream>-1 (as its nvidia-fabricmanager-535 535.261.03-1); inferred upstreams: the
#   releases Ubuntu carries (below). The repository index was not reachable from here: the
#   plan-time check (gpuinfra_deploy/ops/apt.py require_available) names what the host's apt
#   lists instead.
# ubuntu-24.04 535: noble-updates ...24.04.1 (the .2 revision in noble-security, and by now in
#   noble-updates too, is the 580 transitional: TRANSITIONAL below, risk R3 of the knowledge
#   audit: the .1 build may be gone from the archive's index; the role then fails before any
#   change and names the version apt does list).
# ubuntu-22.04 535: jammy-updates, same numbering (...22.04.2 in jammy-security: transitional).
# ubuntu-24.04 550/570/580: packages.ubuntu.com source pages (noble, [security]):
#   nvidia-graphics-drivers-550-server 550.163.01-0ubuntu0.24.04.1,
#   nvidia-graphics-drivers-570-server 570.211.01-0ubuntu1.24.04.1,
#   nvidia-graphics-drivers-580-server 580.173.02-0ubuntu0.24.04.1.
# ubuntu-22.04 570: packages.ubuntu.com source jammy 570.211.01-0ubuntu1.22.04.1; 550/580:
#   inferred (the noble upload's upstream with the jammy suffix).
# UNVERIFIED (knowledge audit 9735030 row 62): seen in public use: 580.173.02-0ubuntu0.24.04.1,
#   nvidia-driver-550-server=550.163.01-0ubuntu0.24.04.1, 550.163.01-0ubuntu0.22.04.1; the
#   570.211.01-0ubuntu1.<rel>.1 revisions were not found outside packages.ubuntu.com's pages.
#   The role's apt-cache policy gate stops before any change when a pin is absent.
# UNVERIFIED (knowledge audit 9735030 row 63): Debian 12 550/570/580 from NVIDIA's CUDA repository
# under Debian's package names at <upstream>-1: the repository index was not readable; NVIDIA's
# Debian guide installs nvidia-driver-cuda + nvidia-kernel-open-dkms instead, and a third-party note
# says its nvidia-driver-cuda conflicts with nvidia-smi. The same gate stops before change when the
# names or versions are absent.
# debian-13 535: trixie non-free Packages, 2026-12-07: nvidia-tesla-535-* 535.274.02-1~deb13u1
#   (source nvidia-graphics-drivers-tesla-535; firmware-nvidia-tesla-535-gsp in
#   non-free-firmware). debian-13 550: the same index, nvidia-graphics-drivers 550.163.01-2
#   (firmware-nvidia-gsp in non-free-firmware). Neither in trixie-security or trixie-updates.
DRIVER_VERSIONS: dict[tuple[str, str], str] = {
    ("debian-12", "535"): "535.261.03-1",
    ("debian-12", "550"): "550.163.01-1",
    ("debian-12", "570"): "570.211.01-1",
    ("debian-12", "580"): "580.173.02-1",
    ("debian-13", "535"): "535.274.02-1~deb13u1",
    ("debian-13", "550"): "550.163.01-2",
    ("ubuntu-22.04", "535"): "535.309.01-0ubuntu0.22.04.1",
    ("ubuntu-22.04", "550"): "550.163.01-0ubuntu0.22.04.1",
    ("ubuntu-22.04", "570"): "570.211.01-0ubuntu1.22.04.1",
    ("ubuntu-22.04", "580"): "580.173.02-0ubuntu0.22.04.1",
    ("ubuntu-24.04", "535"): "535.309.01-0ubuntu0.24.04.1",
    ("ubuntu-24.04", "550"): "550.163.01-0ubuntu0.24.04.1",
    ("ubuntu-24.04", "570"): "570.211.01-0ubuntu1.24.04.1",
    ("ubuntu-24.04", "580"): "580.173.02-0ubuntu0.24.04.1",
}

# Versions that carry a branch's name but install another branch: Ubuntu rebuilt the
# *-535-server binaries as transitional packages depending on *-580-server
# (packages.ubuntu.com/source/noble-updates/libs/nvidia-graphics-drivers-535-server and
# .../jammy/libs/...: 535.309.01-0ubuntu0.<release>.2, every binary "(transitional package)").
# The 550 branch the same way (knowledge audit 9735030 row 61), ``550.163.01-0ubuntu0.<rel>.2``:
# public captures: jammy `apt-cache policy nvidia-driver-550 nvidia-driver-550-server` ->
# "Candidate: 550.163.01-0ubuntu0.22.04.2" for both, and installing nvidia-driver-550 at it left
# nvidia-driver-580, nvidia-dkms-580 and a 580 kernel module; noble `dpkg -l` after installing
# nvidia-driver-550: libnvidia-cfg1-550 550.163.01-0ubuntu0.24.04.2 beside libnvidia-cfg1-580,
# and a host listing nvidia-driver-550 550.163.01-0ubuntu0.24.04.2 installed beside
# nvidia-driver-580 580.173.02-0ubuntu0.24.04.1 with a 580 kernel module. The -server stream:
# the same candidate revision (jammy capture above), inferred to be transitional as 535-server.
TRANSITIONAL: dict[tuple[str, str], dict[str, str]] = {
    ("ubuntu-24.04", "535"): {"535.309.01-0ubuntu0.24.04.2": "580"},
    ("ubuntu-22.04", "535"): {"535.309.01-0ubuntu0.22.04.2": "580"},
    ("ubuntu-24.04", "550"): {"550.163.01-0ubuntu0.24.04.2": "580"},
    ("ubuntu-22.04", "550"): {"550.163.01-0ubuntu0.22.04.2": "580"},
}

# Debian builds nvidia-persistenced from its own source (contrib), versioned apart from the driver.
# NVIDIA's CUDA repository builds it with each driver release (inferred: same <upstream>-1).
# Trixie: contrib Packages, 2026-12-07: nvidia-persistenced 550.163.01-1, which depends on
# ``libnvidia-cfg1 | libnvidia-tesla-535-cfg1 | ...``: the one daemon serves both branches.
PERSISTENCED_VERSIONS: dict[str, str] = {"debian-12": "535.171.04-1~deb12u1",
                                         "debian-13": "550.163.01-1"}

# Debian's package names per (release, branch), where a branch is not built under Debian's
# plain names: trixie builds 535 from its own source with every binary renamed
# (trixie non-free Packages, 2026-12-07: nvidia-tesla-535-kernel-dkms, nvidia-tesla-535-smi,
# libnvidia-tesla-535-cuda1, libnvidia-tesla-535-cfg1, nvidia-tesla-535-driver;
# firmware-nvidia-tesla-535-gsp in non-free-firmware). No open kernel modules for it: trixie's
# nvidia-open-kernel-dkms (contrib, source nvidia-open-gpu-kernel-modules) is 550.163.01-2 only.
# libnvidia-tesla-535-cfg1 is named because nvidia-persistenced's first alternative,
# libnvidia-cfg1, is the 550 build: apt would pick it.
DEBIAN_NAMES: dict[tuple[str, str], dict[str, str | None]] = {
    ("debian-13", "535"): {
        "source": "nvidia-graphics-drivers-tesla-535", "driver": "nvidia-tesla-535-driver",
        "kernel": "nvidia-tesla-535-kernel-dkms", "open_kernel": None,
        "firmware": "firmware-nvidia-tesla-535-gsp", "smi": "nvidia-tesla-535-smi",
        "cuda": "libnvidia-tesla-535-cuda1", "cfg": "libnvidia-tesla-535-cfg1",
    },
}
_DEBIAN_PLAIN: dict[str, str | None] = {
    "source": "nvidia-graphics-drivers", "driver": "nvidia-driver",
    "kernel": "nvidia-kernel-dkms", "open_kernel": "nvidia-open-kernel-dkms",
    "firmware": "firmware-nvidia-gsp", "smi": "nvidia-smi", "cuda": "libcuda1", "cfg": None,
}

# Fabric Manager must match the driver's upstream version exactly (docs/hardware-reference.md 1.6).
# Ubuntu uploads fabric-manager-<BR> with the same version string as the driver
# (packages.ubuntu.com: 535.309.01-0ubuntu0.22.04.1 / .24.04.1, fabric-manager-550
# 550.163.01-0ubuntu0.24.04.1, fabric-manager-570 570.211.01-0ubuntu1.22.04.1 / .24.04.1);
# Debian: not in Debian's archive; NVIDIA's CUDA repository for debian12 names its builds
# <upstream>-1. So the default is the driver's own version everywhere.
FABRIC_MANAGER_VERSIONS: dict[tuple[str, str], str] = dict(DRIVER_VERSIONS)

# Repository signing keys (NVIDIA's, Grafana's), pinned by fingerprint: a key fetched from the
# repository (or a site mirror of it) is installed only when its one primary key has this
# fingerprint, so a tampered download or a wrong mirror cannot add a key apt would then trust.
# Where a vendor rotates a key, change it here (`gpg --show-keys --with-colons KEYFILE`, `fpr`
# of the `pub`).
# The apt errors NVIDIA's own issue trackers quote name the long key IDs (the last 16 digits):
# NO_PUBKEY DDCAE044F796ECB0 (toolkit), NO_PUBKEY A4B469963BF863CC (CUDA, "3bf863cc.pub").
SIGNING_KEYS = {
    # https://nvidia.github.io/libnvidia-container/gpgkey (the container toolkit's repository)
    "container-toolkit": "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
    # .../compute/cuda/repos/<distro>/x86_64/3bf863cc.pub (the CUDA repository, Fabric Manager)
    "cuda": "EB693B3035CD5710E231E123A4B469963BF863CC",
    # https://pkgs.k8s.io/core:/stable:/v1.<minor>/deb/Release.key: one key (isv:kubernetes OBS
    # Project) for every minor, its expiry extended in place (kubernetes/kubernetes#128609)
    "kubernetes": "DE15B14486CD377B9E876E1A234654DA9A296436",
    # https://apt.grafana.com/gpg.key: the one key "Grafana Labs <engineering@grafana.com>"
    # (rsa3072, 2023; apt's EXPKEYSIG/NO_PUBKEY name it 963FA27710458545). gpg-full.key beside
    # it also carries the revoked predecessor: never that file.
    "grafana": "B53AE77BADB630A683046005963FA27710458545",
}

# NVIDIA Container Toolkit: the four packages NVIDIA's install guide pins together [ctk-install]
# (their version is the container_toolkit role's knob,
# roles/container_toolkit/defaults.py).
CONTAINER_TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)

_VERSION = re.compile(r"^(?:[0-9]+:)?(?P<upstream>[0-9]+(?:\.[0-9]+)+)(?:-[0-9A-Za-z.+~]+)?$")


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
    # NVIDIA's CUDA repository the driver comes from (None: the distribution's archive), and
    # its signing key; Fabric Manager then comes from the same repository.
    repo: str | None = None
    repo_key: str | None = None

    @property
    def upstream(self) -> str:
        return upstream_version(self.version)


def driver_release(distro: str, branch: str, version: str | None = None) -> DriverRelease:
    """The release for ``distro``: ``version`` (the site's pin) or the distribution's default
    for ``branch``; GpuinfraError when the roles cannot install the branch there, when there is
    no version, when the pin is not in the branch, or when it is a transitional package."""
    branch = str(branch)
    if branch_source(distro, branch) is None:
        installable = ", ".join(SUPPORTED_BRANCHES.get(distro, ())) or "none"
        why = NARROWER.get(distro) or "set driver_branch to one of those"
        raise GpuinfraError(f"driver_branch {branch} cannot be installed on {distro} by these "
                            f"roles (they install {installable} there): {why}")
    version = version or default_driver_version(distro, branch)
    check_branch(version, branch)
    other = TRANSITIONAL.get((distro, branch), {}).get(version)
    if other is not None:
        raise GpuinfraError(f"the pinned driver version {version} is a transitional package "
                            f"that installs the {other} driver, not {branch}: set "
                            f"driver_branch = '{other}', or pin a real {branch} build your "
                            "mirror still carries")
    return DriverRelease(distro, branch, version)


def open_modules_for(model: GpuModel | None, setting: bool | None) -> bool:
    """Whether to install NVIDIA's open kernel modules: ``setting`` when given, else what the
    model needs; GpuinfraError when the setting cannot drive the model."""
    needs_open = bool(model and model.open_modules)
    if setting is None:
        return needs_open
    if needs_open and not setting:
        raise GpuinfraError(f"{model.key} runs only with NVIDIA's open kernel modules "
                            "(driver installation guide, Kernel Modules): set "
                            "nvidia_driver_open_modules to True or None")
    if setting and model is not None and model.max_branch is not None:
        raise GpuinfraError(f"{model.key} (Volta) cannot run the open kernel modules (Turing "
                            "and newer only): set nvidia_driver_open_modules to False or None")
    return setting


def driver_packages(distro: str, branch: str, version: str, *, full: bool = False,
                    server_stream: bool = True, persistenced_version: str | None = None,
                    open_modules: bool = False) -> PinnedPackages:
    """The driver's packages for ``distro`` at ``version``.

    Headless by default (no X/GL stack); ``full`` installs the distribution's full driver
    metapackage. ``server_stream``: Ubuntu's ``-server`` (datacenter) packages, else the
    desktop stream. ``persistenced_version``: Debian's separately versioned daemon.
    ``open_modules``: NVIDIA's open kernel modules (Ubuntu's ``-open`` metapackages, Debian's
    ``nvidia-open-kernel-dkms``, the ``nvidia-kernel-open-dkms`` of NVIDIA's CUDA repository).
    """
    check_branch(version, branch)
    if distro in ("debian-12", "debian-13"):
        return _debian_packages(distro, branch, version, full, persistenced_version,
                                open_modules)
    if distro in ("ubuntu-22.04", "ubuntu-24.04"):
        suffix = f"{branch}-server" if server_stream else str(branch)
        meta = f"nvidia-driver-{suffix}" if full else f"nvidia-headless-{suffix}"
        # The -open metapackages are built from the same source (packages.ubuntu.com:
        # nvidia-headless-<BR>-server-open, nvidia-dkms-<BR>-server-open).
        names = [meta + ("-open" if open_modules else ""), f"nvidia-utils-{suffix}",
                 f"nvidia-compute-utils-{suffix}"]
        return PinnedPackages(dict.fromkeys(names, version),
                              {f"src:nvidia-graphics-drivers-{suffix}": version})
    raise GpuinfraError(f"no driver package table for {distro}")


def _debian_packages(distro: str, branch: str, version: str, full: bool,
                     persistenced_version: str | None, open_modules: bool) -> PinnedPackages:
    """Debian's package names (DEBIAN_NAMES where a branch has its own), from Debian's archive
    or NVIDIA's CUDA repository, which builds the same names from the same sources at
    <upstream>-1 (inferred: not checked against its index) and builds nvidia-persistenced with
    each release.

    Open kernel modules: Debian builds them from their own source package
    (nvidia-open-gpu-kernel-modules, contrib) as ``nvidia-open-kernel-dkms`` at the driver's
    version (`apt-cache policy`, tests/fixtures/apt: 535.261.03-1 in bookworm contrib;
    ``apt-get -s install`` with both sources pinned resolves); NVIDIA's CUDA repository names
    the package ``nvidia-kernel-open-dkms`` (its driver installation guide, compute-only
    install; not checked against its index).
    """
    names = DEBIAN_NAMES.get((distro, branch), _DEBIAN_PLAIN)
    from_archive = branch_source(distro, branch) == "archive"
    if open_modules and names["open_kernel"] is None:
        raise GpuinfraError(f"{distro} has no open kernel modules for driver branch {branch} "
                            f"(only for {', '.join(_open_branches(distro))}): set "
                            "driver_branch to one of those, or nvidia_driver_open_modules "
                            "to False where the GPUs run the proprietary modules")
    if open_modules:
        kernel = names["open_kernel"] if from_archive else "nvidia-kernel-open-dkms"
    else:
        kernel = names["kernel"]
    listed = [names["driver"]] if full else []
    listed += [kernel, names["firmware"], names["smi"], names["cuda"], names["cfg"]]
    packages = dict.fromkeys((n for n in listed if n), version)
    pins = {f"src:{names['source']}": version}
    if open_modules:
        pins["src:nvidia-open-gpu-kernel-modules"] = version
    daemon = persistenced_version or (PERSISTENCED_VERSIONS[distro] if from_archive
                                      else version)
    packages["nvidia-persistenced"] = daemon
    pins["nvidia-persistenced"] = daemon
    return PinnedPackages(packages, pins)


def _open_branches(distro: str) -> list[str]:
    return [b for b in SUPPORTED_BRANCHES.get(distro, ())
            if DEBIAN_NAMES.get((distro, b), _DEBIAN_PLAIN)["open_kernel"]]


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
