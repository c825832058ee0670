"""An apt repository keyring on a node, judged against the pinned signing key.

A keyring that exists is judged on every run, not only when it is written: its primary keys
(``gpg --batch --with-colons --show-keys FILE``, read on the node) must be exactly the pinned
fingerprint, and a key whose expiry is near is fetched again. Kubernetes' pkgs.k8s.io key is
extended in place by its publisher (kubernetes/kubernetes#128609): a copy taken before an
extension expires on the node while the published one does not, and ``apt-get update`` then
refuses the repository (EXPKEYSIG) until the file is replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# A key that expires within this many days is fetched again (the fetched copy is installed
# only when it is the pinned key, as on the first install).
REFRESH_DAYS = 30


@dataclass(frozen=True)
class KeyringKey:
    """One primary key of a keyring: its full fingerprint and its expiry (Unix seconds; None:
    it does not expire)."""

    fingerprint: str
    expires: int | None


def parse_show_keys(output: str) -> list[KeyringKey]:
    """The primary keys ``gpg --batch --with-colons --show-keys`` prints (``pub`` records, each
    followed by its ``fpr``; field 7 of ``pub`` is the expiry, field 10 of ``fpr`` the
    fingerprint). Subkeys (``sub``) are not primary keys and are skipped."""
    keys: list[KeyringKey] = []
    expires: int | None = None
    pending = False
    for line in output.splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            pending = True
            raw = fields[6] if len(fields) > 6 else ""
            expires = int(raw) if raw.isascii() and raw.isdigit() else None
        elif fields[0] in ("sub", "ssb", "sec"):
            pending = fields[0] == "sec"
        elif fields[0] == "fpr" and pending and len(fields) > 9:
            keys.append(KeyringKey(fields[9].upper(), expires))
            pending = False
    return keys


def keyring_problem(host: str, path: str, expected: str, keys: Sequence[KeyringKey]) -> str | None:
    """Why the keyring ``path`` on ``host`` is not the pinned key ``expected`` (None: it is):
    the message names the host, the file, both fingerprints and the fix."""
    seen = [k.fingerprint for k in keys]
    if seen == [expected.upper()]:
        return None
    shown = ", ".join(seen) or "no key (not a keyring gpg can read)"
    return (f"{host}: the apt keyring {path} holds {shown}, not the pinned signing key "
            f"{expected.upper()}: apt would trust packages signed by whatever that file holds. "
            f"Check how it got there, remove it (rm {path}) and deploy again: gpuinfra fetches "
            "the key and installs it only when its fingerprint is the pinned one. If the "
            "vendor really rotated its key, change the pinned fingerprint "
            "(gpuinfra.knowledge.packages.SIGNING_KEYS) after checking the new one")


def needs_refresh(keys: Sequence[KeyringKey], now: float, days: int = REFRESH_DAYS) -> bool:
    """Whether a key of the keyring expires within ``days`` of ``now`` (or has expired)."""
    limit = now + days * 86400
    return any(k.expires is not None and k.expires <= limit for k in keys)
