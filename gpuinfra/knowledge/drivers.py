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
    "ubuntu-22.04": {"535": "archive", "550": "archive", "570": "archive", "580": "archive"},
    "ubuntu-24.04": {"535": "archive", "550": "archive", "570": "archive", "580": "archive"},
}

SUPPORTED_BRANCHES: dict[str, tuple[str, ...]] = {
    distro: tuple(sources) for distro, sources in BRANCH_SOURCES.items()
}

SUPPORTED_OS: tuple[str, ...] = tuple(SUPPORTED_BRANCHES)


def supported_branches() -> tuple[str, ...]:
    """Branches supported on every distribution the roles know."""
    sets = [set(v) for v in SUPPORTED_BRANCHES.values()]
    return tuple(sorted(set.intersection(*sets)))


def branch_source(distro: str, branch: str) -> str | None:
    """Where the roles install ``branch`` from on ``distro`` ("archive" or "cuda-repo"), or
    None when they cannot install it there."""
    return BRANCH_SOURCES.get(distro, {}).get(str(branch))
