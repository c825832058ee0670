"""One "managed by" line (gpuinfra.header) on every file gpuinfra writes, in the file's syntax."""

from __future__ import annotations

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER, MANAGED, header


def test_the_line_in_each_comment_syntax():
    assert HEADER == header("#") == f"# {MANAGED}\n"
    assert header("//") == f"// {MANAGED}\n"
    assert header("<!--") == f"<!-- {MANAGED} -->\n"
    with pytest.raises(GpuinfraError, match="no comment syntax ';'"):
        header(";")

