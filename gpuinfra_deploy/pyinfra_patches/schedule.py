"""Each host goes through the deploy at its own pace; hosts meet only where one needs another.

pyinfra runs an operation on every host and waits for the slowest before it starts the next
(``pyinfra.api.operations.run_ops``). Most of this project's operations concern one host only,
and the wait cost the cold deploy most of a package install per role: the workers' driver
install and the head's Slurm install ran one after the other, each host idle while the other
installed (docs/measurements.md, "Where a cold deploy's time goes"), and on a no-op over a
fleet every operation waited for the slowest of all hosts.

Here every host runs its own operations in the deploy's order, without waiting for the others,
except at a **meeting**: an operation planned inside :func:`meeting` starts on a host only
once every other host of the run has finished every operation before it (pyinfra's own rule,
for that operation). The deploy's meetings:

- every operation of the roles that need the head (``Role.needs_head``: MUNGE, Slurm, job
  containers, Kubernetes: the head's key and controller, a worker's judgement of the head's
  files, a label on a node that joined; gpuinfra_deploy/run/role.py);
- every copy of a file made on the head (gpuinfra_deploy/ops/from_head.py), and the central
  logs' operations shared by the head and the nodes (an uploader starts once the head's
  receiver runs: roles/logs).

A host that fails stops there (pyinfra's rule) and no longer holds a meeting; past the site's
fail percent every host stops at its next operation and the run ends with pyinfra's error.
pyinfra's callbacks see each operation start once (its first host) and end once (its last).
Since the hosts' lines of different operations interleave, each line a host prints during an
operation names it (``[lab-worker1] nvidia_driver | Install the NVIDIA driver: Success``:
:func:`print_prefix`, in place of pyinfra's ``Host.print_prefix``; a run of one operation,
such as ``pyinfra exec``, prints as pyinfra does), and no ``--> Starting operation`` heading is
printed. ``GPUINFRA_PACED=off``, ``--serial``, ``--no-wait``
or any operation with ``_serial``/``_parallel`` give pyinfra's own order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gevent
from gevent.event import Event
from gevent.lock import Semaphore
from pyinfra.api import operations as pyinfra_operations
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.output import format_text
from pyinfra.context import ctx_host, ctx_state

_MEETINGS = "_gpuinfra_meetings"  # on a State: the hashes of its meeting operations


@contextmanager
def meeting(host: Any | None = None) -> Iterator[None]:
    """The operations planned inside are meetings (see the module), for every host that
    plans them (an operation is one across the hosts: its hash)."""
    host = host or ctx_host.get()
    state = host.state
    before = set(state.ops.get(host, {}))
    try:
        yield
    finally:
        made = set(state.ops.get(host, {})) - before
        if made:
            meetings = getattr(state, _MEETINGS, None)
            if meetings is None:
                meetings = set()
                setattr(state, _MEETINGS, meetings)
            meetings.update(made)


def meetings_of(state: Any) -> set[Any]:
    return getattr(state, _MEETINGS, None) or set()


def enabled() -> bool:
    return os.environ.get("GPUINFRA_PACED", "on").lower() not in ("off", "0", "no")


def run_ops(state: Any, serial: bool = False, no_wait: bool = False,
            original: Callable[..., Any] | None = None) -> None:
    """pyinfra's ``run_ops``, each host at its own pace (see the module)."""
    original = original or pyinfra_operations.run_ops
    order = state.get_op_order()
    hosts = list(state.inventory.get_active_hosts())
    plain = serial or no_wait or not enabled() or len(hosts) < 2 or any(
        _own_pace(state.get_op_meta(op).global_arguments, state.config) for op in order)
    if plain:
        original(state, serial=serial, no_wait=no_wait)
        return
    state.is_executing = True
    with ctx_state.use(state):
        Paced(state, order, hosts).run()


# The host -> the operation it runs now in a paced run (its printed lines name it).
_DOING: dict[Any, str] = {}


def print_prefix(host: Any, original: Callable[[Any], str]) -> str:
    """pyinfra's ``[host] `` prefix; in a paced run, the operation the host runs after it."""
    prefix = original(host)
    doing = _DOING.get(host)
    return f"{prefix}{format_text(doing, 'blue')}: " if doing else prefix


def _own_pace(arguments: Any, config: Any) -> bool:
    """An operation that asks to run host by host (``_serial``) or on fewer hosts at once
    than the run (``_parallel`` other than config.PARALLEL, its default)."""
    parallel = arguments.get("_parallel")
    return bool(arguments.get("_serial")) or \
        parallel not in (None, 0, getattr(config, "PARALLEL", None))


class Paced:
    """One run's hosts, each in its own greenlet, and where each has got to."""

    def __init__(self, state: Any, order: list[Any], hosts: list[Any]) -> None:
        self.state, self.order, self.hosts = state, order, hosts
        self.next = {h: 0 for h in hosts}  # the index of the host's next operation
        meets = meetings_of(state)
        # Per meeting (its index in the order): how many hosts have not yet finished every
        # operation before it, and the event set when none is left (O(1) per step of a host).
        self.behind = {i: len(hosts) if i else 0 for i, op in enumerate(order) if op in meets}
        self.met = {i: Event() for i in self.behind}
        for i, count in self.behind.items():
            if not count:
                self.met[i].set()
        self.pending = {op: {h for h in hosts if op in state.ops[h]} for op in order}
        self.started: set[Any] = set()
        # pyinfra's error past the fail percent, or what a host's greenlet raised (pyinfra's
        # own run raises it too): every host stops at its next operation, the run raises it
        self.errors: list[BaseException] = []
        # pyinfra's pool size: at most that many hosts run an operation at once (a host
        # waiting at a meeting holds no slot, so a meeting never waits for a host kept out)
        size = getattr(getattr(state, "pool", None), "size", None) or len(hosts)
        self.slots = Semaphore(size)

    def run(self) -> None:
        gevent.joinall([gevent.spawn(self._host, h) for h in self.hosts])
        if self.errors:
            raise self.errors[0]

    def _arrive(self, index: int) -> None:
        """One more host has finished every operation before ``index``."""
        if index in self.behind:
            self.behind[index] -= 1
            if not self.behind[index]:
                self.met[index].set()

    def _stop_all(self) -> None:
        for event in self.met.values():  # a host waiting at a meeting sees the error
            event.set()

    def _end(self, op: Any, host: Any) -> None:
        waiting = self.pending[op]
        if host in waiting:
            waiting.discard(host)
            if not waiting and op in self.started:
                self.state.trigger_callbacks("operation_end", op)

    def _host(self, host: Any) -> None:
        try:
            self._steps(host)
        except Exception as exc:  # noqa: BLE001 (raised again by run(), after every host)
            self.errors.append(exc)
            self._stop_all()
        finally:
            for op in self.order[self.next[host]:]:
                self._end(op, host)
            for index in self.behind:  # gone: it holds no later meeting
                if index > self.next[host]:
                    self._arrive(index)

    def _steps(self, host: Any) -> None:
        for index, op in enumerate(self.order):
            if self.errors or host not in self.state.active_hosts:
                return
            if op in self.state.ops[host]:
                if index in self.met:
                    self.met[index].wait()
                if self.errors or not self._run(host, op):
                    return
            self.next[host] = index + 1
            self._arrive(index + 1)

    def _run(self, host: Any, op: Any) -> bool:
        with self.slots:
            if op not in self.started:
                self.started.add(op)
                self.state.trigger_callbacks("operation_start", op)
            if len(self.order) > 1:  # one operation (`pyinfra exec`): nothing interleaves
                _DOING[host] = ", ".join(sorted(self.state.get_op_meta(op).names)) or str(op)
            try:
                ok = pyinfra_operations._run_host_op_with_context(self.state, host, op)
            finally:
                _DOING.pop(host, None)
        self._end(op, host)
        if ok:
            return True
        try:
            self.state.fail_hosts({host})
        except PyinfraError as exc:  # past the fail percent, or no host left: all stop
            self.errors.append(exc)
            self._stop_all()
        return False
