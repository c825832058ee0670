"""Issue 45 item 6: every distribution the slurm role targets has its rendered configuration
judged by a real Slurm in gpuinfra_lab/slurm_versions.py (`make test` runs it), and one
judgement there must refuse (the judge can fail)."""

from __future__ import annotations

from gpuinfra_lab.slurm_versions import JUDGEMENTS, SUITES
from gpuinfra_roles.slurm import DISTRO


def test_every_target_of_the_role_is_judged_by_a_real_slurm() -> None:
    judged = {j.target for j in JUDGEMENTS if j.refuses is None}
    assert set(DISTRO) <= judged


def test_each_debian_slurm_judges_and_one_judgement_must_refuse() -> None:
    assert {j.suite for j in JUDGEMENTS} == set(SUITES)
    assert any(j.refuses for j in JUDGEMENTS if j.suite == "bullseye")
