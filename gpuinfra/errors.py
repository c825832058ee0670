"""Exceptions raised by the library. Each carries a message meant for a human operator."""

from typing import Any


class GpuinfraError(Exception):
    """Base class for every error the library raises on purpose."""


class ParseError(GpuinfraError):
    """Tool output that cannot be read without guessing.

    ``source`` names the command whose output was being parsed (e.g. ``nvidia-smi topo -m``);
    ``line`` is the 1-based line number where the problem was found, when known.
    """

    def __init__(self, source: str, message: str, line: int | None = None):
        self.source = source
        self.line = line
        where = f" (line {line})" if line is not None else ""
        super().__init__(f"{source}: {cut(message)}{where}")


# A message never echoes a huge value whole (a 1 MB value would make a 1 MB message).
ECHO_LIMIT = 80


MESSAGE_LIMIT = 400


def cut(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """``message`` cut in the middle to about ``limit`` characters (its start says what is
    wrong, its end where): a message that quotes a 50 MB line stays readable."""
    if len(message) <= limit:
        return message
    tail = limit // 4
    return f"{message[:limit - tail - 30]}...[{len(message)} chars]...{message[-tail:]}"


def clip(value: Any, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)`` cut to ``limit`` characters: a message never echoes a huge value whole."""
    text_ = repr(value)
    if len(text_) <= limit:
        return text_
    return f"{text_[:limit - 20]}...[{len(text_)} chars]"
