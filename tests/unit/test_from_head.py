"""Files made on the head reach a node through this machine's memory only: read as a command's
output on the head, written from a command's standard input on the node (umask 077, beside the
target, renamed into place), never printed, never on a command line; a file already equal (digest,
mode and group) is left alone (gpuinfra_deploy/ops/from_head.py)."""

from __future__ import annotations

import base64
import grp
import hashlib
import os

import pytest
from pyinfra.facts.files import File, Sha256File

from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy.ops.from_head import Copy, _copy
from tests.unit.test_remote import LocalHost

SECRET = "-----BEGIN PRIVATE KEY-----\nnot-really-a-key-but-secret\n-----END PRIVATE KEY-----\n"
GROUP = grp.getgrgid(os.getgid()).gr_name


class FactHost(LocalHost):
    """A LocalHost answering the two facts the copy reads, from the files here."""

    def __init__(self, name: str):
        super().__init__(name)
        self.commands: list[str] = []

    def run_shell_command(self, command, **kwargs):
        self.commands.append(command.get_raw_value())
        return super().run_shell_command(command, **kwargs)

    def get_fact(self, cls, path):
        if not os.path.exists(path):
            return None
        if cls is Sha256File:
            with open(path, "rb") as handle:
                return hashlib.sha256(handle.read()).hexdigest()
        assert cls is File
        info = os.stat(path)
        return {"mode": int(oct(info.st_mode & 0o777)[2:]),
                "group": grp.getgrgid(info.st_gid).gr_name}


def _copies(tmp_path):
    (tmp_path / "head").mkdir()
    (tmp_path / "node").mkdir()
    (tmp_path / "head" / "tls.key").write_text(SECRET)
    (tmp_path / "head" / "tls.crt").write_text("public\n")
    return [Copy(str(tmp_path / "head" / "tls.key"), str(tmp_path / "node" / "tls.key"),
                 GROUP, "0640"),
            Copy(str(tmp_path / "head" / "tls.crt"), str(tmp_path / "node" / "tls.crt"),
                 GROUP, "0644")]


def test_each_file_arrives_equal_private_and_unprinted(tmp_path):
    head, node, copies = FactHost("head1"), FactHost("gpu01"), _copies(tmp_path)
    _copy(None, node, head, copies)
    key = tmp_path / "node" / "tls.key"
    assert key.read_text() == SECRET and (tmp_path / "node" / "tls.crt").read_text() == "public\n"
    assert oct(key.stat().st_mode & 0o777) == "0o640"
    assert oct((tmp_path / "node" / "tls.crt").stat().st_mode & 0o777) == "0o644"
    assert not list((tmp_path / "node").glob("*.gpuinfra-new"))
    for host in (head, node):
        for kwargs in host.kwargs:
            assert kwargs["print_output"] is False and kwargs["print_input"] is False
        for command in host.commands:
            assert "not-really-a-key" not in command
            assert base64.b64encode(SECRET.encode()).decode()[:40] not in command
    assert node.commands[0].startswith("umask 077 && base64 -d >")


def test_a_file_already_in_place_is_left_alone_and_a_drifted_one_put_back(tmp_path):
    head, node, copies = FactHost("head1"), FactHost("gpu01"), _copies(tmp_path)
    _copy(None, node, head, copies)
    node.commands.clear()
    _copy(None, node, head, copies)
    assert node.commands == []
    (tmp_path / "node" / "tls.key").chmod(0o644)  # made readable by everyone
    _copy(None, node, head, copies)
    assert len(node.commands) == 1 and "tls.key" in node.commands[0]
    assert oct((tmp_path / "node" / "tls.key").stat().st_mode & 0o777) == "0o640"


def test_a_file_the_head_lacks_stops_the_node_naming_it(tmp_path):
    head, node, copies = FactHost("head1"), FactHost("gpu01"), _copies(tmp_path)
    (tmp_path / "head" / "tls.key").unlink()
    with pytest.raises(GpuinfraError, match=r"reading .*/head/tls.key failed on head1"):
        _copy(None, node, head, copies)
    assert not (tmp_path / "node" / "tls.key").exists()
