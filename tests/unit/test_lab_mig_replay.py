"""The MIG checks of the verify suite on the lab's replayed MIG hardware (gpuinfra_lab/hardware/
2x-a100-sxm4-mig-*): the stand-in nvidia-smi answers the checks' own command, part by part, as
on a lab worker; the healthy node passes, the broken one fails on GPU 1 alone."""

from __future__ import annotations

import os
import stat
import subprocess
from collections import Counter
from dataclasses import replace

import pytest

from gpuinfra.sharing.migplan import STATE_COMMAND, node_state, split_sections
from gpuinfra.sharing.verdicts import instance_findings, mig_mode_findings, slurm_gres_findings
from gpuinfra_lab.profiles import PROFILES
from tests.conftest import REPO

STAND_IN = REPO / "gpuinfra_lab" / "nvidia-smi"


def replayed_state(profile: str, tmp_path):
    """Run the verify suite's MIG state command with the stand-in as `nvidia-smi`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nexec {os.sys.executable} {STAND_IN} \"$@\"\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "GPUINFRA_LAB_HARDWARE": str(REPO / "gpuinfra_lab" / "hardware" / profile)}
    out = subprocess.run(["sh", "-c", STATE_COMMAND], capture_output=True, text=True, env=env,
                         check=True).stdout
    return node_state(split_sections(out))


def layout(profile: str):
    return [PROFILES[profile].spec["gpu_sharing"]["mig_layout"]] * 2


def test_healthy_mig_node_passes(tmp_path):
    name = "2x-a100-sxm4-mig-balanced"
    states = replayed_state(name, tmp_path)
    assert [s.mig_current for s in states] == [True, True]
    assert mig_mode_findings(states, layout(name)) == []
    assert instance_findings(states, layout(name)) == []
    assert slurm_gres_findings("gpu:1g.10gb:4,gpu:2g.20gb:2,gpu:3g.40gb:2", states) == []


def test_broken_mig_node_fails_on_gpu_1_alone(tmp_path):
    name = "2x-a100-sxm4-mig-gpu1-differs"
    assert PROFILES[name].broken
    states = replayed_state(name, tmp_path)
    assert mig_mode_findings(states, layout(name)) == []
    found = instance_findings(states, layout(name))
    assert len(found) == 1 and found[0].startswith("GPU 1: ")
    # Slurm, told the spec's layout, advertises a 3g.40gb device GPU 1 does not have.
    assert slurm_gres_findings("gpu:1g.10gb:4,gpu:2g.20gb:2,gpu:3g.40gb:2", states)


def test_broken_mig_node_differs_from_the_healthy_one_where_it_claims(tmp_path):
    """What the broken profile claims (gpuinfra_lab/replay.py): the healthy node whose GPU 1 has
    no 3g.40gb instance. On every part of the replayed state the verify suite reads (-L, the MIG
    mode query, the instance lists, the processes): GPU 0 as on the healthy node, GPU 1 the
    same but for one 3g.40gb MIG device fewer, nothing else."""
    (tmp_path / "healthy").mkdir()
    (tmp_path / "broken").mkdir()
    healthy = replayed_state("2x-a100-sxm4-mig-balanced", tmp_path / "healthy")
    broken = replayed_state("2x-a100-sxm4-mig-gpu1-differs", tmp_path / "broken")
    assert [s.index for s in broken] == [s.index for s in healthy] == [0, 1]
    assert broken[0] == healthy[0]
    assert broken[1] != healthy[1]
    lost = Counter(healthy[1].mig_devices) - Counter(broken[1].mig_devices)
    assert lost == Counter({"3g.40gb": 1})
    assert not Counter(broken[1].mig_devices) - Counter(healthy[1].mig_devices)
    assert replace(broken[1], mig_devices=healthy[1].mig_devices) == healthy[1]


@pytest.mark.parametrize("profile", ["2x-a100-sxm4-mig-balanced", "2x-a100-sxm4-mig-gpu1-differs"])
def test_mig_profiles_spec_is_valid(profile):
    from gpuinfra.spec import HostInput
    from gpuinfra_deploy.run.knobs import build_spec
    spec = build_spec([HostInput("w", ("workers",), {"schedulers": [], "mig_strategy": "mixed",
                                                     "node_address": "10.0.0.2",
                                                     **PROFILES[profile].spec})])
    assert spec.node("w").sharing.mode == "mig"
