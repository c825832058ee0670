"""How the project runs pyinfra: four changes to its engine, installed once by config.py.

pyinfra 3.10 (pinned: these read its internals, docs/pyinfra-notes.md) spends a no-op rerun
of this project mostly waiting and re-reading:

1. **TCP_NODELAY on SSH.** paramiko leaves Nagle's algorithm on; each small command then
   waits for the peer's delayed ACK (about 40 ms of the 48 ms a command costs on the lab).
   :func:`_connect_nodelay` sets TCP_NODELAY on the transport's socket once connected, as
   OpenSSH does for interactive sessions (docs/pyinfra-upstream-nodelay.md is the report text
   for pyinfra).
2. **Each fact read once per host, until the host changes.** pyinfra re-runs a fact's command
   every time an operation asks (``dpkg -l`` five times per worker in one run). The cache kept
   here answers a repeated question from the first answer, and is dropped for a host the
   moment any command, upload or callback runs on it (and for every host when a callback runs,
   since a callback may reach other hosts), so a fact is never older than the last change.
   One question asked by several hosts at once (pyinfra plans the hosts in parallel
   greenlets, and a role asks other hosts' facts: the head's slurm.conf and every worker's
   judge read each worker's CPUs and GPUs) is asked once: the others wait for its answer.
   Unshared, N hosts opened N channels on one connection at the same moment, and past sshd's
   MaxSessions (10) the channels were refused ("ChannelException(2, 'Connect failed')"):
   measured with 13 lab hosts. For the same reason no host runs more than
   :data:`HOST_CHANNELS` commands at a time over its connection, and a channel sshd refused
   to open is opened again a few times (:func:`_run_limited`): the
   head is asked a file fact per worker by every worker's monitoring role at once, and copies
   from the head run on it for every worker in the same operation.
3. **Per-operation CPU and memory.** In CLI mode pyinfra orders operations by the line numbers
   of the deploy code on the call stack, read with ``inspect.stack()``, which also loads a line
   of source for every frame of every operation call: the same line numbers come straight from
   the frames (:func:`operation_order_from_stack`). And every operation re-evaluates the type
   hints of its ~30 global arguments (``all_global_arguments``), a constant: computed once.
   Each argument's default was looked up through every layer of the host's data again (half
   of planning's time), and each host kept its own dict of them per operation (the most memory
   a large plan held): planning.py reads the layers once per operation, and a host whose
   arguments equal the first host's for that operation keeps that host's dict. While the
   deploy is planned, Python's cyclic garbage collector runs less often (planning makes
   almost no cyclic garbage); the operations execute with its usual thresholds.
4. **Each host at its own pace.** pyinfra waits for every host at every operation; the CLI's
   ``run_ops`` now lets each host go through its own operations and makes the hosts meet only
   at the operations that need another host (schedule.py; ``GPUINFRA_PACED=off`` for
   pyinfra's order). As the hosts' lines then interleave, ``Host.print_prefix`` names the
   operation a host runs.

Each change keeps pyinfra's behaviour (tests/unit/test_engine.py compares them with the
originals and shows the cache re-reading after a change).
"""

from __future__ import annotations

import functools
import socket
import sys
from importlib import import_module
from typing import Any

import pyinfra
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS
from pyinfra.api.util import PYINFRA_INSTALL_DIR
from pyinfra.connectors.ssh import SSHConnector

from gpuinfra_deploy.pyinfra_patches import fact_batch, planning, schedule

# The modules themselves (``pyinfra.api`` re-exports a function called ``operation``).
pyinfra_arguments = import_module("pyinfra.api.arguments")
pyinfra_command = import_module("pyinfra.api.command")
pyinfra_deploy = import_module("pyinfra.api.deploy")
pyinfra_facts = import_module("pyinfra.api.facts")
pyinfra_host = import_module("pyinfra.api.host")
pyinfra_operation = import_module("pyinfra.api.operation")
pyinfra_state = import_module("pyinfra.api.state")
pyinfra_cli_main = import_module("pyinfra_cli.cli")

_INSTALLED: dict[str, Any] = {}


# ------------------------------------------------------------------------------ TCP_NODELAY

def nodelay(client: Any) -> None:
    """Nagle off on a connected paramiko client's socket (no-op without one)."""
    transport = client.get_transport() if client is not None else None
    sock = getattr(transport, "sock", None)
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _connect_nodelay(self: SSHConnector) -> None:
    _INSTALLED["ssh_connect"](self)
    nodelay(getattr(self, "client", None))


# ------------------------------------------------------------------------------ fact cache

class FactCache:
    """Facts per host, valid until that host runs anything (see the module docstring). Kept on
    the host object itself, so it goes with the run's hosts."""

    ATTR = "_gpuinfra_facts"

    @staticmethod
    def key(host: Any, cls: Any, args: tuple, kwargs: dict) -> Any:
        """What makes two fact reads the same question: the fact, its arguments, and the
        connector arguments (sudo, user, shell...) it would run with."""
        context = {k: v for k, v in (host.current_op_global_arguments or {}).items()
                   if k in CONNECTOR_ARGUMENT_KEYS}
        context.update({k: v for k, v in kwargs.items() if k.startswith("_")})
        plain = {k: v for k, v in kwargs.items() if not k.startswith("_")}
        return (cls, repr(args), repr(sorted(plain.items())), repr(sorted(context.items())))

    def get(self, host: Any, key: Any) -> tuple[bool, Any]:
        facts = getattr(host, self.ATTR, None)
        if facts is not None and key in facts:
            return True, facts[key]
        return False, None

    def put(self, host: Any, key: Any, value: Any) -> None:
        facts = getattr(host, self.ATTR, None)
        if facts is None:
            facts = {}
            setattr(host, self.ATTR, facts)
        facts[key] = value

    def forget(self, host: Any) -> None:
        """Drop ``host``'s facts, or every host's of its run when it is a callback's."""
        if host is not None:
            setattr(host, self.ATTR, {})


CACHE = FactCache()


_INFLIGHT = "_gpuinfra_facts_asked"  # on a host: {key: AsyncResult} of the reads under way
_SLOTS = "_gpuinfra_channels"  # on a host: the semaphore of its commands in flight
# Commands in flight on one host's SSH connection at once (each is a session channel): below
# OpenSSH's default MaxSessions (10), past which sshd refuses the channel.
HOST_CHANNELS = 6
# A channel sshd refused to open (a closing one still counts against MaxSessions for a
# moment): nothing ran, so it is asked again, after these pauses (seconds).
REOPEN_PAUSES = (0.2, 0.5, 1.0, 2.0)


def _slots(host: Any) -> Any:
    from gevent.lock import BoundedSemaphore

    slots = getattr(host, _SLOTS, None)
    if slots is None:
        slots = BoundedSemaphore(HOST_CHANNELS)
        setattr(host, _SLOTS, slots)
    return slots


def _get_fact_cached(self: Any, name_or_cls: Any, *args: Any, **kwargs: Any) -> Any:
    from gevent.event import AsyncResult

    key = FactCache.key(self, name_or_cls, args, kwargs)
    found, value = CACHE.get(self, key)
    if found:
        return value
    asked = getattr(self, _INFLIGHT, None)
    if asked is None:
        asked = {}
        setattr(self, _INFLIGHT, asked)
    if key in asked:  # another greenlet is reading it now: its answer (or its error)
        return asked[key].get()
    answer = asked[key] = AsyncResult()
    reading = _FACT_READS.get(_current())
    _FACT_READS[_current()] = True
    try:
        value = _INSTALLED["get_fact"](self, name_or_cls, *args, **kwargs)
    except BaseException as exc:
        answer.set_exception(exc)
        raise
    finally:
        asked.pop(key, None)
        if reading is None:
            _FACT_READS.pop(_current(), None)
    CACHE.put(self, key, value)
    answer.set(value)
    return value


def _current() -> Any:
    import gevent

    return gevent.getcurrent()


# The greenlets reading a fact now (a fact read's command may be answered by fact_batch).
_FACT_READS: dict[Any, bool] = {}


def _run_limited(self: SSHConnector, *args: Any, **kwargs: Any) -> Any:
    """pyinfra's ``SSHConnector.run_shell_command``, at most :data:`HOST_CHANNELS` at once per
    host (every command, fact read and upload of the run goes through it); a fact read's
    command answered from the host's one-round-trip reading where it can be
    (fact_batch.py)."""
    if _FACT_READS.get(_current()):
        answered = _fact_from_batch(self, *args, **kwargs)
        if answered is not None:
            return answered
    return _run_one(self, *args, **kwargs)


def _fact_from_batch(self: SSHConnector, command: Any, print_output: bool = False,
                     print_input: bool = False, **arguments: Any) -> Any:
    """``(status, CommandOutput)`` as pyinfra's ``run_shell_command`` returns it, from the
    host's batched reading; None when this read must go live (fact_batch.py says which)."""
    from pyinfra.connectors.util import (
        SUDO_PASSWORD_REQUIRED_LINES,
        CommandOutput,
        OutputLine,
        make_unix_command_for_host,
    )

    host = self.host
    facts = fact_batch.for_host(host)
    # a fact's command is a str when the fact needs no other command, else a StringCommand
    if facts is None or print_output or print_input or not isinstance(
            command, (str, pyinfra_command.StringCommand)):
        return None
    # what pyinfra's run_shell_command takes out before it builds the command line
    taken = {k: arguments.pop(k, None) for k in ("_stdin", "_get_pty", "_timeout",
                                                  "_success_exit_codes")}
    if taken["_stdin"] or taken["_get_pty"] or taken["_timeout"] or \
            arguments.get("_sudo_password") or arguments.get("_su_password") or \
            host.connector_data.get("prompted_sudo_password"):
        return None
    unix = make_unix_command_for_host(self.state, host, command, **arguments)
    raw = unix.get_raw_value()
    if raw != unix.get_masked_value():
        return None  # it hides a value: never written down, never batched

    def send(script: str) -> tuple[int, bytes, bytes]:
        # the script on standard input: no argument-length limit (128 KiB per argument)
        status, output = _run_one(self, pyinfra_command.StringCommand("sh", "-s"),
                                  _stdin=script)
        out = "\n".join(output.stdout_lines).encode()
        err = "\n".join(output.stderr_lines).encode()
        return (0 if status else 1), out, err

    answer = facts.read(raw, send)
    if answer is None:
        return None
    rc, out, err = answer
    try:
        lines = [OutputLine("stdout", line) for line in _lines(out)] + \
            [OutputLine("stderr", line) for line in _lines(err)]
    except UnicodeDecodeError:
        return None
    if rc != 0 and any(line.line.strip() in SUDO_PASSWORD_REQUIRED_LINES for line in lines):
        return None  # sudo wants a password: live, where pyinfra asks for it
    codes = taken["_success_exit_codes"]
    return (rc in codes if codes else rc == 0), CommandOutput(lines)


def _lines(data: bytes) -> list[str]:
    """pyinfra's lines of a buffer (connectors/util.py ``read_buffer``): split at newlines,
    the newline dropped, a last line without one kept."""
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return [part.decode("utf-8") for part in parts]


def _run_one(self: SSHConnector, *args: Any, **kwargs: Any) -> Any:
    import gevent
    from paramiko import ChannelException, SSHException

    with _slots(self.host):
        for pause in (*REOPEN_PAUSES, None):
            try:
                return _INSTALLED["ssh_run"](self, *args, **kwargs)
            except (ChannelException, SSHException) as exc:
                refused = isinstance(exc, ChannelException) or \
                    "Unable to open channel" in str(exc)
                if not refused or pause is None:
                    raise
                gevent.sleep(pause)


def _forgetting(name: str, every_host: bool = False) -> Any:
    def execute(self: Any, state: Any, host: Any, connector_arguments: Any) -> Any:
        hosts = list(state.inventory) if every_host else [host]
        for each in hosts:
            CACHE.forget(each)
            fact_batch.forget(each)
        try:
            return _INSTALLED[name](self, state, host, connector_arguments)
        finally:
            for each in hosts:
                CACHE.forget(each)
                fact_batch.forget(each)

    return execute


# ------------------------------------------------------------------------------ op order

def operation_order_from_stack(state: Any) -> list[int]:
    """pyinfra's ``get_operation_order_from_stack`` (api/util.py) from the frames themselves:
    the same line numbers, without ``inspect.stack()`` reading a source line per frame."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()  # outermost first, as list(reversed(stack()))
    start = 0
    if state.current_deploy_filename:  # none matching: pyinfra keeps no frame at all
        start = next((i for i, item in enumerate(frames)
                      if item.f_code.co_filename == state.current_deploy_filename),
                     len(frames))
    line_numbers = [state.current_op_file_number] if pyinfra.is_cli else []
    for item in frames[start:]:
        if item.f_code.co_filename.startswith(PYINFRA_INSTALL_DIR):
            continue
        line_numbers.append(item.f_lineno)
    return line_numbers


@functools.cache
def _global_arguments() -> tuple[tuple[str, type], ...]:
    return tuple(_INSTALLED["global_arguments"]())


def all_global_arguments() -> list[tuple[str, type]]:
    """pyinfra's ``all_global_arguments`` (api/arguments.py), evaluated once."""
    return list(_global_arguments())


# Every module that calls pop_global_arguments by its own name.
_POPPING = (pyinfra_arguments, pyinfra_operation, pyinfra_deploy, pyinfra_facts)


def _set_op_data_shared(self: Any, host: Any, op_hash: str, op_data: Any) -> None:
    """pyinfra's ``State.set_op_data_for_host``, the operation's global arguments shared with
    the first host's when equal (planning.py)."""
    planning.share_arguments(self, op_hash, op_data)
    _INSTALLED["set_op_data"](self, host, op_hash, op_data)


def _host_init(self: Any, state: Any) -> None:
    """pyinfra's ``Host.init``, its print padding measured once per run (planning.py)."""
    planning.host_init(self, state, _INSTALLED["host_init"])


def _run_ops_paced(state: Any, serial: bool = False, no_wait: bool = False) -> None:
    """The CLI's ``run_ops``: each host at its own pace, meeting where the deploy says
    (schedule.py)."""
    planning.collect_as_usual()  # planned: the operations run with Python's gc thresholds
    schedule.run_ops(state, serial=serial, no_wait=no_wait, original=_INSTALLED["run_ops"])


def _print_prefix(self: Any) -> str:
    """pyinfra's ``Host.print_prefix``, naming the operation the host runs in a paced run."""
    return schedule.print_prefix(self, _INSTALLED["print_prefix"].fget)


# ------------------------------------------------------------------------------ install

def install() -> None:
    """Apply the four changes (idempotent)."""
    if _INSTALLED:
        return
    _INSTALLED["ssh_connect"] = SSHConnector._connect
    SSHConnector._connect = _connect_nodelay  # type: ignore[method-assign]
    _INSTALLED["ssh_run"] = SSHConnector.run_shell_command
    SSHConnector.run_shell_command = _run_limited  # type: ignore[method-assign]
    _INSTALLED["get_fact"] = pyinfra_host.Host.get_fact
    pyinfra_host.Host.get_fact = _get_fact_cached  # type: ignore[method-assign]
    for cls, every_host in ((pyinfra_command.StringCommand, False),
                            (pyinfra_command.FileUploadCommand, False),
                            (pyinfra_command.FileDownloadCommand, False),
                            (pyinfra_command.RsyncCommand, False),
                            (pyinfra_command.FunctionCommand, True)):
        name = f"{cls.__name__}.execute"
        _INSTALLED[name] = cls.execute
        cls.execute = _forgetting(name, every_host)  # type: ignore[method-assign]
    _INSTALLED["order"] = pyinfra_operation.get_operation_order_from_stack
    pyinfra_operation.get_operation_order_from_stack = operation_order_from_stack
    _INSTALLED["global_arguments"] = pyinfra_arguments.all_global_arguments
    pyinfra_arguments.all_global_arguments = all_global_arguments
    for module in _POPPING:
        _INSTALLED[f"pop:{module.__name__}"] = module.pop_global_arguments
        module.pop_global_arguments = planning.pop_global_arguments
    _INSTALLED["host_init"] = pyinfra_host.Host.init
    pyinfra_host.Host.init = _host_init  # type: ignore[method-assign]
    _INSTALLED["make_hash"] = pyinfra_operation.make_hash
    pyinfra_operation.make_hash = planning.make_hash
    _INSTALLED["set_op_data"] = pyinfra_state.State.set_op_data_for_host
    pyinfra_state.State.set_op_data_for_host = _set_op_data_shared  # type: ignore[method-assign]
    _INSTALLED["run_ops"] = pyinfra_cli_main.run_ops
    pyinfra_cli_main.run_ops = _run_ops_paced
    planning.collect_less()  # config.py runs before the deploy is planned
    _INSTALLED["print_prefix"] = pyinfra_host.Host.print_prefix
    pyinfra_host.Host.print_prefix = property(_print_prefix)  # type: ignore[method-assign]
    _INSTALLED["command_shlex"] = pyinfra_command.shlex
    pyinfra_command.shlex = planning.command_shlex


def uninstall() -> None:
    """Undo :func:`install` (tests)."""
    if not _INSTALLED:
        return
    SSHConnector._connect = _INSTALLED.pop("ssh_connect")  # type: ignore[method-assign]
    SSHConnector.run_shell_command = _INSTALLED.pop("ssh_run")  # type: ignore[method-assign]
    pyinfra_host.Host.get_fact = _INSTALLED.pop("get_fact")  # type: ignore[method-assign]
    for cls in (pyinfra_command.StringCommand, pyinfra_command.FileUploadCommand,
                pyinfra_command.FileDownloadCommand, pyinfra_command.RsyncCommand,
                pyinfra_command.FunctionCommand):
        cls.execute = _INSTALLED.pop(f"{cls.__name__}.execute")  # type: ignore[method-assign]
    pyinfra_operation.get_operation_order_from_stack = _INSTALLED.pop("order")
    pyinfra_arguments.all_global_arguments = _INSTALLED.pop("global_arguments")
    for module in _POPPING:
        module.pop_global_arguments = _INSTALLED.pop(f"pop:{module.__name__}")
    pyinfra_host.Host.init = _INSTALLED.pop("host_init")  # type: ignore[method-assign]
    pyinfra_operation.make_hash = _INSTALLED.pop("make_hash")
    pyinfra_state.State.set_op_data_for_host = _INSTALLED.pop(  # type: ignore[method-assign]
        "set_op_data")
    pyinfra_cli_main.run_ops = _INSTALLED.pop("run_ops")
    planning.collect_as_usual()
    pyinfra_host.Host.print_prefix = _INSTALLED.pop("print_prefix")  # type: ignore[method-assign]
    pyinfra_command.shlex = _INSTALLED.pop("command_shlex")
    _global_arguments.cache_clear()
