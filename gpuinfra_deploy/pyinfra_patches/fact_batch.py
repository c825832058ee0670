"""A host's fact reads in one SSH round trip: what the last run asked it, asked at once.

pyinfra reads each fact with a command of its own, one SSH channel each (sshd forks a
session, PAM, a shell), in series per host while it plans: a no-op of this project's deploy
sends a fleet worker about 170 of them (docs/measurements.md, "Fleet"). Those commands are the
same from one run to the next. So each host keeps, between runs, the fact commands it was
sent before anything ran on it (the whole of a no-op's reads; a first deploy's planning), in
order. When such a read misses, that list is read in one round trip
(:func:`gpuinfra.shell_batch.batch_script`: each command run as sshd would run it, its exit
code, stdout and stderr back byte for byte) and the reads that follow are answered from it.

Only reads before the host's first change are batched. Once a command ran on the host (the
engine drops its cached facts then, engine.py) every read goes live, as pyinfra sends it: the
reads between two changes are a few each, and a list learned on a converged host says nothing
of them (tried: prefetching the learned list after each change of a first deploy made it
several times slower). A read the last run did not ask, and a first read with nothing else to
batch, go live too. Never batched (nor written down): a command whose printed form hides a
value (a password, a ``HiddenValue``: :meth:`StringCommand.get_masked_value` differs from the
raw one), a read with standard input, a pty, a timeout or a sudo/su password in play, and any
read while pyinfra prints fact input or output (``-vv``). A round trip that cannot be read
(no ``mktemp``/``base64`` on the node, a cut output) turns batching off for that host: one
command per read, as pyinfra does.

Learned lists live in ``$GPUINFRA_DEPLOY_CACHE`` (else ``~/.cache/gpuinfra/deploy-facts``),
one folder per inventory file (0700, files 0600), written whole at the end of the run. Their
commands run on the hosts, so a list whose file or folder is another user's, or writable by
group or others, is not used, and the run says so with the fix
(:class:`gpuinfra_deploy.run.learned.LearnedLists`, shared with the verify suite).
``GPUINFRA_FACT_BATCH=off`` sends every read on its own (benchmarks compare the two).
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.shell_batch import BatchUnreadable, batch_script, parse_batch
from gpuinfra_deploy.run.learned import LearnedLists, learned_folder

Answer = tuple[int, bytes, bytes]
Send = Callable[[str], Answer]

# At most this many commands in one round trip.
WINDOW = 400
ATTR = "_gpuinfra_fact_batch"


@dataclass
class Learned:
    """Where the learned lists are kept (None: nothing learned, nothing batched) and whether
    they are saved at exit."""

    lists: LearnedLists | None = None
    saving: bool = False


LEARNED = Learned()


def enabled() -> bool:
    return LEARNED.lists is not None and \
        os.environ.get("GPUINFRA_FACT_BATCH", "on").lower() not in ("off", "0", "no")


def configure(inventory: str) -> None:
    """Learn per host of ``inventory`` (the gate calls this with the run's inventory file)."""
    LEARNED.lists = LearnedLists(
        learned_folder(inventory, "deploy-facts", "GPUINFRA_DEPLOY_CACHE"))
    if not LEARNED.saving:
        LEARNED.saving = True
        atexit.register(save_all)


_HOSTS: dict[str, HostFacts] = {}


@dataclass
class HostFacts:
    """One host's learned reads, this run's reads before its first change, and the answers
    it holds now."""

    name: str
    kind: str
    learned: list[str]
    asked: list[str] = field(default_factory=list)  # before the first change, in order
    answers: dict[str, Answer] = field(default_factory=dict)
    reading: set[str] = field(default_factory=set)  # in the round trip under way
    changed: bool = False  # something ran on the host: every read goes live from now on
    off: str = ""  # why batching stopped for this host
    round_trips: int = 0
    waiter: Any = None  # the round trip under way (a gevent Event)

    def forget(self) -> None:
        self.answers.clear()
        self.changed = True

    def wanted(self, command: str) -> list[str]:
        """``command`` and the rest of the learned list, not held nor being read."""
        if command not in self.learned:
            return [command]
        rest = [c for c in self.learned if c != command and c not in self.answers
                and c not in self.reading]
        return [command, *rest][:WINDOW]

    def read(self, command: str, send: Send) -> Answer | None:
        """The held answer for ``command`` (read in one round trip with the learned list when
        it is not held yet), or None: the caller sends it on its own."""
        import gevent.event

        if self.changed:
            return None
        if command not in self.asked:
            self.asked.append(command)
        if command in self.answers:
            return self.answers[command]
        if command in self.reading and self.waiter is not None:
            self.waiter.wait()
            return self.answers.get(command)
        if self.off:
            return None
        wanted = self.wanted(command)
        if len(wanted) < 2:
            return None
        waiter = gevent.event.Event()
        self.reading.update(wanted)
        self.waiter = waiter
        try:
            self.round_trips += 1
            rc, out, err = send(batch_script(wanted))
            if rc != 0:
                raise BatchUnreadable(f"exit {rc}: {err.decode('utf-8', 'replace')[-200:]}")
            answers = parse_batch(out, len(wanted))
        except BatchUnreadable as exc:
            self.off = f"{self.name}: fact reads in one round trip failed ({exc}); " \
                "each read is sent on its own"
            return None
        finally:
            self.reading.difference_update(wanted)
            waiter.set()
            if self.waiter is waiter:
                self.waiter = None
        if not self.changed:  # a change while it was read: its answers may be stale
            self.answers.update(zip(wanted, answers, strict=True))
        return answers[0]


def for_host(host: Any) -> HostFacts | None:
    """The host's :class:`HostFacts` (None when batching is off)."""
    if not enabled():
        return None
    facts = getattr(host, ATTR, None)
    if facts is None:
        kind = ",".join(sorted(g.name if hasattr(g, "name") else str(g)
                               for g in getattr(host, "groups", ()) or ()))
        facts = HostFacts(host.name, kind, _learned(host.name, kind))
        setattr(host, ATTR, facts)
        _HOSTS[host.name] = facts
    return facts


def forget(host: Any) -> None:
    facts = getattr(host, ATTR, None)
    if facts is not None:
        facts.forget()


def _learned(name: str, kind: str) -> list[str]:
    """The host's reads from its last run; else those of a host of the same groups."""
    lists = LEARNED.lists
    if lists is None:
        return []
    own = lists.own(name)
    return own if own is not None else lists.of_kind(kind)


def save_all() -> None:
    """Each host's reads of this run before its first change, for the next (written whole,
    then renamed); what kept batching from working said on stderr."""
    for problem in problems():
        print(f"gpuinfra: {problem}", file=sys.stderr)
    lists = LEARNED.lists
    if lists is None:
        return
    for facts in list(_HOSTS.values()):
        if not facts.asked:
            continue
        try:
            lists.save(facts.name, facts.kind, facts.asked)
        except OSError:
            return  # the next run reads each fact on its own: nothing else changes


def reset() -> None:
    """Forget every host and the folder (tests)."""
    _HOSTS.clear()
    LEARNED.lists = None


def problems() -> list[str]:
    """What kept batching from working in this run, once per cause."""
    untrusted = LEARNED.lists.untrusted.values() if LEARNED.lists else ()
    return list(dict.fromkeys([*untrusted, *(f.off for f in _HOSTS.values() if f.off)]))
