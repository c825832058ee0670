"""gpuinfra_deploy/templates/once.py: within one deploy, a template rendered with the same
values is rendered once; values that differ in any way, another run, or no run at all render
again."""

from __future__ import annotations

import os
from ipaddress import IPv4Address
from pathlib import Path

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.context import ctx_state

from gpuinfra.text import Block
from gpuinfra_deploy import templates
from gpuinfra_deploy.templates import once, render
from tests.conftest import REPO

NAME = "slurm/etc/slurm/cgroup.conf.j2"
VALUES = {"settings": {"cgroup_plugin": "cgroup/v2"}}


@pytest.fixture
def site(tmp_path):
    templates.use_site([tmp_path])
    yield tmp_path
    templates.use_site(templates.site_folders(cwd=str(REPO)))


def _state() -> State:
    return State(Inventory(([], {})), Config())


def test_the_key_is_strict():
    def k(**context):
        return once.key(NAME, context, None)

    assert k(a=[1, "x"], b={"c": None}) == k(a=[1, "x"], b={"c": None})
    assert k(a=1) != k(a=True) and k(a=1) != k(a=1.0)
    assert k(a="x") != k(a=Block("x"))
    assert k(a={"x": 1, "y": 2}) != k(a={"y": 2, "x": 1})
    assert k(a=[1]) != k(a=(1,))
    assert k(a=IPv4Address("10.0.0.1"), p=Path("/etc")) == \
        k(a=IPv4Address("10.0.0.1"), p=Path("/etc"))
    assert once.key("other.j2", VALUES, None) != once.key(NAME, VALUES, None)
    assert once.key(NAME, VALUES, (Path("/a"),)) != once.key(NAME, VALUES, None)


def test_values_it_cannot_compare_are_not_remembered():
    assert once.key(NAME, {"node": object()}, None) is None
    assert once.key(NAME, {"lines": list(range(once.MAX_VALUES + 1))}, None) is None


def test_within_a_run_the_same_values_render_once(site):
    with ctx_state.use(_state()):
        first = render(NAME, **VALUES)
        assert render(NAME, **VALUES) is first
        other = render(NAME, settings={"cgroup_plugin": "cgroup/v1"})
        assert other is not first and "cgroup/v1" in other


def test_another_run_or_none_renders_again(site):
    path = site / NAME
    path.parent.mkdir(parents=True)
    path.write_text("one {{ settings.cgroup_plugin }}\n")
    with ctx_state.use(_state()):
        assert render(NAME, **VALUES) == "one cgroup/v2\n"
    path.write_text("two {{ settings.cgroup_plugin }}\n")
    os.utime(path, ns=(0, 1))  # another modification time, whatever the clock's grain
    with ctx_state.use(_state()):
        assert render(NAME, **VALUES) == "two cgroup/v2\n"
    with ctx_state.use(None):  # outside a run
        assert render(NAME, **VALUES) is not render(NAME, **VALUES)


def test_a_template_changed_or_added_since_is_rendered_again(site):
    """A State can outlive its run (pyinfra's ctx_state.use does not put the previous one
    back when its block raises): a remembered text still follows the files on disk."""
    with ctx_state.use(_state()):
        ours = render(NAME, **VALUES)
        assert not ours.override and render(NAME, **VALUES) is ours
        path = site / NAME
        path.parent.mkdir(parents=True)
        path.write_text("site {{ settings.cgroup_plugin }}\n")  # a site override, new
        theirs = render(NAME, **VALUES)
        assert theirs == "site cgroup/v2\n" and theirs.override
        path.write_text("edited {{ settings.cgroup_plugin }}\n")
        os.utime(path, ns=(0, 1))  # another modification time, whatever the clock's grain
        assert render(NAME, **VALUES) == "edited cgroup/v2\n"
        path.unlink()
        assert render(NAME, **VALUES) == ours


def test_a_run_keeps_what_it_asks_again_and_forgets_the_rest(site, monkeypatch):
    monkeypatch.setattr(once, "KEPT", 3)
    with ctx_state.use(_state()):
        shared = render(NAME, **VALUES)  # every worker's
        once_only = render(NAME, settings={"cgroup_plugin": "a"})  # one host's
        for plugin in ("b", "c"):
            render(NAME, settings={"cgroup_plugin": plugin})
            assert render(NAME, **VALUES) is shared
        assert render(NAME, settings={"cgroup_plugin": "a"}) is not once_only
