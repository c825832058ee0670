"""How a verify check fails: the first line goes to the junit properties (`gpuinfra report`),
the whole message (what was seen, cause, fix) to pytest, without a traceback."""

from __future__ import annotations

from collections.abc import Callable

import pytest

Note = Callable[[str, object], None]


def fail(note: Note, message: str) -> None:
    note("failure", message.splitlines()[0])
    pytest.fail(message, pytrace=False)
