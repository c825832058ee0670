"""The site's max_fail_percent becomes pyinfra's FAIL_PERCENT in non-interactive runs."""

from __future__ import annotations

import pytest
from pyinfra.api import Config
from pyinfra.context import ctx_config

from gpuinfra.spec import HostInput
from gpuinfra_deploy.pyinfra_patches.gate import _fail_percent
from gpuinfra_deploy.run.knobs import build_spec


def spec(**site):
    return build_spec([HostInput("head", ("head",), {"node_address": "10.0.0.1", **site}),
                       HostInput("w1", ("workers",), {"node_address": "10.0.0.2", **site})])


@pytest.mark.parametrize(("params", "expected"), [
    ({"yes": True, "fail_percent": None}, 50),          # -y: the site's default
    ({"json_output": True, "fail_percent": None}, 50),  # --json
    ({"yes": True, "fail_percent": 10}, "untouched"),   # --fail-percent wins
    ({"yes": False, "fail_percent": None}, "untouched"),  # interactive: pyinfra asks
])
def test_fail_percent_from_the_site(params, expected):
    config = Config()
    config.FAIL_PERCENT = "untouched"
    with ctx_config.use(config):
        _fail_percent(params, spec())
    assert config.FAIL_PERCENT == expected


def test_the_site_chooses_its_share():
    config = Config()
    with ctx_config.use(config):
        _fail_percent({"yes": True}, spec(max_fail_percent=0))
    assert config.FAIL_PERCENT == 0


def test_a_bad_share_is_refused_at_the_gate():
    from gpuinfra.spec import SpecInvalid

    with pytest.raises(SpecInvalid, match="max_fail_percent"):
        spec(max_fail_percent=150)
