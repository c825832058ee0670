"""Repository signing keys are pinned: the keyring script installs only the pinned key.

Run for real: gpg makes two keys in a private home, curl fetches them from file:// URLs, and
the role's shell (gpuinfra_deploy/ops/apt.py keyring_script) must install the one whose fingerprint
is pinned and refuse the other, installing nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuinfra.apt.keys import KeyringKey, keyring_problem, needs_refresh
from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra_deploy.facts.apt import KeyringKeys
from gpuinfra_deploy.ops.apt import keyring_script

pytestmark = pytest.mark.skipif(not (shutil.which("gpg") and shutil.which("curl")),
                                reason="needs gpg and curl")


def make_key(home: Path, name: str, expire: str = "never") -> tuple[Path, str]:
    """(an armoured public key file, its fingerprint), made with a throw-away gpg home;
    ``expire`` as gpg takes it ("never", "10d", "1y")."""
    env = {**os.environ, "GNUPGHOME": str(home)}
    home.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", name, "ed25519",
                    "sign", expire], env=env, check=True, capture_output=True)
    listing = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys", name], env=env,
                             check=True, capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines()
                       if line.startswith("fpr:"))
    armoured = home.parent / f"{name}.asc"
    armoured.write_bytes(subprocess.run(["gpg", "--batch", "--armor", "--export", name], env=env,
                                        check=True, capture_output=True).stdout)
    return armoured, fingerprint


def install(tmp_path: Path, key: Path, pinned: str,
            fresh_for_days: int = 0) -> subprocess.CompletedProcess[str]:
    keyring = tmp_path / "keyring.gpg"
    env = {**os.environ, "GNUPGHOME": str(tmp_path / "verifier")}
    (tmp_path / "verifier").mkdir(mode=0o700, exist_ok=True)
    script = keyring_script(f"file://{key}", str(keyring), pinned, fresh_for_days)
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60)


def read_keyring(tmp_path: Path) -> dict:
    """The KeyringKeys fact, its command run on this machine over the installed keyring."""
    env = {**os.environ, "GNUPGHOME": str(tmp_path / "verifier")}
    fact = KeyringKeys()
    out = subprocess.run(["sh", "-c", fact.command(str(tmp_path / "keyring.gpg"))], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return fact.process(out.splitlines())


def test_the_pinned_key_is_installed_and_another_is_refused(tmp_path):
    good, good_fpr = make_key(tmp_path / "gnupg", "repo-signing@example.test")
    bad, bad_fpr = make_key(tmp_path / "gnupg", "impostor@example.test")
    refused = install(tmp_path, bad, good_fpr.lower())
    assert refused.returncode == 1
    assert good_fpr in refused.stderr and bad_fpr in refused.stderr and "refused" in refused.stderr
    assert not (tmp_path / "keyring.gpg").exists()
    accepted = install(tmp_path, good, good_fpr)
    assert accepted.returncode == 0, accepted.stderr
    assert (tmp_path / "keyring.gpg").read_bytes()[:1] != b"-"  # dearmored (binary)


def test_a_download_that_is_no_key_is_refused(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<html>mirror error</html>\n")
    out = install(tmp_path, page, SIGNING_KEYS["cuda"])
    assert out.returncode != 0 and not (tmp_path / "keyring.gpg").exists()


def test_nvidias_fingerprints_are_full_and_match_the_published_key_ids():
    assert SIGNING_KEYS["container-toolkit"].endswith("DDCAE044F796ECB0")
    assert SIGNING_KEYS["cuda"].endswith("A4B469963BF863CC")
    assert all(len(f) == 40 and int(f, 16) for f in SIGNING_KEYS.values())


def test_an_installed_keyring_is_read_back_with_its_fingerprint_and_expiry(tmp_path):
    """What the deploy re-reads on every run: the pinned key passes, the expiry is read, and a
    key close to it is due for a refresh; another key is named with the pinned one."""
    soon, soon_fpr = make_key(tmp_path / "gnupg", "soon@example.test", "10d")
    assert install(tmp_path, soon, soon_fpr).returncode == 0
    found = read_keyring(tmp_path)
    keys = [KeyringKey(k["fingerprint"], k["expires"]) for k in found["keys"]]
    assert found["gpg"] and [k.fingerprint for k in keys] == [soon_fpr]
    assert keyring_problem("node1", "keyring.gpg", soon_fpr, keys) is None
    assert 9 * 86400 < keys[0].expires - found["now"] <= 10 * 86400 + 60
    assert needs_refresh(keys, found["now"])
    other = keyring_problem("node1", "keyring.gpg", SIGNING_KEYS["kubernetes"], keys)
    assert other and soon_fpr in other and SIGNING_KEYS["kubernetes"] in other


def test_a_refresh_installs_an_extended_key_and_refuses_one_still_expiring(tmp_path):
    """pkgs.k8s.io's key is extended in place: the refreshed copy goes in only when it is
    the pinned key and no longer expires within the window; otherwise nothing changes."""
    soon, soon_fpr = make_key(tmp_path / "gnupg", "k8s@example.test", "10d")
    refused = install(tmp_path, soon, soon_fpr, fresh_for_days=30)
    assert refused.returncode == 1 and not (tmp_path / "keyring.gpg").exists()
    assert "still expires within 30 day(s)" in refused.stderr and str(soon) in refused.stderr
    # The publisher extends the same key (same fingerprint, later expiry).
    env = {**os.environ, "GNUPGHOME": str(tmp_path / "gnupg")}
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-set-expire", soon_fpr, "2y"],
                   env=env, check=True, capture_output=True)
    soon.write_bytes(subprocess.run(["gpg", "--batch", "--armor", "--export", soon_fpr],
                                    env=env, check=True, capture_output=True).stdout)
    accepted = install(tmp_path, soon, soon_fpr, fresh_for_days=30)
    assert accepted.returncode == 0, accepted.stderr
    found = read_keyring(tmp_path)
    assert not needs_refresh([KeyringKey(k["fingerprint"], k["expires"])
                              for k in found["keys"]], found["now"])
