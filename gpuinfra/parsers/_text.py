"""Text helpers shared by the parsers."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (terminal captures carry bold/underline codes)."""
    return _ANSI.sub("", text)


def clean_lines(text: str) -> list[str]:
    """Lines of ``text`` with ANSI escapes and carriage returns removed, right-stripped."""
    return [line.rstrip() for line in strip_ansi(text).replace("\r", "").split("\n")]
