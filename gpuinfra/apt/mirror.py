"""Point a host's apt sources at the site's mirror (offline and mirrored sites).

The distribution's official archive URLs are replaced, token for token, in both formats apt
reads (one-line ``deb URI SUITE ...`` and deb822 ``URIs:``); everything else in the file
(third-party repositories, options, comments) stays as it was. The mirror URL stands for the
main archive; Debian's security archive maps to the same URL with ``-security`` appended (the
layout apt-mirror and aptly produce: ``http://mirror/debian`` and ``http://mirror/debian-security``);
Ubuntu serves its security pocket from the main archive path, so both map to the mirror.
Applying it twice changes nothing.
"""

from __future__ import annotations

import re

# distribution -> [(official archive URL pattern, suffix appended to the mirror URL)]
OFFICIAL_ARCHIVES: dict[str, list[tuple[str, str]]] = {
    "debian": [
        (r"https?://(?:deb|ftp|httpredir)\.debian\.org/debian/?", ""),
        (r"https?://(?:security|deb)\.debian\.org/debian-security/?", "-security"),
    ],
    "ubuntu": [
        (r"https?://(?:[a-z]{2}\.)?archive\.ubuntu\.com/ubuntu/?", ""),
        (r"https?://security\.ubuntu\.com/ubuntu/?", ""),
    ],
}


def point_at_mirror(text: str, distribution: str, mirror: str) -> str:
    """``text`` (a sources file) with the official archive URLs replaced by ``mirror``."""
    mirror = mirror.rstrip("/")
    for pattern, suffix in OFFICIAL_ARCHIVES.get(distribution, []):
        # A function replacement: the mirror is pasted literally, never read as a template
        # (a backslash in it would otherwise add lines or crash on a group reference).
        replacement = mirror + suffix
        text = re.sub(rf"(?<![\w/.-]){pattern}(?=\s|$)", lambda _, r=replacement: r, text,
                      flags=re.MULTILINE)
    return text


def mirror_for(mirrors: dict[str, str], distribution: str) -> str | None:
    """The site's mirror for ``distribution`` ('debian', 'ubuntu'), or its 'default' one."""
    return mirrors.get(distribution) or mirrors.get("default")
