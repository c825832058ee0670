"""GPU sharing on the GPU nodes (the `gpu_sharing` role), against the spec's ``gpu_sharing``.

MIG nodes: each GPU's MIG mode is the layout's and in effect (not pending); its MIG devices
(`nvidia-smi -L`) are the layout's; the boot unit that re-creates them is enabled; Slurm
advertises exactly the MIG devices the GPUs have. MPS nodes: the control daemon runs with the
spec's default active thread percentage, and every GPU is in EXCLUSIVE_PROCESS. Nodes without
MIG or MPS skip (time-slicing is a scheduler setting: test_slurm.py checks the shard GRES).
In the lab the GPUs are replayed captures (gpuinfra_lab/README.md): these prove the checks' logic.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

import pytest
from testinfra.host import Host

from gpuinfra.parsers.slurm import parse_sinfo_nodes
from gpuinfra.sharing.migplan import (
    BOOT_UNIT,
    STATE_COMMAND,
    GpuMigState,
    node_state,
    split_sections,
)
from gpuinfra.sharing.mps import CONTROL, PIPE_DIRECTORY, UNIT_NAME, expected_thread_percentage
from gpuinfra.sharing.verdicts import (
    ADVICE,
    boot_unit_findings,
    compute_mode_findings,
    instance_findings,
    mig_mode_findings,
    mps_limit_findings,
    slurm_gres_findings,
)
from gpuinfra.spec import NodeSpec
from gpuinfra_verify import matrices
from gpuinfra_verify.expect import problem
from gpuinfra_verify.failure import fail

VERIFY_NODES = "gpu"
Note = Callable[[str, object], None]


def _fail(note: Note, node: NodeSpec, kind: str, lines: list[str]) -> None:
    cause, fix = ADVICE[kind]
    fail(note, problem(node.name, "; ".join(lines), cause, fix))


@pytest.fixture(scope="module")
def mig_states(host: Host, node: NodeSpec) -> list[GpuMigState]:
    if node.sharing.mode != "mig":
        pytest.skip(f"gpu_sharing mode {node.sharing.mode!r}: no MIG on this node")
    if not node.settings.get("gpu_sharing_enabled", True):
        pytest.skip("gpu_sharing_enabled is False: MIG is the site's own business here")
    states = node_state(split_sections(host.check_output(STATE_COMMAND)))
    if not states:
        pytest.skip("nvidia-smi lists no GPU (driver not loaded: see test_driver.py)")
    return states


def _mps_node(node: NodeSpec) -> None:
    if node.sharing.mode != "mps" or node.schedulers == ("kubernetes",):
        pytest.skip("no node-wide MPS daemon here (mode not mps, or the device plugin's)")
    if not node.settings.get("gpu_sharing_enabled", True):
        pytest.skip("gpu_sharing_enabled is False")


def test_mig_mode(node: NodeSpec, mig_states: list[GpuMigState], note: Note) -> None:
    found = mig_mode_findings(mig_states, node.sharing.mig_layout)
    note("mig_mode", [(s.index, s.mig_current, s.mig_pending) for s in mig_states])
    if found:
        kind = "pending" if all(k == "pending" for k, _ in found) else "mode"
        _fail(note, node, kind, [line for _, line in found])


def test_mig_instances(node: NodeSpec, mig_states: list[GpuMigState], note: Note) -> None:
    found = instance_findings(mig_states, node.sharing.mig_layout)
    note("mig_devices", [list(s.mig_devices) for s in mig_states])
    note(matrices.MIG_LAYOUT, matrices.dump(matrices.mig_layout(node.sharing.mig_layout,
                                                                 mig_states)))
    if found:
        _fail(note, node, "instances", found)


def test_mig_boot_unit_enabled(host: Host, node: NodeSpec, mig_states: list[GpuMigState],
                               note: Note) -> None:
    enabled = host.run(f"systemctl is-enabled {BOOT_UNIT}").stdout
    note("boot_unit", enabled.strip())
    found = boot_unit_findings(enabled)
    if found:
        _fail(note, node, "boot", found)


def test_slurm_gres_equal_to_instances(controller: Host, node: NodeSpec,
                                       mig_states: list[GpuMigState], note: Note) -> None:
    if "slurm" not in node.schedulers:
        pytest.skip("not a Slurm node")
    out = controller.check_output(f"sinfo -N -h -n {shlex.quote(node.short_name)} "
                                  "-o '%N|%T|%G|%E'")
    advertised = parse_sinfo_nodes(out).get(node.short_name)
    note("gres", advertised.gres if advertised else None)
    found = slurm_gres_findings(advertised.gres if advertised else "", mig_states)
    if found:
        _fail(note, node, "gres", found)


def test_mps_daemon_limits(host: Host, node: NodeSpec, note: Note) -> None:
    _mps_node(node)
    active = host.run(f"systemctl is-active {UNIT_NAME}").stdout.strip()
    if active != "active":
        _fail(note, node, "mps", [f"{UNIT_NAME} is {active or 'not installed'}"])
    answer = host.run(f"echo get_default_active_thread_percentage | "
                      f"CUDA_MPS_PIPE_DIRECTORY={PIPE_DIRECTORY} {CONTROL}")
    note("thread_percentage", answer.stdout.strip())
    found = mps_limit_findings(answer.stdout, expected_thread_percentage(node.sharing))
    if found:
        _fail(note, node, "limits", found)


def test_mps_compute_mode(host: Host, node: NodeSpec, note: Note) -> None:
    _mps_node(node)
    if not node.settings.get("gpu_sharing_mps_compute_mode", True):
        pytest.skip("gpu_sharing_mps_compute_mode is False: the daemon leaves the mode as is")
    query = host.run("nvidia-smi --query-gpu=index,compute_mode --format=csv,noheader")
    if query.rc != 0:
        pytest.skip("nvidia-smi cannot query the GPUs (driver not loaded: see test_driver.py)")
    note("compute_mode", query.stdout.strip())
    found = compute_mode_findings(query.stdout)
    if found:
        _fail(note, node, "compute", found)
