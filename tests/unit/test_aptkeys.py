"""gpuinfra.apt.keys: an existing apt keyring is judged on every run (its primary keys must be
exactly the pinned one), and a key whose expiry is near is fetched again."""

from __future__ import annotations

import pytest

from gpuinfra.apt.keys import KeyringKey, keyring_problem, needs_refresh, parse_show_keys
from gpuinfra.knowledge.packages import SIGNING_KEYS

K8S = SIGNING_KEYS["kubernetes"]
DAY = 86400
NOW = 1_780_000_000

# What `gpg --batch --with-colons --show-keys` prints for a keyring with one primary key and a
# subkey (the shape of gpg 2.2's records: pub, fpr, uid, sub, fpr).
SHOW_KEYS = f"""pub:-:2048:1:234654DA9A296436:1690000000:{NOW + 10 * DAY}::-:::scESC::::::23::0:
fpr:::::::::{K8S}:
uid:-::::1690000000::AAAA::isv:kubernetes OBS Project::::::::::0:
sub:-:2048:1:1111111111111111:1690000000:::::e::::::23:
fpr:::::::::0000000000000000000000001111111111111111:
"""


def test_primary_keys_with_their_expiry_and_not_subkeys():
    assert parse_show_keys(SHOW_KEYS) == [KeyringKey(K8S, NOW + 10 * DAY)]
    no_expiry = SHOW_KEYS.replace(f":{NOW + 10 * DAY}::", "::")
    assert parse_show_keys(no_expiry) == [KeyringKey(K8S, None)]
    assert parse_show_keys("") == []


def test_the_pinned_key_alone_passes():
    assert keyring_problem("node1", "/etc/apt/keyrings/k.gpg", K8S.lower(),
                           [KeyringKey(K8S, None)]) is None


@pytest.mark.parametrize("keys", [[KeyringKey("A" * 40, None)],
                                  [KeyringKey(K8S, None), KeyringKey("B" * 40, None)], []])
def test_another_key_names_host_file_both_fingerprints_and_the_fix(keys):
    message = keyring_problem("node1", "/etc/apt/keyrings/k.gpg", K8S, keys)
    assert message is not None
    for part in ("node1", "/etc/apt/keyrings/k.gpg", K8S, "rm /etc/apt/keyrings/k.gpg",
                 "deploy again"):
        assert part in message
    for key in keys:
        assert key.fingerprint in message
    if not keys:
        assert "no key" in message


def test_refresh_when_the_expiry_is_near_or_past():
    assert not needs_refresh([KeyringKey(K8S, None)], NOW)
    assert not needs_refresh([KeyringKey(K8S, NOW + 31 * DAY)], NOW)
    assert needs_refresh([KeyringKey(K8S, NOW + 29 * DAY)], NOW)
    assert needs_refresh([KeyringKey(K8S, NOW - DAY)], NOW)
