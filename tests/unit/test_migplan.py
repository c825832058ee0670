"""The MIG plan (gpuinfra.sharing.migplan) on real `nvidia-smi mig -lgi/-lci` and `-L` captures.

Captures: tests/fixtures/mig/ (H100 80GB HBM3 with 7x 1g.10gb; A100 40GB with 2x 3g.20gb) and
tests/fixtures/real/ (A30 with 4x 1g.6gb, -lgi only; DGX A100 all-balanced `-L`). The mode and
process lines are written here in the format `--query-gpu` / `--query-compute-apps` print.
"""

from __future__ import annotations

import pytest

from gpuinfra.knowledge.gpus import GPU_MODELS
from gpuinfra.sharing.migplan import (
    STATE_COMMAND,
    GpuMigState,
    boot_script,
    boot_unit_text,
    commands,
    instance_set,
    node_state,
    placement,
    plan_gpu,
    plan_node,
    split_sections,
)
from gpuinfra_deploy.templates import text as file_text
from tests.conftest import REAL, REPO

MIG = REPO / "tests" / "fixtures" / "mig"
H100 = GPU_MODELS["H100-SXM5-80GB"]
H100_UUID = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
# The same document's `nvidia-smi -L` line (before MIG devices existed).
H100_L = f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {H100_UUID})"


def sections(listing: str = H100_L, mode: str = "Enabled, Enabled", lgi: str = "",
             lci: str = "", apps: str = "") -> dict[str, str]:
    return {"list": listing, "mode": f"0, {H100_UUID}, {mode}", "lgi": lgi, "lci": lci,
            "apps": apps}


def h100_seven(**more: str) -> GpuMigState:
    """The captured H100: MIG on, 7x 1g.10gb, one compute instance each."""
    lgi = (MIG / "h100-80gb-hbm3-mig-lgi-7x-1g.10gb-UNRESOLVED-SOURCE.txt").read_text()
    lci = (MIG / "h100-80gb-hbm3-mig-lci-7x-1g.10gb-UNRESOLVED-SOURCE.txt").read_text()
    (state,) = node_state(sections(lgi=lgi, lci=lci, **more))
    return state


def fresh_h100() -> GpuMigState:
    (state,) = node_state(sections(mode="Disabled, Disabled"))
    return state


def test_state_from_the_captures():
    state = h100_seven()
    assert state.mig_current is True and state.mig_pending is True
    assert [(g.instance_id, g.start, g.compute_instances) for g in state.instances] == \
        [(i, i - 7, 1) for i in range(7, 14)]
    assert state.processes == ()


def test_the_state_command_parts_are_read_back():
    text = "\n".join(f"### gpuinfra-mig {k}\n{v}" for k, v in sections().items())
    assert split_sections(text)["list"] == H100_L
    assert STATE_COMMAND.count("### gpuinfra-mig") == 5


def test_no_driver_gives_no_gpus():
    assert node_state({"list": "", "mode": "", "lgi": "", "lci": "", "apps": ""}) == []


def test_converged_gpu_plans_nothing():
    plan = plan_gpu(h100_seven(), {"1g.10gb": 7}, H100)
    assert not plan.changes and plan.refusal is None and commands(plan) == []


def test_fresh_gpu_plans_enable_then_create():
    plan = plan_gpu(fresh_h100(), {"3g.40gb": 2}, H100)
    assert plan.set_mode is True and plan.create == ("3g.40gb", "3g.40gb")
    cmds = commands(plan)
    assert cmds[0] == "nvidia-smi -i 0 -mig 1"
    # Created at once where the mode went current; otherwise at boot, after the reset.
    assert "nvidia-smi mig -i 0 -cgi 3g.40gb,3g.40gb -C" in cmds[1]
    assert "mig.mode.current" in cmds[1] and "pending" in cmds[1]


def test_pending_mode_waits_for_the_reset():
    (state,) = node_state(sections(mode="Disabled, Enabled"))
    plan = plan_gpu(state, {"3g.40gb": 2}, H100)
    assert plan.set_mode is None and plan.pending and commands(plan) == []


def test_changed_layout_destroys_only_the_difference():
    plan = plan_gpu(h100_seven(), {"1g.10gb": 3, "3g.40gb": 1}, H100)
    # The four newest 1g (slices 3-6) go; those on slices 0-2 stay, the 3g takes 4-7.
    assert [g.instance_id for g in plan.destroy] == [10, 11, 12, 13]
    assert plan.create == ("3g.40gb",) and plan.set_mode is None
    assert commands(plan) == [
        *(c for i in (10, 11, 12, 13) for c in (f"nvidia-smi mig -i 0 -gi {i} -dci",
                                                 f"nvidia-smi mig -i 0 -gi {i} -dgi")),
        "nvidia-smi mig -i 0 -cgi 3g.40gb -C"]


def test_kept_instances_that_block_the_new_ones_are_made_again():
    # 4g.40gb starts only on slice 0, where a kept 1g.10gb sits: the GPU is laid out again.
    plan = plan_gpu(h100_seven(), {"1g.10gb": 1, "4g.40gb": 1}, H100)
    assert len(plan.destroy) == 7 and plan.create == ("4g.40gb", "1g.10gb")
    assert "no placement" in plan.notes[0]


def test_busy_gpu_is_refused_naming_the_processes():
    apps = f"{H100_UUID}, 4242, python3 train.py"
    plan = plan_gpu(h100_seven(apps=apps), {"3g.40gb": 2}, H100)
    assert plan.refusal and "4242 python3 train.py" in plan.refusal and "drain" in plan.refusal
    with pytest.raises(ValueError):
        commands(plan)


def test_busy_gpu_may_still_get_missing_instances():
    # Creating never stops a running process: only destroy and mode changes are refused.
    apps = f"{H100_UUID}, 4242, python3 train.py"
    lgi = (MIG / "h100-80gb-hbm3-mig-lgi-7x-1g.10gb-UNRESOLVED-SOURCE.txt").read_text()
    lgi_six = lgi.rsplit("|   0  MIG", 1)[0]  # GI 13 (slice 6) destroyed by hand
    lci = (MIG / "h100-80gb-hbm3-mig-lci-7x-1g.10gb-UNRESOLVED-SOURCE.txt").read_text()
    (state,) = node_state(sections(lgi=lgi_six, lci=lci, apps=apps))
    plan = plan_gpu(state, {"1g.10gb": 7}, H100)
    assert plan.refusal is None and plan.create == ("1g.10gb",) and not plan.destroy


def test_mig_off_destroys_everything_then_turns_the_mode_off():
    plan = plan_gpu(h100_seven(), {}, H100)
    cmds = commands(plan)
    assert plan.set_mode is False and len(plan.destroy) == 7
    assert cmds[-1] == "nvidia-smi -i 0 -mig 0" and plan.pending


def test_gpu_without_mig_mode_is_refused():
    (state,) = node_state(sections(mode="[N/A], [N/A]"))
    assert "no MIG mode" in plan_gpu(state, {"3g.40gb": 2}, H100).refusal
    assert not plan_gpu(state, {}, H100).changes


def test_layout_without_placement_is_refused():
    plan = plan_gpu(h100_seven(), {"4g.40gb": 1, "7g.80gb": 1}, H100)
    assert "no valid placement" in plan.refusal


def test_missing_compute_instances_are_added():
    lgi = (REAL / "nvidia-smi-mig-lgip" / "a30-24gb-mig-lgi-4x-1g.6gb.txt").read_text()
    (state,) = node_state({"list": "GPU 0: NVIDIA A30 (UUID: GPU-a30)",
                           "mode": "0, GPU-a30, Enabled, Enabled", "lgi": lgi, "lci": "",
                           "apps": ""})
    plan = plan_gpu(state, {"1g.6gb": 4}, GPU_MODELS["A30"])
    assert plan.add_compute == (3, 4, 5, 6) and not plan.create
    assert commands(plan)[0] == "nvidia-smi mig -i 0 -gi 3 -cci"


def test_a100_capture_converged():
    lgi = (MIG / "a100-40gb-mig-lgi-2x-3g.20gb-mps-test.txt").read_text()
    (state,) = node_state({"list": "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-a100)",
                           "mode": "0, GPU-a100, Enabled, Enabled", "lgi": lgi,
                           "lci": "", "apps": ""})
    plan = plan_gpu(state, {"3g.20gb": 2}, GPU_MODELS["A100-SXM4-40GB"])
    assert not plan.destroy and not plan.create and plan.add_compute == (1, 2)


def test_instance_set_from_a_real_mig_listing():
    text = (REAL / "nvidia-smi-L" / "dgx-a100-80gb-mig-all-balanced-L-head-n10.txt").read_text()
    mode = "0, GPU-8e100991-ce97-6694-b8eb-b8b1ff5053af, Enabled, Enabled"
    states = node_state({"list": text, "mode": mode, "lgi": "", "lci": "", "apps": ""})
    assert [instance_set(s) for s in states] == [{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}] * 2


def test_a_gpu_the_host_lacks_is_refused():
    plans = plan_node([h100_seven()], ({"1g.10gb": 7}, {"1g.10gb": 7}), H100)
    assert plans[0].refusal is None and "not on this host" in plans[1].refusal


def test_all_balanced_has_a_placement():
    # 3g + 2g + 2x 1g fits only with the 3g on slices 4-7 (no 1g starts on slice 7).
    chosen = placement(GPU_MODELS["A100-SXM4-80GB"], ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"])
    assert chosen is not None and chosen[0] == 4


def test_boot_script_and_unit():
    script = file_text(boot_script(({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, {}), H100))
    assert "layout 0 3g.40gb,2g.20gb,1g.10gb,1g.10gb" in script and "layout 1" not in script
    unit = file_text(boot_unit_text())
    assert "Before=slurmd.service kubelet.service" in unit and "Type=oneshot" in unit
