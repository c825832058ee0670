"""gpuinfra_deploy/pyinfra_patches/engine.py: pyinfra's behaviour kept, its waiting and
re-reading removed."""

from __future__ import annotations

import socket
from unittest import mock

import pytest
from pyinfra.api import Config, FunctionCommand, Inventory, State, StringCommand
from pyinfra.api.connect import connect_all
from pyinfra.api.util import get_operation_order_from_stack
from pyinfra.facts.server import Hostname, LinuxDistribution

from gpuinfra_deploy.pyinfra_patches import engine
from gpuinfra_deploy.pyinfra_patches.engine import pyinfra_host, pyinfra_operation


@pytest.fixture
def installed():
    engine.install()
    yield
    engine.uninstall()


@pytest.fixture
def state_and_hosts():
    inventory = Inventory((["@fake/a", "@fake/b"], {"fake_delay": 0, "fake_delay_jitter": 0}))
    state = State(inventory, Config())
    connect_all(state)
    return state, [inventory.get_host("@fake/a"), inventory.get_host("@fake/b")]


def counting_get_fact():
    calls = []

    def get_fact(state, host, cls, args=None, kwargs=None):
        calls.append((host.name, cls.__name__, tuple(args or ()), dict(kwargs or {})))
        return f"{cls.__name__}@{host.name}#{len(calls)}"

    return calls, get_fact


# ------------------------------------------------------------------------------ fact cache

def test_a_fact_is_read_once_until_the_host_runs_a_command(installed, state_and_hosts):
    state, (a, b) = state_and_hosts
    calls, get_fact = counting_get_fact()
    with mock.patch.object(pyinfra_host, "get_fact", get_fact):
        first = a.get_fact(Hostname)
        assert a.get_fact(Hostname) == first and len(calls) == 1
        b.get_fact(Hostname)  # another host: its own question
        assert len(calls) == 2
        a.get_fact(LinuxDistribution)  # another fact
        assert len(calls) == 3
        StringCommand("true").execute(state, a, {})  # a changed: its facts are re-read
        assert a.get_fact(Hostname) != first and len(calls) == 4
        b.get_fact(Hostname)  # b did not change
        assert len(calls) == 4


def test_sudo_is_part_of_the_question(installed, state_and_hosts):
    _, (a, _) = state_and_hosts
    calls, get_fact = counting_get_fact()
    with mock.patch.object(pyinfra_host, "get_fact", get_fact):
        a.get_fact(Hostname)
        a.get_fact(Hostname, _sudo=True)
        assert len(calls) == 2


def test_a_callback_forgets_every_hosts_facts(installed, state_and_hosts):
    state, (a, b) = state_and_hosts
    calls, get_fact = counting_get_fact()
    with mock.patch.object(pyinfra_host, "get_fact", get_fact):
        a.get_fact(Hostname), b.get_fact(Hostname)
        FunctionCommand(lambda: None, (), {}).execute(state, a, {})
        a.get_fact(Hostname), b.get_fact(Hostname)
        assert len(calls) == 4


def test_without_the_engine_every_read_runs_the_command(state_and_hosts):
    """The red case: pyinfra alone asks the host again each time."""
    _, (a, _) = state_and_hosts
    calls, get_fact = counting_get_fact()
    with mock.patch.object(pyinfra_host, "get_fact", get_fact):
        a.get_fact(Hostname), a.get_fact(Hostname)
    assert len(calls) == 2


# ------------------------------------------------------------------------------ op order

class _State:
    def __init__(self, filename: str | None) -> None:
        self.current_deploy_filename = filename
        self.current_op_file_number = 7


def _nested(depth: int, state: _State) -> tuple[list[int], list[int]]:
    if depth:
        return _nested(depth - 1, state)
    return get_operation_order_from_stack(state), engine.operation_order_from_stack(state)


@pytest.mark.parametrize("cli", [True, False])
@pytest.mark.parametrize("filename", [None, __file__, "/no/such/deploy.py"])
def test_operation_order_is_pyinfras(cli, filename):
    with mock.patch.object(engine.pyinfra, "is_cli", cli):
        original, fast = _nested(3, _State(filename))
    assert fast == original  # both called from the same line of _nested


def test_install_replaces_pyinfras_ordering_and_uninstall_restores_it():
    engine.install()
    try:
        assert pyinfra_operation.get_operation_order_from_stack is \
            engine.operation_order_from_stack
    finally:
        engine.uninstall()
    assert pyinfra_operation.get_operation_order_from_stack is get_operation_order_from_stack


# ------------------------------------------------------------------------------ TCP_NODELAY

def test_nodelay_sets_the_socket_option():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    try:
        assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # Nagle on
        transport = mock.Mock(sock=client)
        engine.nodelay(mock.Mock(get_transport=lambda: transport))
        assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        client.close()
        server.close()


def test_nodelay_leaves_non_tcp_transports_alone():
    engine.nodelay(None)
    engine.nodelay(mock.Mock(get_transport=lambda: mock.Mock(sock=object())))


def test_global_arguments_are_pyinfras_computed_once():
    from gpuinfra_deploy.pyinfra_patches.engine import pyinfra_arguments

    original = pyinfra_arguments.all_global_arguments()
    engine.install()
    try:
        assert pyinfra_arguments.all_global_arguments() == original
        assert pyinfra_arguments.all_global_arguments() is not \
            pyinfra_arguments.all_global_arguments()  # a fresh list each call, as pyinfra's
    finally:
        engine.uninstall()
