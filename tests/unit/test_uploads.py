"""gpuinfra_deploy/pyinfra_patches/uploads.py: every SSH upload goes as a command's standard
input into a ``umask 077`` shell and a root-made ``mktemp -d``, never to pyinfra's
``/tmp/pyinfra-<sha1(dest)>``, never in the printed command.

The fake connector below is a real ``SSHConnector`` method called on an object that records
the commands and transfers it is asked for; the shell tests run the very command the patch
sends, with the very bytes pyinfra's stdin writer would send, in a local ``sh``.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import os
import stat
import subprocess
from io import BytesIO, StringIO
from pathlib import Path
from typing import Any

import pytest
from pyinfra.connectors.ssh import SSHConnector
from pyinfra.connectors.util import CommandOutput, write_stdin

from gpuinfra_deploy.pyinfra_patches import uploads
from tests.conftest import PRODUCT_FOLDERS, REPO

SECRET = b"Acquire::http::Proxy \"http://deploy:s3cret-proxy-password@proxy:3128\";\n"


class FakeHost:
    name = "node1"
    print_prefix = "[node1] "

    @staticmethod
    def get_temp_filename(hash_key: str, temp_directory: str | None = None) -> str:
        """pyinfra's Host.get_temp_filename with the default directory (api/host.py)."""
        return f"{temp_directory or '/tmp'}/pyinfra-{hashlib.sha1(hash_key.encode()).hexdigest()}"


class RecordingConnector:
    """What a connector's put_file asks of the host: shell commands and SFTP transfers."""

    def __init__(self, ok: bool = True) -> None:
        self.host = FakeHost()
        self.commands: list[tuple[str, dict[str, Any]]] = []
        self.transfers: list[tuple[bytes, str]] = []
        self.ok = ok

    def run_shell_command(self, command: Any, **arguments: Any) -> tuple[bool, CommandOutput]:
        self.commands.append((command.get_raw_value(), arguments))
        return self.ok, CommandOutput([])

    def _put_file(self, filename_or_io: Any, remote_location: str) -> None:
        self.transfers.append((filename_or_io.getvalue(), remote_location))


def test_pinned_pyinfra_stages_a_sudo_upload_at_a_predictable_name():
    """Why the patch exists, on the pinned pyinfra: under sudo the content goes by SFTP to
    /tmp/pyinfra-<sha1(dest)> before root copies it. Fails once pyinfra stops doing so (then
    the patch may go: README.md here)."""
    connector = RecordingConnector()
    original = uploads._INSTALLED.get("put_file", SSHConnector.put_file)
    assert original is not uploads.put_file
    original(connector, BytesIO(SECRET), "/etc/apt/apt.conf.d/90proxy", _sudo=True)
    predictable = FakeHost.get_temp_filename("/etc/apt/apt.conf.d/90proxy")
    assert connector.transfers == [(SECRET, predictable)]


@pytest.mark.parametrize("sudo", [{"_sudo": True}, {}, {"_sudo": True, "_sudo_user": "munge"}])
def test_an_upload_is_one_command_with_the_content_on_stdin_only(sudo):
    connector = RecordingConnector()
    assert uploads.put_file(connector, BytesIO(SECRET), "/etc/apt/apt.conf.d/90proxy",
                            remote_temp_filename="/tmp/pyinfra-0123", print_input=True, **sudo)
    assert connector.transfers == []  # no SFTP at all
    [(command, arguments)] = connector.commands
    assert b"s3cret" not in command.encode() and "/tmp" not in command
    assert "umask 077" in command and 'mktemp -d' in command
    assert command.endswith(" gpuinfra-upload /etc/apt/apt.conf.d/90proxy")
    assert arguments["print_input"] is True  # what pyinfra prints is the command above
    assert {k: arguments[k] for k in sudo} == sudo
    assert base64.decodebytes("".join(arguments["_stdin"]).encode()) == SECRET


def test_a_failed_upload_names_the_host_the_file_and_what_it_needs():
    with pytest.raises(OSError, match=r"upload to /etc/x on node1 failed.*mktemp, base64"):
        uploads.put_file(RecordingConnector(ok=False), StringIO("x"), "/etc/x", _sudo=True)


def test_install_routes_every_ssh_upload_through_the_patch():
    uploads.uninstall()
    before = SSHConnector.put_file
    uploads.install()
    try:
        assert SSHConnector.put_file is uploads.put_file
        uploads.install()  # idempotent
        assert uploads._INSTALLED["put_file"] is before
    finally:
        uploads.uninstall()
    assert SSHConnector.put_file is before


# ------------------------------------------------------------------------------ the shell

class _Captured(BytesIO):
    def close(self) -> None:
        self.sent = self.getvalue()
        super().close()


def _run(source: Any, dest: Path, tmp: Path) -> subprocess.CompletedProcess[bytes]:
    """The patch's command in a local sh, fed what pyinfra's stdin writer sends."""
    buffer = _Captured()
    write_stdin(uploads.stdin_lines(source), buffer)
    command = uploads.upload_command(str(dest)).get_raw_value()
    return subprocess.run(["sh", "-c", command], input=getattr(buffer, "sent", b""),
                          env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True,
                          check=False)


@pytest.mark.parametrize("content", [SECRET, b"", b"no newline at the end",
                                     bytes(range(256)) * 64, "unicode \u2713\n"])
def test_the_command_writes_the_exact_bytes(tmp_path, content):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dest = tmp_path / "dest"
    source = StringIO(content) if isinstance(content, str) else BytesIO(content)
    result = _run(source, dest, tmp)
    assert result.returncode == 0, result.stderr
    expected = content.encode() if isinstance(content, str) else content
    assert dest.read_bytes() == expected
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600  # new: root only until files.put's chmod
    assert list(tmp.iterdir()) == []  # the private directory is gone


def test_an_existing_file_keeps_its_mode_and_inode(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dest = tmp_path / "dest"
    dest.write_text("old\n")
    dest.chmod(0o644)
    inode = dest.stat().st_ino
    assert _run(BytesIO(b"new\n"), dest, tmp).returncode == 0
    assert (dest.read_text(), stat.S_IMODE(dest.stat().st_mode), dest.stat().st_ino) == \
        ("new\n", 0o644, inode)


def test_a_failed_copy_fails_and_leaves_nothing_staged(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    result = _run(BytesIO(SECRET), tmp_path / "missing-folder" / "dest", tmp)
    assert result.returncode != 0
    assert list(tmp.iterdir()) == []


def test_the_staging_directory_is_private_while_the_content_is_in_it(tmp_path):
    """Stopped between decoding and copying (cp is a failing stand-in on PATH that lists the
    staging directory): the directory is 0700 and its file 0600."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cp").write_text('#!/bin/sh\nstat -c "%a %n" "$(dirname "$1")" "$1"\nexit 1\n')
    (bin_dir / "cp").chmod(0o755)
    buffer = _Captured()
    write_stdin(uploads.stdin_lines(BytesIO(SECRET)), buffer)
    result = subprocess.run(
        ["sh", "-c", uploads.upload_command(str(tmp_path / "dest")).get_raw_value()],
        input=buffer.sent, capture_output=True, check=False, text=False,
        env={**os.environ, "TMPDIR": str(tmp), "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert result.returncode == 1
    modes = [line.split(" ", 1) for line in result.stdout.decode().splitlines()]
    assert [m for m, _ in modes] == ["700", "600"], modes
    assert Path(modes[0][1]).parent == tmp and Path(modes[0][1]).name.startswith("tmp.")
    assert list(tmp.iterdir()) == []


# ------------------------------------------------------------------------------ the project

def _calls(name: str) -> list[tuple[str, int, set[str]]]:
    found = []
    for package in PRODUCT_FOLDERS:
        for path in sorted(package.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and ast.unparse(node.func) in (name,
                                                                              f"{name}._inner"):
                    found.append((str(path.relative_to(REPO)), node.lineno,
                                  {k.arg for k in node.keywords if k.arg}))
    return found


def test_every_files_put_names_its_mode():
    """A new file comes up 0600 (root only) through the patch: each ``files.put`` says the mode
    it wants, so none stays 0600 by accident."""
    calls = _calls("files.put") + _calls("files.template")
    assert len(calls) > 20
    assert [f"{path}:{line}" for path, line, kws in calls if "mode" not in kws] == []


def test_the_deploy_and_every_role_install_the_patch():
    config = (REPO / "config.py").read_text()
    role = (REPO / "gpuinfra_deploy" / "run" / "role.py").read_text()
    assert "uploads.install()" in config and "uploads.install()" in role
