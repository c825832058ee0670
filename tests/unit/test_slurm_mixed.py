"""Issue 49 item 3: Slurm nodes on different distributions run different Slurm releases; the
rule (gpuinfra.slurm.mixed, SchedMD's upgrade guide and release notes) accepts a mix only
where slurmdbd >= slurmctld >= slurmd and the client commands, within the newer daemon's
window of majors (two back, three from 24.11)."""

from __future__ import annotations

import itertools

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.knowledge.drivers import SUPPORTED_OS
from gpuinfra.parsers.slurm import parse_slurm_version
from gpuinfra.slurm.mixed import (
    RELEASES,
    SlurmHost,
    accepts,
    daemons,
    mixed_release_causes,
    mixed_release_problem,
    roll_problem,
    window,
)
from gpuinfra.slurm.versions import SLURM_VERSIONS

HEAD = daemons(controller=True, worker=False, slurmdbd=True)
BACKUP = daemons(controller=True, worker=False)
WORKER = daemons(controller=False, worker=True)
LOGIN = daemons(controller=False, worker=False)

# Every (head's distribution, a worker's) the rule accepts besides one release everywhere:
# the head's Slurm newer, and the worker's within its window. Written out from the versions
# (debian-12 22.05, debian-13 24.11, ubuntu-22.04 21.08, ubuntu-24.04 23.11), not computed.
ACCEPTED = {
    ("debian-12", "ubuntu-22.04"),  # 22.05 takes 21.08 (and 20.11)
    ("ubuntu-24.04", "debian-12"),  # 23.11 takes 23.02, 22.05
    ("debian-13", "ubuntu-24.04"),  # 24.11 takes 24.05, 23.11, 23.02
}
DISTROS = ("debian-12", "debian-13", "ubuntu-22.04", "ubuntu-24.04")


def site(head: str, worker: str, login: str | None = None,
         backup: str | None = None) -> list[SlurmHost]:
    hosts = [SlurmHost("head", head, HEAD), SlurmHost("gpu1", worker, WORKER),
             SlurmHost("gpu2", worker, WORKER)]
    if login:
        hosts.append(SlurmHost("login1", login, LOGIN))
    if backup:
        hosts.append(SlurmHost("head2", backup, BACKUP))
    return hosts


def test_every_supported_distribution_has_a_slurm_in_the_release_list():
    assert set(SUPPORTED_OS) <= set(SLURM_VERSIONS)
    assert set(SLURM_VERSIONS.values()) <= set(RELEASES)


def test_the_window_is_two_majors_before_24_11_and_three_from_it():
    assert window((22, 5)) == ((21, 8), (20, 11))  # 22.05 RELEASE_NOTES
    assert window((23, 11)) == ((23, 2), (22, 5))
    assert window((24, 11)) == ((24, 5), (23, 11), (23, 2))  # 24.11 RELEASE_NOTES
    assert window((25, 11)) == ((25, 5), (24, 11), (24, 5))  # the upgrade guide's example
    assert accepts((24, 11), (24, 11)) and not accepts((22, 5), (23, 11))


@pytest.mark.parametrize("head,worker", list(itertools.product(DISTROS, repeat=2)))
def test_every_pair_of_distributions_head_and_worker_both_ways(head, worker):
    causes = mixed_release_causes(site(head, worker))
    if head == worker or (head, worker) in ACCEPTED:
        assert causes == []
        assert mixed_release_problem(site(head, worker)) is None
        return
    hv, wv = SLURM_VERSIONS[head], SLURM_VERSIONS[worker]
    # one line for the workers (the two on one release), naming them, their release and Slurm
    assert len(causes) == 1, causes
    worker_side = f"slurmd on gpu1, gpu2 ({worker}, Slurm {wv[0]}.{wv[1]:02d})"
    head_side = f"slurmctld on head ({head}, Slurm {hv[0]}.{hv[1]:02d})"
    said = "is newer than" if wv > hv else "is too old for"
    assert causes[0].startswith(f"{worker_side} {said} {head_side}"), causes[0]


def test_debian_12_and_13_are_refused_both_ways_with_rule_source_and_fix():
    up = mixed_release_problem(site("debian-12", "debian-13"))
    assert up is not None
    assert ("slurmd on gpu1, gpu2 (debian-13, Slurm 24.11) is newer than slurmctld on head "
            "(debian-12, Slurm 22.05), which accepts no newer release") in up
    down = mixed_release_problem(site("debian-13", "debian-12"))
    assert down is not None
    assert ("slurmd on gpu1, gpu2 (debian-12, Slurm 22.05) is too old for slurmctld on head "
            "(debian-13, Slurm 24.11), which accepts 24.05, 23.11, 23.02 besides its own") in down
    for message in (up, down):
        assert "https://slurm.schedmd.com/upgrades.html" in message
        assert "slurmdbd >= slurmctld >= slurmd" in message
        assert "Fix: keep every Slurm node on one release" in message
        assert "docs/upgrade-debian-13.md" in message
        assert message.count("Slurm's rule") == 1 and message.count("Fix:") == 1


@pytest.mark.parametrize("head,worker", sorted(ACCEPTED))
def test_a_login_node_is_held_to_the_controllers_window_like_a_worker(head, worker):
    """The client commands talk to slurmctld and slurmdbd: a login node on the workers' older
    release passes, one on a release newer than the head's is refused."""
    assert mixed_release_causes(site(head, worker, login=worker)) == []
    newer = [d for d in DISTROS if SLURM_VERSIONS[d] > SLURM_VERSIONS[head]]
    for login in newer:
        causes = mixed_release_causes(site(head, head, login=login))
        assert len(causes) == 1 and causes[0].startswith(
            f"the client commands on login1 ({login}, ") and " are newer than " in causes[0]
    older = [d for d in DISTROS if (head, d) not in ACCEPTED and SLURM_VERSIONS[d] <
             SLURM_VERSIONS[head]]
    for login in older:
        causes = mixed_release_causes(site(head, head, login=login))
        assert len(causes) == 1 and " are too old for slurmctld on head" in causes[0]


def test_a_backup_controller_runs_the_heads_release():
    """The primary and backup slurmctld share the saved state: any difference is refused,
    once (not again as the head's slurmdbd against the backup's slurmctld); the workers are
    held to each controller's window."""
    assert mixed_release_causes(site("debian-13", "debian-13", backup="debian-13")) == []
    controllers = ("the controllers run different Slurm: slurmctld on head (debian-13, Slurm "
                   "24.11), slurmctld on head2 (ubuntu-24.04, Slurm 23.11): a backup takes over "
                   "the head's saved state")
    # an older backup: within the head's window, still refused; the head's workers on 24.11
    # are newer than the backup's slurmctld
    assert mixed_release_causes(site("debian-13", "debian-13", backup="ubuntu-24.04")) == [
        controllers, "slurmd on gpu1, gpu2 (debian-13, Slurm 24.11) is newer than slurmctld on "
        "head2 (ubuntu-24.04, Slurm 23.11), which accepts no newer release"]
    # workers both controllers accept: the controllers' line alone
    assert mixed_release_causes(site("debian-13", "ubuntu-24.04", backup="ubuntu-24.04")) == [
        controllers]
    # a newer backup: said once, the head named first
    causes = mixed_release_causes(site("ubuntu-24.04", "ubuntu-24.04", backup="debian-13"))
    assert causes == ["the controllers run different Slurm: slurmctld on head (ubuntu-24.04, "
                      "Slurm 23.11), slurmctld on head2 (debian-13, Slurm 24.11): a backup takes "
                      "over the head's saved state"]


def test_a_head_that_is_also_a_worker_and_one_release_everywhere_pass():
    both = daemons(controller=True, worker=True, slurmdbd=True)
    assert both == {"slurmctld", "slurmd", "slurmdbd"}
    assert LOGIN == {"commands"}
    assert mixed_release_causes([SlurmHost("one", "debian-13", both)]) == []
    assert mixed_release_causes([SlurmHost("one", "debian-12", both),
                                 SlurmHost("gpu1", "ubuntu-22.04", WORKER)]) == []


# ---------------------------------------------------------------- `gpuinfra roll`'s judgement

@pytest.mark.parametrize("said,version", [
    ("slurm 22.05.8\n", (22, 5)),  # SchedMD's package name (Debian 12's sinfo --version)
    ("slurm-wlm 24.11.5\n", (24, 11)),  # Debian 13's build names itself slurm-wlm
    ("slurm 23.11.4\n", (23, 11)), ("slurm 24.05.0-0rc1", (24, 5))])
def test_the_heads_slurm_is_read_from_sinfo_version(said, version):
    assert parse_slurm_version(said) == version


@pytest.mark.parametrize("said", ["", "sinfo: command not found", "slurm", "munge 0.5.15"])
def test_anything_but_a_slurm_version_is_refused(said):
    with pytest.raises(ParseError, match="sinfo --version: no 'slurm MAJOR.MINOR.PATCH' line"):
        parse_slurm_version(said)


def test_a_debian_13_worker_under_a_debian_12_head_is_refused_with_rule_source_and_fix():
    said = roll_problem({"gpu1": "debian-13"}, "head1", parse_slurm_version("slurm 22.05.8"))
    assert said is not None
    assert ("gpu1 (debian-13) runs slurmd 24.11, newer than the head head1's slurmctld 22.05, "
            "which accepts no newer release") in said
    assert "https://slurm.schedmd.com/upgrades.html" in said
    assert "slurmdbd >= slurmctld >= slurmd" in said
    assert "head first: slurmdbd, slurmctld, then the workers" in said
    assert "docs/upgrade-debian-13.md" in said and said.endswith("No node was drained or changed")
    # and the way back: a Debian 12 worker under a head moved to 13 is four majors behind
    back = roll_problem({"gpu1": "debian-12"}, "head1", (24, 11))
    assert back is not None and ("gpu1 (debian-12) runs slurmd 22.05, too old for the head "
                                 "head1's slurmctld 24.11, which accepts 24.05, 23.11, 23.02 "
                                 "besides its own") in back


def test_each_refused_worker_is_named_and_the_rule_said_once():
    said = roll_problem({"gpu1": "debian-13", "gpu2": "debian-12", "gpu3": "debian-13"},
                        "head1", (22, 5))
    assert said is not None and "gpu1 (debian-13)" in said and "gpu3 (debian-13)" in said
    assert "gpu2" not in said
    assert said.count("Slurm's rule") == 1 and said.count("Fix:") == 1


@pytest.mark.parametrize("head,workers", [
    ((22, 5), {"gpu1": "debian-12"}),  # the same release
    ((24, 11), {"gpu1": "debian-13"}),
    ((24, 11), {"gpu1": "ubuntu-24.04"}),  # 23.11 within 24.11's three majors
    ((22, 5), {"gpu1": "ubuntu-22.04", "gpu2": "debian-12"}),
    ((22, 5), {})])
def test_workers_the_heads_slurm_accepts_are_rolled(head, workers):
    assert roll_problem(workers, "head1", head) is None


def test_a_release_of_unknown_slurm_or_a_head_of_unknown_window_is_refused():
    said = roll_problem({"gpu1": "debian-14"}, "head1", (24, 11))
    assert said is not None and "gpu1 runs 'debian-14', a release whose Slurm gpuinfra does " \
        "not know" in said and "debian-12, debian-13" in said
    assert roll_problem({"gpu1": "-"}, "head1", (22, 5)) is not None  # os-release unread
    said = roll_problem({"gpu1": "debian-13"}, "head1", (26, 5))
    assert said is not None and "a release gpuinfra/slurm/mixed.py has no window for" in said
