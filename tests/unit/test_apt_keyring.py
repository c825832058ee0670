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

from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra_deploy.ops.apt import keyring_script

pytestmark = pytest.mark.skipif(not (shutil.which("gpg") and shutil.which("curl")),
                                reason="needs gpg and curl")


def make_key(home: Path, name: str) -> tuple[Path, str]:
    """(an armoured public key file, its fingerprint), made with a throw-away gpg home."""
    env = {**os.environ, "GNUPGHOME": str(home)}
    home.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", name, "ed25519",
                    "sign", "never"], env=env, check=True, capture_output=True)
    listing = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys", name], env=env,
                             check=True, capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines()
                       if line.startswith("fpr:"))
    armoured = home.parent / f"{name}.asc"
    armoured.write_bytes(subprocess.run(["gpg", "--batch", "--armor", "--export", name], env=env,
                                        check=True, capture_output=True).stdout)
    return armoured, fingerprint


def install(tmp_path: Path, key: Path, pinned: str) -> subprocess.CompletedProcess[str]:
    keyring = tmp_path / "keyring.gpg"
    env = {**os.environ, "GNUPGHOME": str(tmp_path / "verifier")}
    (tmp_path / "verifier").mkdir(mode=0o700, exist_ok=True)
    return subprocess.run(["sh", "-c", keyring_script(f"file://{key}", str(keyring), pinned)],
                          env=env, capture_output=True, text=True, timeout=60)


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
