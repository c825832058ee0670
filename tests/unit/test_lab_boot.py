"""`gpuinfra lab reboot` waits for each host to come back whole (gpuinfra_lab/boot.py), and the
verify
suite tells the lab's expected failures from real ones (gpuinfra_verify/expect.py unit_failures)."""

from __future__ import annotations

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers.system import parse_unit_states
from gpuinfra_lab.boot import judge, wait_whole
from gpuinfra_lab.profiles import NO_NVIDIA_MODULE, PROFILES, expected_failures
from gpuinfra_verify.expect import unit_failures

PERSISTENCED = ("nvidia-persistenced.service loaded failed failed NVIDIA Persistence Daemon")
MODULES = "systemd-modules-load.service loaded failed failed Load Kernel Modules"
CTLD_FAILED = "slurmctld.service loaded failed failed Slurm controller daemon"
CTLD_RESTARTING = "slurmctld.service loaded activating auto-restart Slurm controller daemon"


def out(state: str, *units: str) -> str:
    return state + "\n---\n" + "".join(f"{u}\n" for u in units)


def test_every_gpu_lab_profile_expects_the_no_module_failures_and_the_head_none():
    containers = [p for p in PROFILES.values() if not p.is_guest]
    assert containers and all(p.expected_failures == NO_NVIDIA_MODULE for p in containers)
    # A QEMU guest runs Debian's own kernel: nothing fails there by design.
    assert all(p.expected_failures == {} for p in PROFILES.values() if p.is_guest)
    assert expected_failures(None) == {}


def test_a_worker_degraded_by_its_expected_failures_only_is_back_and_says_so():
    boot = judge(out("degraded", PERSISTENCED, MODULES), NO_NVIDIA_MODULE)
    assert boot.whole
    assert boot.state == ("degraded (only the lab's expected failures: "
                          "nvidia-persistenced.service, systemd-modules-load.service)")


def test_a_failed_controller_is_named_even_beside_expected_failures():
    boot = judge(out("degraded", PERSISTENCED, CTLD_FAILED), NO_NVIDIA_MODULE)
    assert boot.done and not boot.whole and boot.unexpected == ("slurmctld.service failed",)


def test_the_head_expects_nothing():
    assert not judge(out("degraded", PERSISTENCED), expected_failures(None)).whole
    assert judge(out("running"), {}).whole


@pytest.mark.parametrize("output", [out("starting"), out("running", CTLD_RESTARTING),
                                    "", out("running", "garbage")])
def test_a_host_still_starting_or_restarting_a_unit_is_not_back_yet(output):
    assert not judge(output, NO_NVIDIA_MODULE).done


def test_a_device_unit_left_tentative_in_a_container_does_not_hold_the_boot():
    tentative = "dev-vda.device loaded activating tentative /dev/vda"
    assert judge(out("degraded", tentative, PERSISTENCED, MODULES), NO_NVIDIA_MODULE).whole


def test_waiting_ends_when_the_restarting_unit_came_back():
    looks = iter([out("starting"), out("running", CTLD_RESTARTING), out("running")])
    assert wait_whole(lambda: next(looks), {}, timeout=10, pause=0).whole


def test_waiting_gives_up_naming_what_never_came_back():
    boot = wait_whole(lambda: out("degraded", CTLD_FAILED), {}, timeout=0, pause=0)
    assert not boot.whole and boot.unexpected == ("slurmctld.service failed",)


def test_unit_states_parse_and_refuse_garbage():
    assert parse_unit_states(CTLD_RESTARTING + "\n") == {
        "slurmctld.service": ("activating", "auto-restart")}
    with pytest.raises(ParseError):
        parse_unit_states("not a unit line\n")


def test_verify_counts_every_failure_on_a_real_node_and_expects_the_lab_ones_only_there():
    units = parse_unit_states(f"{PERSISTENCED}\n{MODULES}\n")
    assert unit_failures(units, {}) == (["nvidia-persistenced.service",
                                         "systemd-modules-load.service"], [])
    failed, expected = unit_failures(units, NO_NVIDIA_MODULE)
    assert failed == [] and expected[0].startswith("nvidia-persistenced.service: ")
