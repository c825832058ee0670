"""Role knobs join the spec gate: defaults, rules, typos and site-wide agreement, before any
host is touched, in the spec's own error shape."""

from __future__ import annotations

from importlib import import_module

import pytest

from gpuinfra.spec import HostInput, SpecInvalid
from gpuinfra.spec.knobs import Knob
from gpuinfra_deploy.run.knobs import (
    build_spec,
    knobs_of,
    role_knobs,
    role_names,
    role_scheduler,
    spec_problems,
)
from tests.conftest import REPO

ROLE_KNOBS = knobs_of()


def hosts(**worker_data) -> list[HostInput]:
    return [
        HostInput("head01", ("head",), {"node_address": "10.0.0.1"}),
        HostInput("gpu01", ("workers",), {"node_address": "10.0.0.2",
                                          "gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
                                          "gpu_topology": "nvswitch-all-to-all",
                                          **worker_data}),
    ]


def test_every_knob_default_passes_its_own_rule():
    for knob in ROLE_KNOBS:
        assert knob.rule.problem(knob.default) is None, knob.key


def test_knob_keys_are_unique_and_role_prefixed():
    """Each role's knobs carry its folder's name as prefix: the registry finds the roles by
    folder, and a foreign deploy's typo check covers exactly the prefixes of its roles."""
    keys = [k.key for k in ROLE_KNOBS]
    assert len(keys) == len(set(keys))
    for role in role_names():
        assert all(k.key.startswith(f"{role}_") for k in role_knobs(role)), role


def test_the_registry_sees_every_role_folder():
    """A role is its folder: the registry lists each folder of roles/ (each has a defaults.py,
    tests/unit/test_layers.py), and nothing else."""
    folders = sorted(p.name for p in (REPO / "roles").iterdir()
                     if p.is_dir() and p.name != "__pycache__")
    assert list(role_names()) == folders


def test_a_scheduler_role_declares_its_scheduler_and_needs_the_head():
    """defaults.py's SCHEDULER (read by file: a deploy of that role alone defaults to its
    scheduler) goes with the role's needs_head, in each role."""
    for role in role_names():
        needs_head = import_module(f"gpuinfra_roles.{role}").ROLE.needs_head
        assert (role_scheduler(role) is not None) == needs_head, role
    assert build_spec(hosts(), roles=["munge"]).schedulers == ("slurm",)
    assert build_spec(hosts(), roles=["nvidia_driver"]).schedulers == ()


def test_loading_the_knobs_loads_no_role_and_no_pyinfra():
    """roles' defaults.py are read by file: the gate's registry pulls in no role package."""
    import subprocess
    import sys

    code = ("import sys; from gpuinfra_deploy.run.knobs import knobs_of; knobs_of(); "
            "print(sorted(m for m in sys.modules if m.startswith(('pyinfra', 'gpuinfra_roles'))"
            " and not m.endswith('.defaults') and m != 'gpuinfra_roles'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_settings_carry_host_data_over_the_defaults():
    spec = build_spec(hosts(nvidia_driver_device_group="gpu", unrelated=1))
    settings = spec.node("gpu01").settings
    assert settings["nvidia_driver_device_group"] == "gpu"
    assert settings["nvidia_driver_device_mode"] == "0660"
    assert "chrony" in settings["common_packages"]
    assert "unrelated" not in settings
    assert spec.node("head01").settings["nvidia_driver_device_group"] == "video"


@pytest.mark.parametrize(("key", "value", "words"), [
    ("nvidia_driver_device_group", "GPU users", "not a POSIX user or group name"),
    ("nvidia_driver_device_mode", "0999", "not an octal mode"),
    ("nvidia_driver_device_mode", 660, "must be a string"),
    ("nvidia_driver_version", "535.261.03-1\n", "not a package version"),
    ("nvidia_driver_kernel_headers", "yes", "must be True or False"),
    ("nvidia_driver_change_under_processes", "yes", "must be True or False"),
    ("nvidia_driver_kernel_headers", ["linux headers"], "item 0: not a package name"),
    ("fabric_manager_repo_url", "ftp://mirror/cuda", "malformed URL"),
    ("fabric_manager_repo_url", "http://mirror/cuda\"; evil", "malformed URL"),
    ("container_toolkit_runtimes", ["cri-o"], "not one of the choices"),
    ("container_toolkit_enabled", "yes", "must be True or False"),
    ("munge_key_bits", 64, "out of range"),
    ("health_kubernetes_taint", "no", "must be True or False"),
    ("containerd_everywhere", "yes", "must be True or False"),
    ("kubernetes_repo_mirror", "pkgs.example/k8s", "malformed URL"),
    ("kubernetes_verify_image", "cuda:latest; rm -rf /", "not an image reference"),
    ("slurm_memory_reserve_percent", "2", "must be an integer (write it without quotes)"),
    ("slurm_gpu_type", "h100:sxm", "not a GRES type"),
    ("slurm_db_name", "acct; DROP DATABASE x", "not a database identifier"),
    ("common_packages", ["curl", "bad name"], "item 1: not a package name"),
    ("common_sysctls", {"kernel.panic": 1}, "not a net.* sysctl key"),
    ("common_ntp_servers", ["ntp 1"], "not a host name"),
])
def test_a_bad_knob_value_is_named_before_connecting(key, value, words):
    errors = spec_problems(hosts(**{key: value}))
    found = [e for e in errors if e.field == key and e.host == "gpu01"]
    assert found, errors
    assert words in found[0].problem, found[0]
    assert key in found[0].fix and found[0].allowed


def test_a_misspelt_knob_is_a_typo_error_in_any_case():
    for typo in ("slurm_memory_reserve_precent", "SLURM_MEMORY_RESERVE_PERCENT",
                 "Nvidia_Driver_Device_Group"):
        errors = spec_problems(hosts(**{typo: 3}))
        assert [e for e in errors if e.field == typo and "did you mean" in e.problem], typo


def test_typo_check_goes_red_only_for_close_keys():
    """An unrelated key of the site's own (used by its group_data) is not a typo."""
    assert spec_problems(hosts(my_site_rack="r12")) == []


def test_one_bad_value_on_every_host_is_one_error():
    bad = [HostInput(h.name, h.groups, {**h.data, "common_admin_group": "Admins"})
           for h in hosts()]
    errors = [e for e in spec_problems(bad) if e.field == "common_admin_group"]
    assert len(errors) == 1 and errors[0].host == "every host"


@pytest.mark.parametrize(("key", "value"), [("slurm_slurmd_timeout", 600),
                                            ("health_kubernetes_taint", False)])
def test_site_wide_knob_must_agree_on_every_host(key, value):
    split = hosts(**{key: value})
    errors = [e for e in spec_problems(split) if e.field == key]
    assert errors and errors[0].problem == "differs between hosts"


def test_invalid_knob_raises_spec_invalid_listing_it():
    bad = [HostInput(h.name, h.groups, {**h.data, "slurm_conf_extra": {"Key": "two words"}})
           for h in hosts()]
    with pytest.raises(SpecInvalid) as info:
        build_spec(bad)
    assert [(e.host, e.field) for e in info.value.errors] == [("every host", "slurm_conf_extra")]


def test_knob_typo_check_can_fail():
    """Against an empty knob table the misspelt key is not caught: the check comes from the
    knobs, not from a list of known typos."""
    from gpuinfra.spec import validate

    typo = hosts(slurm_memory_reserve_precent=3)
    assert validate(typo, (), ()) == []
    assert validate(typo, (), (Knob("slurm_memory_reserve_percent", 2, ROLE_KNOBS[0].rule, ""),))


@pytest.mark.parametrize("name", ["mysql", "MySQL", "information_schema", "performance_schema",
                                  "sys"])
def test_the_accounting_database_is_never_a_system_schema(name):
    errors = [e for e in spec_problems(hosts(slurm_db_name=name)) if e.field == "slurm_db_name"]
    assert errors and "system schema" in errors[0].problem, errors
    assert "slurm_acct_db" not in errors[0].problem


def test_a_role_refusing_a_host_is_a_pyinfra_error_naming_it_not_a_traceback() -> None:
    """A GpuinfraError raised while a role plans a host (logs_max_use too big for the head's
    disk, MIG without an NVML plugin...) reaches pyinfra as its own error: pyinfra prints
    `--> pyinfra error ...: <host>: <message>` and stops before changing anything, instead of
    the deploy file's traceback."""
    from types import SimpleNamespace

    from pyinfra.api.exceptions import PyinfraError

    from gpuinfra.platforms import UnsupportedOS
    from gpuinfra_deploy.plan import MissingFact
    from gpuinfra_deploy.run.role import Role

    def refusing(site, node):
        raise UnsupportedOS("CentOS (centos-9) is not supported")

    role = Role("x", refusing, lambda site, node: True)
    node = SimpleNamespace(name="head1")
    with pytest.raises(PyinfraError) as caught:
        role.apply(SimpleNamespace(), node)
    assert isinstance(caught.value, UnsupportedOS)  # its callers still catch it by its type
    assert str(caught.value) == "head1: CentOS (centos-9) is not supported"

    def missing(site, node):  # a plan test's missing fixture fact stays the test's failure
        raise MissingFact("fixture lacks fact server.Groups")

    with pytest.raises(MissingFact) as caught:
        Role("y", missing, lambda site, node: True).apply(SimpleNamespace(), node)
    assert not isinstance(caught.value, PyinfraError)
