"""Accounting associations from the spec (gpuinfra/slurm/accounting.py): what is missing, and a
script that lists before it adds, never removes, and quotes every name."""

from __future__ import annotations

import subprocess

import pytest

from gpuinfra.slurm.accounting import ACCOUNTS, USERS, missing, sacctmgr_script, wanted

ROWS = [["lab", "root", ""], ["lab", "root", "root"], ["lab", "ml", ""], ["lab", "ml", "alice"]]


def test_wanted_adds_the_users_default_accounts_once():
    assert wanted(["ml"], {"bob": "research", "alice": "ml", "carol": "research"}) == (
        ["ml", "research"], [("alice", "ml"), ("bob", "research"), ("carol", "research")])


def test_missing_names_only_what_slurmdbd_lacks():
    assert missing(ROWS, "lab", ["ml"], {"alice": "ml"}) == []
    assert missing(ROWS, "lab", ["ml", "cv"], {"alice": "ml", "bob": "cv"}) == [
        "account cv", "user bob cv"]
    # alice in another account is not alice in ml; another cluster's rows do not count
    assert missing([["lab", "cv", ""], ["lab", "cv", "alice"]], "lab", ["ml"],
                   {"alice": "ml"}) == ["account ml", "user alice ml"]
    assert missing([["other", "ml", ""], ["other", "ml", "alice"]], "lab", ["ml"],
                   {"alice": "ml"}) == ["cluster", "account ml", "user alice ml"]


def test_the_script_lists_before_each_add_and_never_removes():
    script = sacctmgr_script("lab", ["ml"], {"alice": "ml"})
    lines = script.splitlines()
    assert lines[0] == "set -e"
    adds = [line for line in lines if "sacctmgr -i add" in line]
    assert len(adds) == 3 and all(" || sacctmgr -i add " in line for line in adds)
    assert not any(word in script for word in ("delete", "modify", "remove"))


def test_the_script_runs_against_a_fake_sacctmgr_adding_only_the_missing(tmp_path):
    """The script's shell, run for real with a sacctmgr that prints the rows above and logs
    every add: the existing account and user are left alone."""
    log = tmp_path / "adds"
    fake = tmp_path / "sacctmgr"
    fake.write_text(f"""#!/bin/sh
case "$*" in
  *"-i add"*) echo "$*" >> {log} ;;
  *"list cluster"*) echo lab ;;
  *"account=ml user=alice"*) echo alice ;;
  *"account=ml format=user"*) echo ; echo alice ;;
esac
""")
    fake.chmod(0o755)
    script = sacctmgr_script("lab", ["ml", "cv"], {"alice": "ml", "bob": "cv"}, wait_s=1)
    subprocess.run(["sh", "-c", script], check=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert log.read_text().splitlines() == [
        "-i add account cv cluster=lab description=cv organization=lab",
        "-i add user bob account=cv defaultaccount=cv cluster=lab"]


@pytest.mark.parametrize(("rule", "value"), [
    (ACCOUNTS, "ml"), (ACCOUNTS, ["ML"]), (ACCOUNTS, ["a b"]), (ACCOUNTS, ["x;rm"]),
    (USERS, {"Alice": "ml"}), (USERS, {"alice": "m l"}), (USERS, ["alice"]),
])
def test_bad_accounts_and_users_are_refused(rule, value):
    assert rule.problem(value) is not None


def test_good_accounts_and_users_pass():
    assert ACCOUNTS.problem(["ml", "cv-2", "a.b"]) is None
    assert USERS.problem({"alice": "ml", "_svc": "cv-2"}) is None
