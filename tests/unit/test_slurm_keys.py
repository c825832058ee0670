"""Issue 45 item 6: every setting the slurm role writes is one the target's Slurm reads, by
that release's own parser tables (gpuinfra/knowledge/slurm_keys.py: extracted from SchedMD's tag
of each release), for the Slurm versions this machine cannot run (Ubuntu 22.04's 21.08,
Ubuntu 24.04's 23.11) as for those gpuinfra_lab/slurm_versions.py runs for real (20.11,
22.05, 24.11), where both must agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuinfra.slurm.versions import KEY_VERSIONS, SLURM_VERSIONS, slurm_keys, unread_settings
from tests.conftest import REPO

BIN = Path(sys.executable).parent
FILES = ("slurm.conf", "cgroup.conf", "gres.conf")


@pytest.fixture(scope="session")
def rendered(tmp_path_factory) -> dict[tuple[str, str], dict[str, str] | str]:
    """(site, target) -> the head's Slurm files as `gpuinfra render --os` writes them, or the
    refusal it printed."""
    out: dict[tuple[str, str], dict[str, str] | str] = {}
    for site in ("example", "lab", "gb200"):
        for target in ("debian-12", "ubuntu-22.04", "ubuntu-24.04"):
            folder = tmp_path_factory.mktemp(f"{site}-{target}")
            done = subprocess.run([str(BIN / "gpuinfra"), "render", f"inventory/{site}.py",
                                   "--out", str(folder), "--os", target],
                                  cwd=REPO, capture_output=True, text=True, timeout=300)
            heads = sorted(folder.glob("*/etc/slurm/slurm.conf"))
            if done.returncode != 0 or not heads or "refuses" in done.stderr:
                out[(site, target)] = (done.stderr or done.stdout).strip()
                continue
            conf = heads[0].parent
            out[(site, target)] = {n: (conf / n).read_text() for n in FILES
                                   if (conf / n).exists()}
    return out


def test_the_tables_hold_the_facts_the_project_cites() -> None:
    """Each cited first version (gpuinfra/slurm/versions.py, the roles) is in the tables."""
    assert "CgroupPlugin" not in slurm_keys("20.11")["cgroup.conf"]
    assert "CgroupPlugin" in slurm_keys("21.08")["cgroup.conf"]
    assert "gres/shard" not in slurm_keys("21.08")["plugins"]
    assert "gres/shard" in slurm_keys("22.05")["plugins"]
    assert "cgroup/v2" not in slurm_keys("21.08")["plugins"]  # 21.08: cgroup/v1 only
    assert "topology/block" not in slurm_keys("22.05")["plugins"]
    assert "topology/block" in slurm_keys("23.11")["plugins"]
    for version in KEY_VERSIONS.values():
        assert slurm_keys(version)["source"].startswith("SchedMD/slurm tag slurm-")


@pytest.mark.parametrize("target", ["debian-12", "ubuntu-22.04", "ubuntu-24.04"])
def test_what_the_role_writes_is_read_by_the_targets_slurm(rendered, target: str) -> None:
    version = KEY_VERSIONS[SLURM_VERSIONS[target]]
    judged = 0
    for (site, rendered_for), files in rendered.items():
        if rendered_for != target:
            continue
        if isinstance(files, str):
            # Refused by gpuinfra's own table before any file: MIG without NVML (21.08),
            # topology/block before 23.11.
            assert "refuses this site" in files, (site, files)
            continue
        assert unread_settings(files, version) == [], (site, target)
        judged += 1
    assert judged >= 1


def test_the_tables_refuse_what_the_real_daemons_refused(rendered) -> None:
    """gpuinfra_lab/slurm_versions.py measured: 20.11's slurmctld refuses Debian 12's files
    ('unrecognized key: CgroupPlugin'); 22.05's cannot load topology/block for the GB200 site's
    Ubuntu 24.04 files. The tables say the same."""
    lab = rendered[("lab", "debian-12")]
    assert isinstance(lab, dict)
    assert "cgroup.conf: CgroupPlugin" in unread_settings(lab, "20.11")
    gb200 = rendered[("gb200", "ubuntu-24.04")]
    assert isinstance(gb200, dict)
    assert unread_settings(gb200, "22.05") == ["slurm.conf: TopologyPlugin=topology/block"]
    assert unread_settings(gb200, "24.11") == []


@pytest.mark.parametrize(("extra", "cases"), [
    # 23.11's parser has it, 21.08's not: refused for Ubuntu 22.04 only.
    ({"PreemptParameters": "reclaim_licenses"},
     (("ubuntu-22.04", "slurm-21-08-5-1"), ("ubuntu-24.04", None))),
    # A misspelt key (Slurm's is SelectTypeParameters): no release reads it; before these
    # tables only slurmd -G on the staged file refused it (gpuinfra_lab/bad_slurm_conf.py now
    # proves that check with a bad value).
    ({"SelectTypeParameter": "CR_Core_Memory"}, (("debian-12", "slurm-22-05-8-1"),)),
])
def test_a_key_the_targets_slurm_lacks_is_refused_before_any_host(tmp_path, extra,
                                                                  cases) -> None:
    """slurm_conf_extra with a key the target's Slurm does not read: refused at plan time
    naming the key and the source of the table."""
    site = tmp_path / "site"
    (site / "inventory").mkdir(parents=True)
    (site / "group_data").mkdir()
    (site / "inventory" / "lab.py").write_text((REPO / "inventory" / "lab.py").read_text())
    for name in ("all.py", "lab.py"):
        (site / "group_data" / name).write_text((REPO / "group_data" / name).read_text())
    with (site / "group_data" / "lab.py").open("a") as f:
        f.write(f"\nslurm_conf_extra = {extra!r}\n")
    key = next(iter(extra))
    for target, source in cases:
        done = subprocess.run([str(BIN / "gpuinfra"), "render", str(site / "inventory/lab.py"),
                               "--out", str(tmp_path / target), "--os", target], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        said = done.stderr + done.stdout
        assert (f"slurm.conf: {key}" in said) == (source is not None), said[-600:]
        if source:
            assert source in said
