"""`make test` keeps Ansible's state in a private temporary directory, never a fixed /tmp path.

A fixed path under /tmp can be created first by another local user (who then reads what the
root-run playbooks write there, or plants files they read). The Makefile makes the directory
with mktemp -d for each run; the scenarios name no path of their own.
"""

from __future__ import annotations

import subprocess

from tests.conftest import REPO


def test_no_scenario_or_makefile_names_a_fixed_tmp_path():
    files = [REPO / "Makefile", *sorted((REPO / "molecule").glob("*/molecule.yml"))]
    offending = [f"{path.relative_to(REPO)}:{no}: {line.strip()}"
                 for path in files for no, line in enumerate(path.read_text().splitlines(), 1)
                 if "/tmp/" in line]
    assert not offending, offending


def test_make_molecule_runs_in_a_fresh_private_directory():
    plan = subprocess.run(["make", "-n", "-s", "molecule", "STAMP="], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout
    assert "mktemp -d" in plan and "rm -rf" in plan
    for command in (line for line in plan.splitlines() if "molecule test" in line):
        assert 'ANSIBLE_HOME="$state/' in command and 'ANSIBLE_LOCAL_TEMP="$state/' in command
