"""NVIDIA driver branches: which exist, which this toolkit's roles can install, and where.

Sources: docs/hardware-reference.md 1.1 (Ubuntu `nvidia-*-535[-server]` packages, and the
pitfall that `*-535-server` is now transitional to 580 unless pinned) [ub-535srv-jammy]
[ub-535srv-noble]; 1.3 (Debian 12 non-free carries 535.261.03, security 535.309.01)
[deb-dkms-bookworm].
"""

from __future__ import annotations

# Datacenter branches NVIDIA has published for Linux (production and new-feature).
KNOWN_BRANCHES: tuple[str, ...] = (
    "450", "460", "470", "510", "515", "520", "525", "530", "535", "545", "550", "555", "560",
    "565", "570", "575", "580",
)

# Branches the roles can install today, per distribution release.
SUPPORTED_BRANCHES: dict[str, tuple[str, ...]] = {
    "debian-12": ("535",),
    "ubuntu-22.04": ("535",),
    "ubuntu-24.04": ("535",),
}

SUPPORTED_OS: tuple[str, ...] = tuple(SUPPORTED_BRANCHES)


def supported_branches() -> tuple[str, ...]:
    """Branches supported on every distribution the roles know."""
    sets = [set(v) for v in SUPPORTED_BRANCHES.values()]
    return tuple(sorted(set.intersection(*sets)))
