"""The spec's Slurm and MUNGE keys: ``slurm_accounting`` (a flag) and ``munge_key_rotation`` (a
token whose change rotates the cluster's MUNGE key once)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuinfra.spec import HostInput, SpecInvalid, build_cluster, validate
from gpuinfra.spec.model import CLUSTER_KEYS

HGX = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}


def site(**everywhere: Any) -> list[HostInput]:
    return [HostInput("head01", ("head",), dict(everywhere)),
            HostInput("hgx01", ("workers",), {**HGX, **everywhere})]


def errors_of(hosts: list[HostInput]) -> list:
    return validate(hosts)


def the_error(hosts: list[HostInput], field: str):
    errors = errors_of(hosts)
    assert [e.field for e in errors] == [field], errors
    return errors[0]


# ----------------------------------------------------------------------------- defaults

def test_defaults_are_no_accounting_and_no_rotation():
    assert CLUSTER_KEYS["slurm_accounting"] is False
    assert CLUSTER_KEYS["munge_key_rotation"] is None
    spec = build_cluster(site())
    assert spec.slurm_accounting is False and spec.munge_key_rotation is None


# ----------------------------------------------------------------------------- slurm_accounting

@pytest.mark.parametrize("value", [True, False])
def test_slurm_accounting_true_or_false(value):
    assert build_cluster(site(slurm_accounting=value)).slurm_accounting is value


@pytest.mark.parametrize("value", ["yes", "True", 1, 0, None, [True]])
def test_slurm_accounting_that_is_not_a_bool_is_named(value):
    error = the_error(site(slurm_accounting=value), "slurm_accounting")
    assert error.host == "cluster" and error.value == value
    assert error.problem == "must be True or False"
    assert "slurmdbd" in error.fix


def test_slurm_accounting_differing_between_hosts_is_named():
    hosts = [HostInput("head01", ("head",), {"slurm_accounting": True}),
             HostInput("hgx01", ("workers",), {**HGX, "slurm_accounting": False})]
    error = the_error(hosts, "slurm_accounting")
    assert error.problem == "differs between hosts"


def test_a_typo_of_slurm_accounting_is_named():
    hosts = site(slurm_acounting=True)
    errors = errors_of(hosts)
    assert errors and "did you mean 'slurm_accounting'" in errors[0].problem


# ----------------------------------------------------------------------------- munge_key_rotation

@pytest.mark.parametrize("value", ["2026-11-22", "2026.11", "q4:rotation_2", "a", "x" * 64])
def test_rotation_tokens(value):
    assert build_cluster(site(munge_key_rotation=value)).munge_key_rotation == value


@pytest.mark.parametrize("value", [
    "2026 11 22", " 2026-11-22", "2026-11-22 ", "2026\n11", "\n2026-11-22", "2026\t11",
    "", "x" * 65, "rotate;now", "$(reboot)", "it's", 20261122, True, ["2026-11"],
])
def test_rotation_tokens_with_spaces_newlines_or_other_characters_are_refused(value):
    error = the_error(site(munge_key_rotation=value), "munge_key_rotation")
    assert error.host == "cluster" and error.problem == "not a rotation token"
    assert "1-64 letters, digits" in error.allowed and "rotate the key once" in error.fix


def test_a_rotation_token_with_a_trailing_newline_is_refused():
    """A '$' anchor would let "2026-11-22\n" through: the munge role would then write it, read
    back "2026-11-22" from the rotation file, and rotate the key on every deploy."""
    error = the_error(site(munge_key_rotation="2026-11-22\n"), "munge_key_rotation")
    assert error.problem == "not a rotation token"


def test_rotation_differing_between_hosts_is_named_and_raises():
    hosts = [HostInput("head01", ("head",), {"munge_key_rotation": "2026-11"}),
             HostInput("hgx01", ("workers",), {**HGX, "munge_key_rotation": "2026-12"})]
    with pytest.raises(SpecInvalid, match="munge_key_rotation"):
        build_cluster(hosts)
