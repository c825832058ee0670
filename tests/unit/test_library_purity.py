"""The `gpuinfra` library stays pure: no pyinfra, no subprocesses, no file or network I/O."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import REPO

FORBIDDEN_MODULES = {"pyinfra", "pyinfra_cli", "subprocess", "socket", "urllib.request",
                     "requests", "shutil", "gpuinfra_cli"}
FORBIDDEN_CALLS = {"open", "exec", "eval", "__import__"}

LIBRARY = sorted((REPO / "gpuinfra").rglob("*.py"))


def violations(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in FORBIDDEN_CALLS:
                found.append(f"call {node.func.id}() at line {node.lineno}")
            continue
        elif isinstance(node, ast.Attribute) and node.attr in ("read_text", "write_text",
                                                                "read_bytes", "system"):
            found.append(f".{node.attr} at line {node.lineno}")
            continue
        else:
            continue
        for name in names:
            if any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES):
                found.append(f"import {name} at line {node.lineno}")
    return found


@pytest.mark.parametrize("path", LIBRARY, ids=[str(p.relative_to(REPO)) for p in LIBRARY])
def test_module_is_pure(path):
    assert violations(path.read_text()) == []


def test_purity_check_can_fail():
    assert violations("import pyinfra.operations\n")
    assert violations("from subprocess import run\n")
    assert violations("data = open('x').read()\n")
    assert violations("from pathlib import Path\nPath('x').read_text()\n")
