"""The verify suite's SSH connections check host keys (gpuinfra_verify/ssh.py), on a real SSH
handshake.

An in-process paramiko SSH server on loopback plays the node, with a host key of the test's
choosing: a changed key must be refused whatever the policy but "no"; a new key only when the
site's data says accept-new (and it is then written to known_hosts).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from gpuinfra_verify.expect import ssh_target
from gpuinfra_verify.ssh import HostKeyProblem, connect, fingerprint


class _Accept(paramiko.ServerInterface):
    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL


@pytest.fixture
def node() -> Iterator[tuple[int, paramiko.PKey]]:
    """A node answering SSH on 127.0.0.1:<port> with a fresh host key: (port, its key)."""
    host_key = paramiko.RSAKey.generate(1024)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            transport = paramiko.Transport(conn)
            transport.add_server_key(host_key)
            transports.append(transport)
            try:
                transport.start_server(server=_Accept())
            except (paramiko.SSHException, EOFError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], host_key
    listener.close()
    for transport in transports:
        transport.close()


@pytest.fixture
def client_key(tmp_path: Path) -> str:
    path = tmp_path / "id_rsa"
    paramiko.RSAKey.generate(1024).write_private_key_file(str(path))
    return str(path)


def target(port: int, known: Path, policy: str, key: str):
    return ssh_target("gpu01", {"ssh_hostname": "127.0.0.1", "ssh_port": port, "ssh_user": "v",
                                "ssh_key": key, "ssh_known_hosts_file": str(known),
                                "ssh_strict_host_key_checking": policy})


def known_hosts(path: Path, port: int, key: paramiko.PKey) -> Path:
    path.write_text(f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n")
    return path


@pytest.mark.parametrize("policy", ["yes", "accept-new"])
def test_a_changed_host_key_is_refused_naming_both_fingerprints(node, client_key, tmp_path,
                                                                policy):
    port, real_key = node
    other = paramiko.RSAKey.generate(1024)
    known = known_hosts(tmp_path / "known_hosts", port, other)
    with pytest.raises(HostKeyProblem) as exc:
        connect(target(port, known, policy, client_key))
    message = str(exc.value)
    assert "CHANGED" in message and fingerprint(other) in message
    assert fingerprint(real_key) in message and "ssh-keygen -R" in message


def test_the_trusted_key_connects(node, client_key, tmp_path):
    port, real_key = node
    known = known_hosts(tmp_path / "known_hosts", port, real_key)
    connect(target(port, known, "yes", client_key)).close()


def test_a_new_host_is_refused_unless_the_site_accepts_new_keys(node, client_key, tmp_path):
    port, real_key = node
    known = tmp_path / "known_hosts"
    known.write_text("")
    with pytest.raises(HostKeyProblem, match="not trusted"):
        connect(target(port, known, "yes", client_key))
    connect(target(port, known, "accept-new", client_key)).close()
    assert real_key.get_base64() in known.read_text()  # trusted on first use, then checked
    connect(target(port, known, "yes", client_key)).close()


def test_unknown_policy_is_read_as_the_strictest(tmp_path):
    assert target(22, tmp_path / "k", "maybe", "k").host_key_policy == "yes"
    assert target(22, tmp_path / "k", "off", "k").host_key_policy == "no"
