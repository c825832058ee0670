"""One copy of each recorded fact set: no two fact files in the tree are byte-identical.

Fact files are the JSON files of the folders that hold recorded (or assumed) facts: the plan
tests' layers (tests/plan/facts), the sets `gpuinfra render --os` assumes
(gpuinfra_deploy/assumed_facts, shipped in the wheel), the lab's replayed hardware
(gpuinfra_lab/hardware: gpus.json, manifest.json) and the recorded fixtures (tests/fixtures).
A set two users need is kept once, where the product can read it (the product never reads
tests/), and the other user reads it there: tests/plan/harness.py ``fact_file`` for the plan
tests, a manifest's ``base`` for a lab variant (gpuinfra_lab/replay.py ``profile_files``).

The lab's replayed command outputs (``*.txt``) are not fact sets and are left out on purpose:
each is a verbatim copy of a capture in tests/fixtures/real (tests/unit/test_lab_inventory.py
checks they stay byte-identical) or one command's answer in a folder `lab up` installs alone.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.plan import harness

FACT_ROOTS = (
    "tests/plan/facts",
    "gpuinfra_deploy/assumed_facts",
    "gpuinfra_lab/hardware",
    "tests/fixtures",
)


def fact_files(repo: Path = REPO) -> list[Path]:
    return sorted(p for root in FACT_ROOTS for p in (repo / root).rglob("*.json") if p.is_file())


def identical_groups(files: list[Path], repo: Path = REPO) -> list[list[str]]:
    """Each group of two or more files with the same bytes, as paths from ``repo``."""
    by_digest: dict[str, list[str]] = defaultdict(list)
    for path in files:
        by_digest[hashlib.sha256(path.read_bytes()).hexdigest()].append(
            str(path.relative_to(repo)))
    return sorted(group for group in by_digest.values() if len(group) > 1)


def test_the_fact_folders_hold_fact_files():
    files = fact_files()
    for root in FACT_ROOTS[:3]:
        assert any(p.is_relative_to(REPO / root) for p in files), root


def test_no_two_fact_files_are_byte_identical():
    groups = identical_groups(fact_files())
    assert not groups, (
        "byte-identical fact files: keep one copy (the product's, where the product reads it) "
        "and read it from there (tests/plan/harness.py fact_file, a lab manifest's base):\n"
        + "\n".join("  " + " == ".join(group) for group in groups))


def test_identical_groups_lists_each_group(tmp_path):
    for name, text in (("a.json", "{}"), ("b.json", "{}"), ("c.json", "[]"), ("d/e.json", "[]"),
                       ("f.json", "1")):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    files = sorted(tmp_path.rglob("*.json"))
    assert identical_groups(files, tmp_path) == [["a.json", "b.json"], ["c.json", "d/e.json"]]


def test_the_plan_tests_read_the_products_copy(tmp_path, monkeypatch):
    """A set the plan tests share with the product is read from gpuinfra_deploy/assumed_facts
    (slurm-lab-worker1 under its product name, hardware); one in both places is refused."""
    assert harness.fact_file("gpu-fresh") == REPO / "gpuinfra_deploy/assumed_facts/gpu-fresh.json"
    assert harness.fact_file("slurm-lab-worker1") == \
        REPO / "gpuinfra_deploy/assumed_facts/hardware.json"
    assert harness.fact_file("slurm-lab-worker2") == harness.FACTS / "slurm-lab-worker2.json"
    own, shared = tmp_path / "facts", tmp_path / "assumed"
    own.mkdir()
    shared.mkdir()
    monkeypatch.setattr(harness, "FACTS", own)
    monkeypatch.setattr(harness, "ASSUMED", shared)
    (own / "gpu-fresh.json").write_text("{}")
    (shared / "gpu-fresh.json").write_text("{}")
    with pytest.raises(ValueError, match="keep one copy"):
        harness.fact_file("gpu-fresh")
