"""gpuinfra_deploy/ops/block.py's shell, run for real on temporary files: the digest fact
and the splice."""

from __future__ import annotations

import subprocess

import pytest

from gpuinfra_deploy.ops.block import EMPTY_DIGEST, digest_command, splice_command
from gpuinfra_deploy.ops.checked import digest

BEGIN, END = "# BEGIN gpuinfra cluster nodes", "# END gpuinfra cluster nodes"
NEW = "10.0.0.1 head\n10.0.0.2 gpu1\n"


def _sh(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True)


def _splice(path, content: str = NEW) -> subprocess.CompletedProcess:
    staged = path.with_name(path.name + ".gpuinfra-block")
    staged.write_text(content)
    return _sh(splice_command(str(path), BEGIN, END, str(staged), "644"))


def _digest(path) -> str:
    return _sh(digest_command(str(path), BEGIN, END)).stdout.strip()


def test_file_without_a_block_gets_it_appended(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    assert _digest(hosts) == EMPTY_DIGEST
    assert _splice(hosts).returncode == 0
    assert hosts.read_text() == f"127.0.0.1 localhost\n{BEGIN}\n{NEW}{END}\n"
    assert _digest(hosts) == digest(NEW)
    assert not (tmp_path / "hosts.gpuinfra-block").exists()


def test_old_block_replaced_in_place_and_the_rest_kept(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{BEGIN}\n10.9.9.9 old\n{END}\n::1 ip6-localhost\n")
    assert _digest(hosts) == digest("10.9.9.9 old\n")
    assert _splice(hosts).returncode == 0
    assert hosts.read_text() == f"127.0.0.1 localhost\n{BEGIN}\n{NEW}{END}\n::1 ip6-localhost\n"
    assert _digest(hosts) == digest(NEW)
    oct_mode = hosts.stat().st_mode & 0o777
    assert oct_mode == 0o644


def test_a_second_splice_leaves_the_file_as_it_was(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    _splice(hosts)
    once = hosts.read_text()
    _splice(hosts)
    assert hosts.read_text() == once


def test_missing_file_has_no_digest_and_is_created(tmp_path):
    hosts = tmp_path / "hosts"
    assert _digest(hosts) == ""
    assert _splice(hosts).returncode == 0
    assert hosts.read_text() == f"{BEGIN}\n{NEW}{END}\n"


@pytest.mark.parametrize("text", [f"a\n{BEGIN}\n10.9.9.9 old\nb\n", f"{BEGIN}\n"])
def test_begin_without_end_is_refused_and_nothing_is_written(tmp_path, text):
    hosts = tmp_path / "hosts"
    hosts.write_text(text)
    result = _splice(hosts)
    assert result.returncode == 1
    assert "without '# END gpuinfra cluster nodes'" in result.stderr
    assert hosts.read_text() == text
