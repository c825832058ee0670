"""NVIDIA driver branches: which exist, which this toolkit's roles can install, and where from.

Sources:
- Branches published for Linux datacenter GPUs: NVIDIA's "Supported Drivers and CUDA Toolkit
  Versions" (R535 and R580 long-term support branches, R595 production branch, R610 new feature
  branch), the MIG user guide's v590 and v610 editions, packages.ubuntu.com (fabric-manager-590,
  fabric-manager-595, nvidia-fabricmanager-dev-610, nvidia-headless-590-server).
- Ubuntu 22.04 and 24.04 carry the datacenter ("-server") streams 535, 550, 570 and 580 in the
  archive (packages.ubuntu.com: source packages nvidia-graphics-drivers-<BR>-server in jammy
  and noble, with fabric-manager-<BR> beside each) [ub-535srv-jammy] [ub-535srv-noble].
- Debian 12 carries 535 only (bookworm non-free 535.261.03-1, bookworm-security 535.309.01,
  bookworm-backports 535.216.03; `apt-cache policy nvidia-kernel-dkms`, docs/hardware-reference.md
  1.3); the later branches come from NVIDIA's CUDA repository for debian12, the repository the
  fabric_manager role already takes Fabric Manager from.
- Debian 13 (trixie) carries 535 and 550 only (trixie non-free Packages, 2026-12-07): 535 as
  its own source, nvidia-graphics-drivers-tesla-535 535.274.02-1~deb13u1 (binaries
  nvidia-tesla-535-*), 550 as Debian's default driver, nvidia-graphics-drivers 550.163.01-2.
"""

from __future__ import annotations

# Datacenter branches NVIDIA has published for Linux (production, long-term and new-feature).
# 615 and 620: NVIDIA's "Supported Drivers and CUDA Toolkit Versions" has a 615 and a 620
# edition (R620 long-term support branch, end of life September 2029), and the MIG user guide a
# 620 edition (knowledge audit 9735030 row 60). Known, not installable by these roles yet.
KNOWN_BRANCHES: tuple[str, ...] = (
    "450", "460", "470", "510", "515", "520", "525", "530", "535", "545", "550", "555", "560",
    "565", "570", "575", "580", "590", "595", "610", "615", "620",
)

# The mission's default. 535 is end of life (below): validate warns, naming SUPPORTED_ALTERNATIVE.
DEFAULT_BRANCH = "535"

# Branches past NVIDIA's end of life -> when it ended: "Supported Drivers and CUDA Toolkit
# Versions" (615 edition): "R535 ... LTSB ... End of life June 2026"; the 620 edition lists only
# R580, R595 and R620 (knowledge audit 9735030 row 59). No more security fixes for them.
END_OF_LIFE: dict[str, str] = {"535": "June 2026"}
# The supported branch the roles install everywhere, to name in that warning: R580, long-term
# support until June 2028 (same page).
SUPPORTED_ALTERNATIVE = "580"

# Branches the roles can install, per distribution release, and where each comes from:
# "archive" (the distribution's own) or "cuda-repo" (NVIDIA's CUDA repository for it).
BRANCH_SOURCES: dict[str, dict[str, str]] = {
    "debian-12": {"535": "archive", "550": "cuda-repo", "570": "cuda-repo", "580": "cuda-repo"},
    # Both from trixie's archive (module docstring). 570/580: not installed on trixie (NARROWER).
    "debian-13": {"535": "archive", "550": "archive"},
    "ubuntu-22.04": {"535": "archive", "550": "archive", "570": "archive", "580": "archive"},
    "ubuntu-24.04": {"535": "archive", "550": "archive", "570": "archive", "580": "archive"},
}

SUPPORTED_BRANCHES: dict[str, tuple[str, ...]] = {
    distro: tuple(sources) for distro, sources in BRANCH_SOURCES.items()
}

SUPPORTED_OS: tuple[str, ...] = tuple(SUPPORTED_BRANCHES)

# Releases where the roles install fewer branches than everywhere else, and what to do there.
# The spec's gate (supported_branches) does not narrow every site to them: driver_release
# refuses another branch on such a host, with this text, before any change.
# NVIDIA's CUDA repository for debian13 is in public use (scripts install
# .../compute/cuda/repos/debian13/x86_64/cuda-keyring_1.1-1_all.deb), but it is signed by another
# key (8793F200.pub, not the 3bf863cc.pub whose fingerprint SIGNING_KEYS pins), and neither that
# key's fingerprint nor the repository's index could be read from NVIDIA here (2026-12-07):
# UNVERIFIED, so 570 and 580 are not wired for trixie.
NARROWER: dict[str, str] = {
    "debian-13": ("Debian 13 (trixie) carries 535 as nvidia-tesla-535-* (source "
                  "nvidia-graphics-drivers-tesla-535) and 550 as Debian's default nvidia-driver; "
                  "570 and 580 would come from NVIDIA's CUDA repository for debian13, which "
                  "these roles do not add yet (its signing key is not verified). Set "
                  "driver_branch = '550' (or '535', end of life), or run the nodes that need "
                  "570/580 on Debian 12 or Ubuntu 24.04"),
}


def supported_branches() -> tuple[str, ...]:
    """Branches supported on every distribution the roles know (NARROWER ones aside: their
    hosts refuse the others at plan time)."""
    sets = [set(v) for d, v in SUPPORTED_BRANCHES.items() if d not in NARROWER]
    return tuple(sorted(set.intersection(*sets)))


def branch_source(distro: str, branch: str) -> str | None:
    """Where the roles install ``branch`` from on ``distro`` ("archive" or "cuda-repo"), or
    None when they cannot install it there."""
    return BRANCH_SOURCES.get(distro, {}).get(str(branch))
