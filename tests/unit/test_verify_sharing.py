"""The GPU sharing checks' judgements (gpuinfra/sharing/verdicts.py): each goes red once, on
real MIG captures (tests/fixtures/real/nvidia-smi-L: a DGX A100 80GB all-balanced;
tests/fixtures/mig:
an H100 with 7x 1g.10gb) and the outputs the checks read."""

from __future__ import annotations

from gpuinfra.sharing.migplan import node_state
from gpuinfra.sharing.verdicts import (
    ADVICE,
    boot_unit_findings,
    compute_mode_findings,
    instance_findings,
    mig_mode_findings,
    mps_limit_findings,
    parse_gres,
    slurm_gres_findings,
)
from tests.conftest import REAL, REPO

BALANCED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
L_TEXT = (REAL / "nvidia-smi-L" / "dgx-a100-80gb-mig-all-balanced-L-head-n10.txt").read_text()
UUIDS = ("GPU-8e100991-ce97-6694-b8eb-b8b1ff5053af", "GPU-938c4705-98bf-1735-e98b-c2a5872a8022")


def dgx(modes=("Enabled, Enabled", "Enabled, Enabled"), listing: str = L_TEXT):
    mode = "\n".join(f"{i}, {u}, {m}" for i, (u, m) in enumerate(zip(UUIDS, modes, strict=True)))
    return node_state({"list": listing, "mode": mode, "lgi": "", "lci": "", "apps": ""})


def test_mig_mode_green_then_pending_then_off():
    assert mig_mode_findings(dgx(), [BALANCED, BALANCED]) == []
    pending = mig_mode_findings(dgx(("Disabled, Enabled", "Enabled, Enabled")),
                                [BALANCED, BALANCED])
    assert pending == [("pending", "GPU 0: MIG mode Disabled, the spec wants Enabled (pending)")]
    off = mig_mode_findings(dgx(), [BALANCED, {}])
    assert off == [("mode", "GPU 1: MIG mode Enabled, the spec wants Disabled")]
    assert "reboot" in ADVICE["pending"][1]


def test_instances_green_on_the_real_listing_and_red_when_one_gpu_differs():
    assert instance_findings(dgx(), [BALANCED, BALANCED]) == []
    # The broken variant: GPU 1 lost its 3g instance (a reboot without the boot unit, say).
    broken = L_TEXT.replace(
        "  MIG 3g.40gb     Device  0: (UUID: MIG-51872ee5-5410-564e-abd2-27382756d2d4)\n", "")
    found = instance_findings(dgx(listing=broken), [BALANCED, BALANCED])
    assert found == ["GPU 1: MIG devices 2x 1g.10gb, 1x 2g.20gb, the spec wants 2x 1g.10gb, "
                     "1x 2g.20gb, 1x 3g.40gb"]
    assert "gpuinfra-mig.service" in ADVICE["instances"][0]


def test_right_profiles_with_the_wrong_counts_are_red():
    """The same profile names with other counts (instances compared by name alone would pass)."""
    # DERIVED: GPU 1 of the real listing without one of its two 1g.10gb devices.
    one_short = L_TEXT.replace(
        "  MIG 1g.10gb     Device  3: (UUID: MIG-91e26891-6f5b-5ff3-9c66-310e47d6b059)", "")
    found = instance_findings(dgx(listing=one_short), [BALANCED, BALANCED])
    assert found == ["GPU 1: MIG devices 1x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb, the spec wants 2x "
                     "1g.10gb, 1x 2g.20gb, 1x 3g.40gb"]
    # The real listing, a spec that wants one more 1g.10gb on GPU 0.
    more = {**BALANCED, "1g.10gb": 3}
    assert instance_findings(dgx(), [more, BALANCED]) == [
        "GPU 0: MIG devices 2x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb, the spec wants 3x 1g.10gb, "
        "1x 2g.20gb, 1x 3g.40gb"]


def test_slurm_gres_matches_the_real_listing():
    states = dgx()
    assert parse_gres("gpu:1g.10gb:4(S:0-1),gpu:2g.20gb:2,gpu:3g.40gb:2") == {
        "gpu:1g.10gb": 4, "gpu:2g.20gb": 2, "gpu:3g.40gb": 2}
    assert slurm_gres_findings("gpu:1g.10gb:4(S:0-1),gpu:2g.20gb:2,gpu:3g.40gb:2", states) == []
    assert slurm_gres_findings("gpu:3g.40gb:4", states)


def test_slurm_counts_what_the_spec_counts():
    # slurm.conf's Gres= for the spec's layout is what the real MIG listing gives.
    from gpuinfra.sharing.migconfig import slurm_mig_gres
    from gpuinfra.slurm.gres import node_gres
    from gpuinfra.spec import HostInput
    from gpuinfra_deploy.run.knobs import build_spec
    spec = build_spec([HostInput("dgx", ("workers",), {
        "schedulers": [], "node_address": "10.0.0.2", "gpu_model": "A100-SXM4-80GB", "gpu_count": 2,
        "gpu_topology": "pcie-only",
        "mig_strategy": "mixed", "gpu_sharing": {"mode": "mig", "mig_layout": BALANCED}})])
    assert node_gres(spec.node("dgx"), "a100") == slurm_mig_gres(
        [s.mig_devices for s in dgx()])


def test_mps_limits_and_compute_mode():
    assert mps_limit_findings("25.0\n", 25) == []
    assert mps_limit_findings("100.0", 25) == ["default active thread percentage 100, the spec "
                                               "says 25"]
    assert mps_limit_findings("Cannot find MPS control daemon process", 25)
    assert compute_mode_findings("0, Exclusive_Process\n1, Exclusive_Process") == []
    assert compute_mode_findings("0, Exclusive_Process\n1, Default") == [
        "GPU 1: compute mode Default"]


def test_h100_capture_instances():
    lgi = (REPO / "tests/fixtures/mig/h100-80gb-hbm3-mig-lgi-7x-1g.10gb-UNRESOLVED-SOURCE.txt")
    states = node_state({"list": "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)",
                         "mode": "0, GPU-x, Enabled, Enabled", "lgi": lgi.read_text(),
                         "lci": "", "apps": ""})
    # -L printed before the instances existed: no MIG devices listed, the layout's missing.
    assert instance_findings(states, [{"1g.10gb": 7}]) == [
        "GPU 0: MIG devices none, the spec wants 7x 1g.10gb"]


def test_boot_unit_enabled_or_named():
    assert boot_unit_findings("enabled\n") == []
    assert boot_unit_findings("disabled\n") == ["gpuinfra-mig.service is disabled"]
    assert boot_unit_findings("") == ["gpuinfra-mig.service is not installed"]
