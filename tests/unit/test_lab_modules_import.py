"""Every module of the lab imports: a proof `make demo` or molecule runs late must not fail on a
name another module renamed (bad_template.py once imported a probe bad_slurm_conf.py had
renamed, and only the demo's last steps found it)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import gpuinfra_lab

MODULES = sorted(m.name for m in pkgutil.iter_modules(gpuinfra_lab.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_lab_module_imports(name: str) -> None:
    importlib.import_module(f"gpuinfra_lab.{name}")
