"""The verify suite resolves a host's SSH route as pyinfra does (gpuinfra_verify/ssh.py).

pyinfra's own connector code (SSHConnector.make_paramiko_kwargs, then sshuserclient's
SSHClient.connect with its parse_config and ProxyJump gateways) runs here on the same data and
ssh_config, with paramiko's network connect replaced by a recorder: every connection pyinfra
would make (jump hosts first, then the node) and every direct-tcpip channel it would open must
be the suite's, field by field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import paramiko
import pytest

from gpuinfra_verify.expect import ssh_target
from gpuinfra_verify.ssh import Route, describe, resolve


def pyinfra_connections(monkeypatch: pytest.MonkeyPatch, name: str,
                        data: dict) -> tuple[list[dict], list[tuple]]:
    """What pyinfra 3 would connect for host ``name`` with ``data``: (connections in order,
    each hostname, port, username, key_filename, has_pkey, timeout, known_hosts file, missing-key
    policy; the channels opened, each (through hostname, to host, to port))."""
    from pyinfra.api import Config, Inventory, State
    from pyinfra.connectors.sshuserclient import client as pyinfra_client

    connections: list[dict] = []
    channels: list[tuple] = []

    def record(self: Any, hostname: str, **config: Any) -> None:
        connections.append({
            "hostname": hostname, "port": int(config.get("port", 22)),
            "username": config.get("username"),
            "key_filename": tuple(config.get("key_filename") or ()),
            "pkey": "pkey" in config, "timeout": config.get("timeout"),
            "known_hosts": self._host_keys_filename,
            "policy": type(self._policy).__name__})
        self._gpuinfra_hostname = hostname

    def gateway(self: Any, hostname: str, host_port: int, target: str, target_port: int,
                timeout: Any = None) -> str:
        channels.append((self._gpuinfra_hostname, target, int(target_port)))
        return f"channel-{len(channels)}"

    monkeypatch.setattr(paramiko.SSHClient, "connect", record)
    monkeypatch.setattr(pyinfra_client.SSHClient, "gateway", gateway)
    inventory = Inventory(([(name, data)], {}))
    State(inventory, Config())
    kwargs = inventory.get_host(name).connector.make_paramiko_kwargs()
    hostname = kwargs.pop("hostname")
    pyinfra_client.SSHClient().connect(hostname, **kwargs)
    return connections, channels


POLICY_CLASS = {"yes": "StrictPolicy", "accept-new": "AcceptNewPolicy", "no": "WarningPolicy"}


def ours(route: Route) -> tuple[list[dict], list[tuple]]:
    """The suite's route, as :func:`pyinfra_connections` reports pyinfra's."""
    connections, channels = [], []
    for endpoint in [j.endpoint for j in route.jumps] + [route.node]:
        connections.append({
            "hostname": endpoint.hostname, "port": endpoint.port, "username": endpoint.user,
            "key_filename": endpoint.identity_files, "pkey": endpoint.key is not None,
            "timeout": endpoint.timeout, "known_hosts": endpoint.known_hosts[0],
            "policy": POLICY_CLASS[endpoint.policy]})
    for jump in route.jumps:
        channels.append((jump.endpoint.hostname, *jump.to))
    return connections, channels


@pytest.fixture
def key(tmp_path: Path) -> str:
    path = tmp_path / "id_data"

    paramiko.RSAKey.generate(1024).write_private_key_file(str(path))
    return str(path)


CONFIG = """\
Host gpu01-alias
    HostName 10.0.0.11
    User cfguser
    Port 2201
    IdentityFile {tmp}/id_config
    UserKnownHostsFile {tmp}/known_config {tmp}/known_more

Host gpu02-jumped
    HostName 10.0.0.12
    Port 2202
    ProxyJump bastion,admin@inner:2223

Host gpu03-two
    HostName 10.0.0.13
    ProxyJump bastion

Host gpu04-cmd
    HostName 10.0.0.14
    ProxyCommand nc -X connect -x proxy:3128 %h %p

Host bastion
    HostName 192.0.2.1
    User jumper
    Port 2022
    ConnectTimeout 4
    IdentityFile {tmp}/id_bastion
    UserKnownHostsFile {tmp}/known_bastion
    StrictHostKeyChecking yes

Host inner
    HostName 192.0.2.2
    User nobody
"""


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "ssh_config"
    path.write_text(CONFIG.format(tmp=tmp_path))
    return str(path)


CASES = {
    "the config alone": {"ssh_hostname": "gpu01-alias"},
    "data beats the config": {"ssh_hostname": "gpu01-alias", "ssh_user": "datauser",
                              "ssh_port": 2299, "ssh_key": "KEY",
                              "ssh_known_hosts_file": "/data/known_hosts",
                              "ssh_strict_host_key_checking": "yes"},
    "looked up by the inventory name": {},
    "two hops, the data's port and user": {"ssh_hostname": "gpu02-jumped", "ssh_port": 2999,
                                           "ssh_user": "root"},
    "one hop, the node on port 22": {"ssh_hostname": "gpu03-two",
                                     "ssh_strict_host_key_checking": "no"},
    "not in the config": {"ssh_hostname": "10.9.9.9", "ssh_port": 2200},
}


@pytest.mark.parametrize("case", CASES)
def test_the_route_is_pyinfras(monkeypatch, config, key, case):
    data = {k: key if v == "KEY" else v for k, v in CASES[case].items()}
    data["ssh_config_file"] = config
    name = "gpu01-alias" if case == "looked up by the inventory name" else "gpu01"
    target = ssh_target(name, data)
    connections, channels = pyinfra_connections(monkeypatch, name, data)
    for connection in connections:  # a jump host with no StrictHostKeyChecking: pyinfra asks
        if connection["policy"] == "AskPolicy":  # on the terminal; the suite, the node's policy
            connection["policy"] = POLICY_CLASS[target.host_key_policy]
    assert ours(resolve(target)) == (connections, channels)


def test_without_a_config_file_only_the_data_counts(monkeypatch, tmp_path):
    data = {"ssh_hostname": "gpu01-alias", "ssh_user": "u",
            "ssh_config_file": str(tmp_path / "none")}
    route = resolve(ssh_target("gpu01", data))
    assert route.config_file is None and route.node.hostname == "gpu01-alias"
    assert ours(route) == pyinfra_connections(monkeypatch, "gpu01", data)


def test_data_beats_the_config_but_the_config_names_the_address(config, key):
    node = resolve(ssh_target("gpu01", {"ssh_hostname": "gpu01-alias", "ssh_user": "datauser",
                                        "ssh_port": 2299, "ssh_key": key,
                                        "ssh_config_file": config})).node
    assert (node.hostname, node.user, node.port) == ("10.0.0.11", "datauser", 2299)
    assert node.identity_files == () and node.key == key  # ssh_key beats IdentityFile
    plain = resolve(ssh_target("gpu01", {"ssh_hostname": "gpu01-alias",
                                         "ssh_config_file": config})).node
    assert (plain.user, plain.port) == ("cfguser", 2201)
    assert plain.identity_files[0].endswith("/id_config")
    assert plain.known_hosts[0].endswith("/known_config") and len(plain.known_hosts) == 2


def test_proxyjump_with_several_hops(config):
    route = resolve(ssh_target("gpu02", {"ssh_hostname": "gpu02-jumped",
                                         "ssh_strict_host_key_checking": "accept-new",
                                         "ssh_config_file": config}))
    first, second = (j.endpoint for j in route.jumps)
    assert (first.spec, first.hostname, first.port, first.user) == \
        ("bastion", "192.0.2.1", 2022, "jumper")
    assert first.timeout == 4 and first.policy == "yes"  # the hop's own config entry
    assert first.known_hosts[0].endswith("/known_bastion")
    # user@host:port of the ProxyJump line beats the hop's entry; no StrictHostKeyChecking
    # there: the node's policy (pyinfra would ask on the terminal)
    assert (second.spec, second.hostname, second.port, second.user, second.policy) == \
        ("admin@inner:2223", "192.0.2.2", 2223, "admin", "accept-new")
    assert second.known_hosts[0].endswith("/.ssh/known_hosts")
    assert [j.to for j in route.jumps] == [("inner", 2223), ("10.0.0.12", 2202)]
    assert describe(route) == (
        "gpu02: 10.0.0.12:2202 via jumper@192.0.2.1:2022 -> admin@192.0.2.2:2223")


def test_proxycommand_beats_proxyjump(config):
    route = resolve(ssh_target("gpu04", {"ssh_hostname": "gpu04-cmd",
                                         "ssh_config_file": config}))
    assert route.proxy_command == "nc -X connect -x proxy:3128 10.0.0.14 22"
    assert route.jumps == ()


def test_proxyjump_none_is_no_jump(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("Host bastion\n    HostName 192.0.2.1\n    ProxyJump none\n\n"
                      "Host *\n    ProxyJump bastion\n")
    assert resolve(ssh_target("bastion", {"ssh_config_file": str(config)})).jumps == ()
    (jump,) = resolve(ssh_target("gpu01", {"ssh_config_file": str(config)})).jumps
    assert jump.endpoint.hostname == "192.0.2.1" and jump.to == ("gpu01", 22)
