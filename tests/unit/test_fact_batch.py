"""gpuinfra_deploy/pyinfra_patches/fact_batch.py: a host's fact reads in one round trip, each
answered as pyinfra's own read would have been; never a secret written down or batched."""

from __future__ import annotations

import json
import stat
import subprocess
from types import SimpleNamespace
from unittest import mock

import pytest
from pyinfra.api import Config, Inventory, State, StringCommand
from pyinfra.api.command import QuoteString
from pyinfra.api.connect import connect_all
from pyinfra.connectors.util import CommandOutput, OutputLine

from gpuinfra_deploy.pyinfra_patches import engine, fact_batch
from gpuinfra_deploy.run.learned import LearnedLists, file_name

# What pyinfra facts send, in the forms that matter: output with and without a last newline,
# a failure with stderr, an empty output, bytes that are not ASCII, a quote-heavy line.
COMMANDS = [
    "printf 'a\\nb\\n'",
    "printf 'no newline'",
    "echo oops >&2; exit 3",
    "true",
    "printf 'caf\\303\\251\\n'",
    "sh -c 'echo \"$0\" '\"'\"'quoted'\"'\"' x'",
]


def live(raw: str) -> tuple[int, bytes, bytes]:
    done = subprocess.run(["bash", "-c", raw], capture_output=True, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


def sent_by_stdin(calls: list[str]):
    def send(script: str) -> tuple[int, bytes, bytes]:
        calls.append(script)
        done = subprocess.run(["sh", "-s"], input=script.encode(), capture_output=True)
        return done.returncode, done.stdout, done.stderr

    return send


@pytest.fixture
def learned_here(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUINFRA_DEPLOY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GPUINFRA_FACT_BATCH", raising=False)
    fact_batch.reset()
    fact_batch.configure(str(tmp_path / "site.py"))
    yield tmp_path / "cache"
    fact_batch.reset()


def test_one_round_trip_answers_each_read_as_it_would_have_been_alone():
    host = fact_batch.HostFacts("w1", "workers", learned=list(COMMANDS))
    calls: list[str] = []
    send = sent_by_stdin(calls)
    for command in COMMANDS:
        assert host.read(command, send) == live(command), command
    assert len(calls) == 1 and host.round_trips == 1


def test_a_read_the_last_run_did_not_ask_goes_live():
    host = fact_batch.HostFacts("w1", "workers", learned=list(COMMANDS))
    calls: list[str] = []
    assert host.read("echo new", sent_by_stdin(calls)) is None and calls == []
    lonely = fact_batch.HostFacts("w2", "workers", learned=["echo alone"])
    assert lonely.read("echo alone", sent_by_stdin(calls)) is None and calls == []


def test_after_a_change_on_the_host_every_read_goes_live():
    host = fact_batch.HostFacts("w1", "workers", learned=["echo 1", "echo 2", "echo 3"])
    calls: list[str] = []
    send = sent_by_stdin(calls)
    assert host.read("echo 1", send) == (0, b"1\n", b"")
    assert host.read("echo 2", send) == (0, b"2\n", b"") and len(calls) == 1
    host.forget()  # a command ran on the host
    assert host.answers == {}
    assert host.read("echo 3", send) is None  # the caller sends it on its own
    assert len(calls) == 1 and host.asked == ["echo 1", "echo 2"]


def test_an_answer_read_across_a_change_is_not_kept():
    host = fact_batch.HostFacts("w1", "workers", learned=["echo 1", "echo 2"])

    def send_then_change(script: str) -> tuple[int, bytes, bytes]:
        host.forget()  # something ran on the host while the reading was under way
        return sent_by_stdin([])(script)

    assert host.read("echo 1", send_then_change) == (0, b"1\n", b"")
    assert host.answers == {}


def test_a_reading_that_cannot_be_read_turns_batching_off_for_the_host():
    host = fact_batch.HostFacts("w1", "workers", learned=list(COMMANDS))
    assert host.read(COMMANDS[0], lambda script: (0, b"gpuinfra-batch 0 0\nnot base64!\n",
                                                  b"")) is None
    assert "fact reads in one round trip failed" in host.off
    calls: list[str] = []
    assert host.read(COMMANDS[1], sent_by_stdin(calls)) is None and calls == []


# ------------------------------------------------------------------------------ the engine

@pytest.fixture
def ssh_like(learned_here):
    """A host of a real State reached through the engine's SSHConnector.run_shell_command,
    pyinfra's own command run here by bash as sshd would run it."""
    inventory = Inventory((["@fake/w1"], {"fake_delay": 0, "fake_delay_jitter": 0}))
    state = State(inventory, Config())
    connect_all(state)
    host = inventory.get_host("@fake/w1")
    sent: list[str] = []

    def ssh_run(self, command, print_output=False, print_input=False, **arguments):
        from pyinfra.connectors.util import make_unix_command_for_host

        stdin = arguments.pop("_stdin", None)
        codes = arguments.pop("_success_exit_codes", None)
        arguments.pop("_get_pty", None)
        arguments.pop("_timeout", None)  # as pyinfra's run_shell_command does
        raw = make_unix_command_for_host(state, host, command, **arguments).get_raw_value()
        sent.append(raw)
        done = subprocess.run(["bash", "-c", raw], capture_output=True,
                              input=(stdin or "").encode())
        lines = [OutputLine("stdout", x) for x in engine._lines(done.stdout)] + \
            [OutputLine("stderr", x) for x in engine._lines(done.stderr)]
        ok = done.returncode in codes if codes else done.returncode == 0
        return ok, CommandOutput(lines)

    engine.install()
    with mock.patch.dict(engine._INSTALLED, {"ssh_run": ssh_run}):
        yield SimpleNamespace(host=host, state=state), sent
    engine.uninstall()


def as_fact_read(conn, command, **arguments):
    """What pyinfra's _get_fact passes: every connector argument, most of them unset."""
    from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS
    from pyinfra.api.facts import _handle_fact_kwargs
    from pyinfra.facts.server import Hostname

    _, global_kwargs = _handle_fact_kwargs(conn.state, conn.host, Hostname, (), {})
    executor = {k: v for k, v in global_kwargs.items() if k in CONNECTOR_ARGUMENT_KEYS}
    assert "_timeout" in executor and "_get_pty" in executor  # pyinfra's own shape
    executor.update(arguments)
    engine._FACT_READS[engine._current()] = True
    try:
        return engine.SSHConnector.run_shell_command(conn, command, **executor)
    finally:
        engine._FACT_READS.pop(engine._current(), None)


def lines(result):
    status, output = result
    return status, output.stdout_lines, output.stderr_lines


def test_through_the_engine_a_learned_host_reads_its_facts_in_one_round_trip(ssh_like):
    conn, sent = ssh_like
    # as pyinfra's _get_fact passes them: a StringCommand, or a str for a fact that needs no
    # other command (Hostname's `uname -n`)
    commands = [StringCommand(c) if i % 2 else c for i, c in enumerate(COMMANDS)]
    first = [lines(as_fact_read(conn, c)) for c in commands]  # nothing learned: one each
    assert len(sent) == len(COMMANDS)
    fact_batch.save_all()
    fact_batch._HOSTS.clear()
    conn.host._gpuinfra_fact_batch = None
    sent.clear()
    again = [lines(as_fact_read(conn, c)) for c in commands]
    assert again == first  # the same status, stdout and stderr lines
    assert len(sent) == 1  # one round trip
    assert lines(as_fact_read(conn, StringCommand("exit 1"), _success_exit_codes=[1])) == \
        (True, [], [])  # not learned: live, its own exit codes
    assert len(sent) == 2


def test_a_command_that_hides_a_value_is_never_batched_nor_written_down(ssh_like,
                                                                     learned_here):
    from pyinfra.api.command import MaskString

    conn, sent = ssh_like
    with mock.patch("pyinfra.api.command.logger"):
        secret = StringCommand("echo", QuoteString(MaskString("s3cret-token")))
    plain = StringCommand("echo plain")
    for _ in range(2):  # learn, then read again with the list learned
        as_fact_read(conn, secret)
        as_fact_read(conn, plain)
        fact_batch.save_all()
        fact_batch._HOSTS.clear()
        conn.host._gpuinfra_fact_batch = None
    assert sum("s3cret-token" in s for s in sent) == 2  # live both times, never in a batch
    files = list(learned_here.rglob("*.json"))
    assert files and all("s3cret" not in f.read_text() for f in files)
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700
    assert json.loads(files[0].read_text())["commands"] == ["sh -c 'echo plain'"]


def test_off_by_environment_sends_every_read_alone(ssh_like, monkeypatch):
    conn, sent = ssh_like
    monkeypatch.setenv("GPUINFRA_FACT_BATCH", "off")
    fact_batch._HOSTS.clear()
    for c in COMMANDS * 2:
        as_fact_read(conn, StringCommand(c))
    assert len(sent) == 2 * len(COMMANDS)


def test_a_command_that_is_not_a_fact_read_always_goes_live(ssh_like):
    conn, sent = ssh_like
    conn.host._gpuinfra_fact_batch = fact_batch.HostFacts(
        "w1", "", learned=["sh -c 'echo 1'", "sh -c 'echo 2'"])
    engine.SSHConnector.run_shell_command(conn, StringCommand("echo 1"))
    engine.SSHConnector.run_shell_command(conn, StringCommand("echo 2"))
    assert sent == ["sh -c 'echo 1'", "sh -c 'echo 2'"]


def test_a_learned_list_another_user_may_write_is_not_run(learned_here, capsys):
    """Its commands would run on the host: a file or folder writable by others is ignored,
    and the run says so once, with the fix."""
    folder = learned_here / "x"
    fact_batch.LEARNED.lists = LearnedLists(folder)
    fact_batch.LEARNED.lists.save("w1", "workers", ["echo 1", "echo 2"])
    assert fact_batch._learned("w1", "workers") == ["echo 1", "echo 2"]
    folder.chmod(0o777)
    assert fact_batch._learned("w1", "workers") == []
    folder.chmod(0o700)
    (folder / file_name("w1")).chmod(0o666)
    assert fact_batch._learned("w1", "workers") == []
    fact_batch.save_all()
    said = capsys.readouterr().err
    assert said.count("is not yours alone") == 2 and "fix: delete it" in said


def test_a_new_host_borrows_the_list_of_a_host_of_its_groups(learned_here):
    """A fleet worker never seen takes a same-groups host's list (its commands mostly the
    same); another kind takes none. The folder is read once per run, not per new host."""
    lists = fact_batch.LEARNED.lists
    lists.save("w1", "workers", ["echo 1", "echo 2"])
    lists.save("h", "head", ["echo h"])
    assert fact_batch._learned("w2", "workers") == ["echo 1", "echo 2"]
    with mock.patch.object(LearnedLists, "_load", autospec=True,
                           side_effect=LearnedLists._load) as loads:
        assert fact_batch._learned("w3", "workers") == ["echo 1", "echo 2"]
        assert fact_batch._learned("x", "hypervisors") == []
    assert loads.call_count == 2  # each host's own file only


def test_a_command_the_engine_runs_makes_the_next_reads_go_live(ssh_like):
    """F6 (test audit e4dd2f2): the engine's command wrapper (engine._forgetting, around every
    operation command) forgets the host's held answers through fact_batch.forget: a learned
    read after a change goes live, never the answer read before it."""
    from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS
    from pyinfra.api.facts import _handle_fact_kwargs
    from pyinfra.facts.server import Hostname

    conn, sent = ssh_like
    conn.host._gpuinfra_fact_batch = fact_batch.HostFacts(
        "w1", "", learned=["sh -c 'echo one'", "sh -c 'echo two'"])
    assert lines(as_fact_read(conn, StringCommand("echo one")))[1] == ["one"]
    assert len(sent) == 1  # both learned reads in one round trip
    _, arguments = _handle_fact_kwargs(conn.state, conn.host, Hostname, (), {})
    executor = {k: v for k, v in arguments.items() if k in CONNECTOR_ARGUMENT_KEYS}
    # an operation's command (run by the fake host's own connector, through the engine's
    # wrapper of StringCommand.execute)
    StringCommand("true").execute(conn.state, conn.host, executor)
    assert lines(as_fact_read(conn, StringCommand("echo two")))[1] == ["two"]
    assert len(sent) == 2  # live: the answer held from before the command is not used
