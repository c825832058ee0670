"""group_data/all.py sets nothing: it shows each cluster-wide key with its default, and the
default shown is the spec's (gpuinfra/spec/model.py: CLUSTER_KEYS), so the two cannot drift."""

from __future__ import annotations

import ast
import re

from gpuinfra.spec.model import CLUSTER_KEYS
from tests.conftest import REPO

ALL = REPO / "group_data" / "all.py"


def shown(text: str) -> dict[str, object]:
    return {m.group(1): ast.literal_eval(m.group(2))
            for m in re.finditer(r"^# ([a-z_]+) = (.*)$", text, re.M)}


def drift(text: str) -> list[str]:
    found = shown(text)
    return [f"{k}: shows {v!r}, the default is {CLUSTER_KEYS.get(k)!r}"
            for k, v in found.items() if k not in CLUSTER_KEYS or CLUSTER_KEYS[k] != v]


def test_all_py_assigns_nothing():
    assigned = [n for n in ast.parse(ALL.read_text()).body if isinstance(n, ast.Assign)]
    assert assigned == []


def test_the_defaults_shown_are_the_specs():
    assert len(shown(ALL.read_text())) >= 15
    assert drift(ALL.read_text()) == []


def test_the_check_can_fail():
    assert drift('# driver_branch = "550"\n') == [
        f"driver_branch: shows '550', the default is {CLUSTER_KEYS['driver_branch']!r}"]
