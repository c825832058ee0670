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


def test_one_question_asked_at_once_by_many_is_read_once(installed, state_and_hosts):
    """pyinfra plans hosts in parallel greenlets; many asking one host the same fact at once
    (every host's slurm.conf reads each worker's CPUs) wait for one read: unshared, each opened
    its own SSH channel and past sshd's MaxSessions they were refused."""
    import gevent

    _, (a, _) = state_and_hosts
    calls = []

    def slow_get_fact(state, host, cls, args=None, kwargs=None):
        calls.append(host.name)
        gevent.sleep(0.05)  # the command's round trip: the others ask meanwhile
        return f"{cls.__name__}@{host.name}#{len(calls)}"

    with mock.patch.object(pyinfra_host, "get_fact", slow_get_fact):
        readers = [gevent.spawn(a.get_fact, Hostname) for _ in range(12)]
        gevent.joinall(readers, raise_error=True)
    assert len(calls) == 1 and {g.value for g in readers} == {"Hostname@@fake/a#1"}


def test_an_error_reaches_every_waiter_and_the_next_read_asks_again(installed,
                                                                     state_and_hosts):
    import gevent

    _, (a, _) = state_and_hosts
    calls = []

    def failing_get_fact(state, host, cls, args=None, kwargs=None):
        calls.append(host.name)
        gevent.sleep(0.05)
        raise OSError("channel refused")

    with mock.patch.object(pyinfra_host, "get_fact", failing_get_fact):
        readers = [gevent.spawn(a.get_fact, Hostname) for _ in range(3)]
        gevent.joinall(readers)
        assert len(calls) == 1 and all(isinstance(g.exception, OSError) for g in readers)
        with pytest.raises(OSError):
            a.get_fact(Hostname)
    assert len(calls) == 2  # nothing cached from a failed read


def test_commands_to_one_host_share_a_few_channels(installed):
    """Every command of the run (fact reads, operations, uploads, callbacks reaching the head)
    goes through SSHConnector.run_shell_command: at most HOST_CHANNELS at once per host."""
    from types import SimpleNamespace

    import gevent

    running, most = [0], [0]

    def slow_run(self, command, **kwargs):
        running[0] += 1
        most[0] = max(most[0], running[0])
        gevent.sleep(0.02)
        running[0] -= 1
        return True, command

    head, other = SimpleNamespace(host=SimpleNamespace()), SimpleNamespace(host=SimpleNamespace())
    with mock.patch.dict(engine._INSTALLED, {"ssh_run": slow_run}):
        calls = [gevent.spawn(engine.SSHConnector.run_shell_command, head, f"cmd{i}")
                 for i in range(20)]
        calls.append(gevent.spawn(engine.SSHConnector.run_shell_command, other, "elsewhere"))
        gevent.joinall(calls, raise_error=True)
    assert most[0] == engine.HOST_CHANNELS + 1  # the other host is not held back
    assert [c.value for c in calls[:3]] == [(True, "cmd0"), (True, "cmd1"), (True, "cmd2")]


def test_a_refused_channel_is_opened_again_and_other_errors_are_not_retried(installed,
                                                                          monkeypatch):
    from types import SimpleNamespace

    from paramiko import ChannelException, SSHException

    monkeypatch.setattr(engine, "REOPEN_PAUSES", (0.0, 0.0))
    tries = []

    def refusing_twice(self, command, **kwargs):
        tries.append(command)
        if len(tries) <= 2:
            raise ChannelException(2, "Connect failed")
        return True, command

    conn = SimpleNamespace(host=SimpleNamespace())
    with mock.patch.dict(engine._INSTALLED, {"ssh_run": refusing_twice}):
        assert engine.SSHConnector.run_shell_command(conn, "true") == (True, "true")
    assert len(tries) == 3

    def always_refused(self, command, **kwargs):
        tries.append(command)
        raise SSHException("Unable to open channel.")

    tries.clear()
    with mock.patch.dict(engine._INSTALLED, {"ssh_run": always_refused}), \
            pytest.raises(SSHException):
        engine.SSHConnector.run_shell_command(conn, "true")
    assert len(tries) == 3  # the pauses, then the last try's error

    def broken(self, command, **kwargs):
        tries.append(command)
        raise SSHException("Error reading SSH protocol banner")

    tries.clear()
    with mock.patch.dict(engine._INSTALLED, {"ssh_run": broken}), pytest.raises(SSHException):
        engine.SSHConnector.run_shell_command(conn, "true")
    assert len(tries) == 1  # not a refused channel: not asked again
