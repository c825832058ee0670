"""One "managed by" line (gpuinfra.header) on every file gpuinfra writes, in the file's syntax."""

from __future__ import annotations

import re

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER, MANAGED, header
from tests.conftest import REPO


def test_the_line_in_each_comment_syntax():
    assert HEADER == header("#") == f"# {MANAGED}\n"
    assert header("//") == f"// {MANAGED}\n"
    assert header("<!--") == f"<!-- {MANAGED} -->\n"
    with pytest.raises(GpuinfraError, match="no comment syntax ';'"):
        header(";")


# Another wording of the line, typed into a module or a template instead of imported.
_OTHER_WORDING = re.compile(r"(managed|written) by gpuinfra", re.IGNORECASE)


@pytest.mark.parametrize("package", ["gpuinfra", "gpuinfra_deploy", "gpuinfra_roles"])
def test_no_other_wording_of_the_line(package):
    files = [p for p in (REPO / package).rglob("*") if p.suffix in (".py", ".j2")
             and p != REPO / "gpuinfra" / "header.py"]
    found = [f"{p.relative_to(REPO)}:{n}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if _OTHER_WORDING.search(line) and "gpuinfra.header" not in line]
    assert found == []


def test_the_wording_check_can_fail():
    assert _OTHER_WORDING.search("# Written by gpuinfra (monitoring role): the daemon's args.")
    assert _OTHER_WORDING.search("# slurm.conf: managed by gpuinfra (gpuinfra_roles/slurm)")
