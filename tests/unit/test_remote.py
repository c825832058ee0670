"""Execution-time transfers never drive one host's SFTP client from two greenlets at once
(pyinfra runs an operation on all hosts concurrently and keeps one SFTP client per host; two
workers fetching the head's MUNGE key at once hung the lab deploy until this lock)."""

from __future__ import annotations

from io import BytesIO
from types import SimpleNamespace

import gevent
import pytest

from gpuinfra.errors import GpuinfraError
from roles.remote import get_bytes, put_bytes


class SlowHost:
    """A host whose transfers take a while and record how many overlap."""

    def __init__(self, name: str, ok: bool = True):
        self.name, self.ok = name, ok
        self.data = {}
        self.state = SimpleNamespace(config=SimpleNamespace(SUDO=False))
        self.active = self.most = 0

    def _transfer(self):
        self.active += 1
        self.most = max(self.most, self.active)
        gevent.sleep(0.01)
        self.active -= 1
        return self.ok

    def get_file(self, path, buffer, **kwargs):
        ok = self._transfer()
        buffer.write(b"k" * 64)
        return ok

    def put_file(self, buffer, path, **kwargs):
        return self._transfer()


def test_two_readers_of_one_host_take_turns():
    head = SlowHost("head")
    readers = [gevent.spawn(get_bytes, head, "/etc/munge/munge.key", "munge") for _ in range(3)]
    gevent.joinall(readers, raise_error=True)
    assert [r.value for r in readers] == [b"k" * 64] * 3
    assert head.most == 1


def test_without_the_lock_they_would_overlap():
    """The check can fail: the same readers calling get_file directly do overlap."""
    head = SlowHost("head2")
    readers = [gevent.spawn(head.get_file, "/x", BytesIO()) for _ in range(3)]
    gevent.joinall(readers, raise_error=True)
    assert head.most == 3


def test_different_hosts_do_not_wait_on_each_other_and_failures_are_named():
    hosts = [SlowHost(f"w{i}") for i in range(3)]
    writers = [gevent.spawn(put_bytes, h, b"x", "/tmp/x", "munge") for h in hosts]
    gevent.joinall(writers, raise_error=True)
    assert all(h.most == 1 for h in hosts)
    with pytest.raises(GpuinfraError, match="munge: cannot read /k on bad"):
        get_bytes(SlowHost("bad", ok=False), "/k", "munge")
    with pytest.raises(GpuinfraError, match="munge: cannot write /k on bad"):
        put_bytes(SlowHost("bad", ok=False), b"x", "/k", "munge")
