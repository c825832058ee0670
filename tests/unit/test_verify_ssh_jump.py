"""The verify suite reaches a node through a jump host on real SSH handshakes
(gpuinfra_verify/ssh.py), and every failure on the way names the host, the hop and the fix.

Two in-process paramiko SSH servers on loopback: a jump host that forwards ``direct-tcpip``
channels (or refuses to), and the node. The node's connection must arrive from the jump host's
forwarding socket; the jump host's key is checked like the node's.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
import pytest

from gpuinfra_verify.expect import ssh_target
from gpuinfra_verify.ssh import HostKeyProblem, ReachProblem, connect, fingerprint


class _Server(paramiko.ServerInterface):
    def __init__(self, ssh: Ssh) -> None:
        self.ssh = ssh

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_direct_tcpip_request(self, chanid: int, origin: tuple,
                                           destination: tuple) -> int:
        if not self.ssh.forwards:
            return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
        self.ssh.requests[chanid] = destination
        return paramiko.OPEN_SUCCEEDED


@dataclass
class Ssh:
    """An SSH server on 127.0.0.1:port with its own host key; forwards channels if asked."""

    forwards: bool = False
    key: paramiko.PKey = field(default_factory=lambda: paramiko.RSAKey.generate(1024))
    requests: dict[int, tuple] = field(default_factory=dict)
    peers: list[tuple] = field(default_factory=list)  # where each connection came from
    forwarded_from: list[tuple] = field(default_factory=list)  # the forwarding sockets' ends
    # socket.socket looked up when the server starts: after pyinfra_cli's gevent patch (an
    # earlier test in the process) a socket of before would block every greenlet
    listener: socket.socket = field(default_factory=lambda: socket.socket())
    transports: list[paramiko.Transport] = field(default_factory=list)

    def start(self) -> Ssh:
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.listener.accept()
            except OSError:
                return
            self.peers.append(peer)
            transport = paramiko.Transport(conn)
            transport.add_server_key(self.key)
            self.transports.append(transport)
            try:
                transport.start_server(server=_Server(self))
            except (paramiko.SSHException, EOFError, OSError):
                continue
            threading.Thread(target=self._forward, args=(transport,), daemon=True).start()

    def _forward(self, transport: paramiko.Transport) -> None:
        while transport.is_active():
            channel = transport.accept(1)
            if channel is None:
                continue
            destination = self.requests.get(channel.get_id())
            if destination is None:
                continue
            out = socket.create_connection(destination)
            self.forwarded_from.append(out.getsockname())
            threading.Thread(target=_pump, args=(channel, out), daemon=True).start()

    def stop(self) -> None:
        self.listener.close()
        for transport in self.transports:
            transport.close()


def _pump(channel: paramiko.Channel, out: socket.socket) -> None:
    try:
        while True:
            ready, _, _ = select.select([channel, out], [], [], 1)
            if channel in ready:
                data = channel.recv(32768)
                if not data:
                    break
                out.sendall(data)
            if out in ready:
                data = out.recv(32768)
                if not data:
                    break
                channel.sendall(data)
    except OSError:
        pass
    finally:
        channel.close()
        out.close()


@pytest.fixture
def servers() -> Iterator[tuple[Ssh, Ssh]]:
    """(the jump host, the node), listening."""
    jump, node = Ssh(forwards=True).start(), Ssh().start()
    yield jump, node
    jump.stop()
    node.stop()


@pytest.fixture
def client_key(tmp_path: Path) -> str:
    path = tmp_path / "id_rsa"
    paramiko.RSAKey.generate(1024).write_private_key_file(str(path))
    return str(path)


def known(path: Path, *servers: Ssh) -> Path:
    path.write_text("".join(f"[127.0.0.1]:{s.port} {s.key.get_name()} {s.key.get_base64()}\n"
                            for s in servers))
    return path


def site(tmp_path: Path, jump_host: str, jump_port: int, node: Ssh, key: str,
         jump_known: Path) -> dict:
    """The node's data: the alias ``node-via-jump`` in a temporary ssh_config, ProxyJump
    ``jump``; the jump host's entry with its own known_hosts and strict checking."""
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host node-via-jump\n    HostName 127.0.0.1\n    Port {node.port}\n"
        "    ProxyJump jump\n\n"
        f"Host jump\n    HostName {jump_host}\n    Port {jump_port}\n    User hop\n"
        f"    IdentityFile {key}\n    UserKnownHostsFile {jump_known}\n"
        "    StrictHostKeyChecking yes\n")
    return {"ssh_hostname": "node-via-jump", "ssh_user": "root", "ssh_key": key,
            "ssh_config_file": str(config), "ssh_known_hosts_file":
            str(known(tmp_path / "known_nodes", node)), "ssh_strict_host_key_checking": "yes"}


def test_the_node_is_reached_through_the_jump_host(servers, client_key, tmp_path):
    jump, node = servers
    data = site(tmp_path, "127.0.0.1", jump.port, node, client_key,
                known(tmp_path / "known_jump", jump))
    client = connect(ssh_target("gpu01", data))
    try:
        assert client.get_transport().is_authenticated()
        assert list(jump.requests.values()) == [("127.0.0.1", node.port)]
        # the node's one connection came from the jump host's forwarding socket
        assert node.peers == jump.forwarded_from and len(node.peers) == 1
    finally:
        client.close()
    assert not client.jumps  # closing the node's client closed the jump host's too


def test_a_jump_host_with_a_changed_key_is_refused(servers, client_key, tmp_path):
    jump, node = servers
    other = paramiko.RSAKey.generate(1024)
    jump_known = tmp_path / "known_jump"
    jump_known.write_text(f"[127.0.0.1]:{jump.port} {other.get_name()} {other.get_base64()}\n")
    data = site(tmp_path, "127.0.0.1", jump.port, node, client_key, jump_known)
    with pytest.raises(HostKeyProblem) as exc:
        connect(ssh_target("gpu01", data))
    message = str(exc.value)
    assert message.startswith("gpu01: the SSH host key of jump host jump (hop 1 of 1)")
    assert "CHANGED" in message and fingerprint(other) in message
    assert fingerprint(jump.key) in message and "ssh-keygen -R [127.0.0.1]:" in message
    assert node.peers == []  # nothing was sent on towards the node


def test_an_unknown_jump_host_is_refused_under_strict_checking(servers, client_key, tmp_path):
    jump, node = servers
    empty = tmp_path / "known_jump"
    empty.write_text("")
    data = site(tmp_path, "127.0.0.1", jump.port, node, client_key, empty)
    with pytest.raises(HostKeyProblem, match=r"^gpu01: jump host jump \(hop 1 of 1\) "
                                             r"\[127\.0\.0\.1\]:\d+ is not in .* not trusted"):
        connect(ssh_target("gpu01", data))


def test_the_node_s_key_is_still_checked_behind_the_jump_host(servers, client_key, tmp_path):
    jump, node = servers
    data = site(tmp_path, "127.0.0.1", jump.port, node, client_key,
                known(tmp_path / "known_jump", jump))
    other = paramiko.RSAKey.generate(1024)
    Path(data["ssh_known_hosts_file"]).write_text(
        f"[127.0.0.1]:{node.port} {other.get_name()} {other.get_base64()}\n")
    with pytest.raises(HostKeyProblem, match="^gpu01: the SSH host key of 127.0.0.1 CHANGED"):
        connect(ssh_target("gpu01", data))


def test_a_jump_host_that_is_down_is_named_with_the_fix(servers, client_key, tmp_path):
    jump, node = servers
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    data = site(tmp_path, "127.0.0.1", port, node, client_key, tmp_path / "known_jump")
    with pytest.raises(ReachProblem) as exc:
        connect(ssh_target("gpu01", data))
    message = str(exc.value)
    assert message.startswith(f"gpu01: cannot reach jump host jump (hop 1 of 1) (ProxyJump of "
                              f"node-via-jump in {tmp_path / 'ssh_config'}): 127.0.0.1:{port} "
                              "refused the connection")
    assert "fix: start sshd on the jump host" in message
    assert f"`ssh -F {tmp_path / 'ssh_config'} jump true` must work" in message


def test_an_unresolvable_jump_host_is_named_with_the_fix(servers, client_key, tmp_path):
    jump, node = servers
    data = site(tmp_path, "no-such-bastion.invalid", 22, node, client_key,
                tmp_path / "known_jump")
    with pytest.raises(ReachProblem) as exc:
        connect(ssh_target("gpu01", data))
    message = str(exc.value)
    assert message.startswith("gpu01: cannot reach jump host jump (hop 1 of 1)")
    assert "no-such-bastion.invalid does not resolve" in message
    assert "fix: correct the ProxyJump line (or the jump host's HostName)" in message


def test_a_jump_host_that_will_not_forward_is_named_with_the_fix(client_key, tmp_path):
    jump, node = Ssh(forwards=False).start(), Ssh().start()
    jump_port, node_port = jump.port, node.port
    try:
        data = site(tmp_path, "127.0.0.1", jump.port, node, client_key,
                    known(tmp_path / "known_jump", jump))
        with pytest.raises(ReachProblem) as exc:
            connect(ssh_target("gpu01", data))
    finally:
        jump.stop()
        node.stop()
    message = str(exc.value)
    assert message.startswith(f"gpu01: jump host jump (hop 1 of 1) at 127.0.0.1:{jump_port} "
                              f"did not open a connection to 127.0.0.1:{node_port}")
    assert "AllowTcpForwarding" in message and node.peers == []
