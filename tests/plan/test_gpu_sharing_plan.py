"""Plan tests of the `gpu_sharing` role on recorded facts: Debian 12, Ubuntu 22.04 and 24.04.

The GPUs' MIG state is what the role's one fact reads
(gpuinfra_deploy.facts.nvidia.NvidiaMigState), made of
real captures (tests/fixtures/mig: an H100 80GB HBM3 with 7x 1g.10gb, its `-lgi` and `-lci`)
on a 2-GPU H100 PCIe node: fresh (MIG off), converged (the layout exists), changed (another
layout), busy (a process on a GPU). The files the role writes are "in place" in the converged
layers when their SHA-256 is the one the library renders.
"""

from __future__ import annotations

import hashlib

import pytest
from pyinfra.api import OperationError

from gpuinfra.sharing import migplan, mps
from gpuinfra.sharing.migconfig import MIG_PARTED_CONFIG, mig_parted_yaml
from gpuinfra.spec import HostInput
from gpuinfra.units import boot_dropin, dropin_path
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_roles.gpu_sharing import MPS_BOOT, gpu_sharing
from tests.conftest import REPO
from tests.plan.harness import load_facts, plan
from tests.plan.test_nvidia_driver_plan import DISTROS, fresh

MIG = REPO / "tests" / "fixtures" / "mig"
LGI = (MIG / "h100-80gb-hbm3-mig-lgi-7x-1g.10gb-UNRESOLVED-SOURCE.txt").read_text()
LCI = (MIG / "h100-80gb-hbm3-mig-lci-7x-1g.10gb-UNRESOLVED-SOURCE.txt").read_text()
UUIDS = ("GPU-00000000-0000-0000-0000-000000000000", "GPU-11111111-1111-1111-1111-111111111111")
SEVEN = {"1g.10gb": 7}
NODE = {"ssh_hostname": "10.0.0.5", "gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
        "gpu_topology": "bridged-pairs"}
MIG_NODE = {**NODE, "gpu_sharing": {"mode": "mig", "mig_layout": SEVEN}}
DROPIN = dropin_path(MPS_BOOT.unit)
DROPIN_TEXT = file_text(boot_dropin(MPS_BOOT.why, MPS_BOOT.after, MPS_BOOT.wants))
MPS_NODE = {**NODE, "gpu_sharing": {"mode": "mps", "clients": 4, "thread_percentage": 25,
                                    "pinned_mem_limit": "8G"}}


def on_gpu(text: str, gpu: int) -> str:
    """A capture of GPU 0 as GPU ``gpu`` prints it (the first column is the GPU index)."""
    return text.replace("|   0  ", f"|   {gpu}  ")


def mig_state(mode: str, instances: bool, apps: str = "") -> dict[str, str]:
    listing = "\n".join(f"GPU {i}: NVIDIA H100 PCIe (UUID: {u})" for i, u in enumerate(UUIDS))
    lgi = lci = "No MIG-enabled devices found." if mode.startswith("Disabled") else \
        "No GPU instances found: Not Found"
    if instances:
        lgi = LGI + on_gpu(LGI, 1).split("|===", 1)[1].split("|\n", 1)[1]
        lci = LCI + on_gpu(LCI, 1).split("|===", 1)[1].split("|\n", 1)[1]
    return {"list": listing, "mode": "\n".join(f"{i}, {u}, {mode}" for i, u in enumerate(UUIDS)),
            "lgi": lgi, "lci": lci, "apps": apps}


def node_of(data: dict):
    return build_spec([HostInput("node1", ("workers",), {"schedulers": [], **data})]
                      ).node("node1")


def rendered(data: dict) -> dict[str, str]:
    node = node_of(data)
    assert node.gpus is not None
    if node.sharing.mode == "mps":
        # compute mode on
        return {mps.UNIT_PATH: file_text(mps.unit_text(node.sharing, node.gpus.count))}
    return {MIG_PARTED_CONFIG: mig_parted_yaml([node]),
            migplan.BOOT_SCRIPT: file_text(migplan.boot_script(node.sharing.mig_layout,
                                                               node.gpus.model)),
            migplan.BOOT_UNIT_PATH: file_text(migplan.boot_unit_text())}


def facts(distro: str, state: dict[str, str], data: dict = MIG_NODE,
          converged: bool = False) -> dict:
    """Facts of a GPU node of ``distro`` (the driver role's layers) and the MIG ``state``;
    ``converged``: everything this role writes, installs and enables is in place."""
    out = fresh(distro)
    out["gpuinfra_deploy.facts.nvidia.NvidiaMigState"] = state
    sha = out.setdefault("files.Sha256File", {})
    for path, text in rendered(data).items():
        sha[f"path={path}"] = hashlib.sha256(text.encode()).hexdigest() if converged else None
    if converged:
        _converge(out)
    return out


def _converge(out: dict) -> None:
    out["deb.DebPackages"] = {**out.get("deb.DebPackages", {}),
                              "python3-yaml": ["6.0-3"], "nvidia-cuda-mps": ["535.261.03-1"]}
    directory = {"mode": 755, "user": "root", "group": "root"}
    out["files.Directory"] = {**out["files.Directory"],
                              f"path={MIG_PARTED_CONFIG.rsplit('/', 1)[0]}": directory,
                              f"path={DROPIN.rsplit('/', 1)[0]}": directory,
                              "path=/etc/profile.d": directory}
    stamp = "path=/var/lib/apt/periodic/update-success-stamp"  # apt's cache is fresh
    out["files.File"] = {**out["files.File"],
                         stamp: load_facts("gpu-converged")["files.File"][stamp],
                         f"path={DROPIN}":
                         {"mode": 644, "user": "root", "group": "root", "size": 1}}
    out["files.File"][f"path={mps.CLIENT_PROFILE}"] = {"mode": 644, "user": "root",
                                                       "group": "root", "size": 1}
    out["files.Sha1File"] = {**out.get("files.Sha1File", {}), f"path={DROPIN}":
                             hashlib.sha1(DROPIN_TEXT.encode()).hexdigest(),
                             f"path={mps.CLIENT_PROFILE}":
                             hashlib.sha1(file_text(mps.client_profile()).encode()).hexdigest()}
    for fact, value in (("systemd.SystemdEnabled", True), ("systemd.SystemdStatus", True)):
        star = out[fact].get("*", {})
        out[fact] = {**out[fact], "*": {**star, migplan.BOOT_UNIT: value, mps.UNIT_NAME: value}}


@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_mig_gpu_plans_enable_and_create(distro):
    result = plan(gpu_sharing, facts(distro, mig_state("Disabled, Disabled", False)), MIG_NODE)
    for gpu in (0, 1):
        commands = result.op(f"MIG: GPU {gpu}: MIG mode on; create 1g.10gb").commands
        assert commands[0] == f"nvidia-smi -i {gpu} -mig 1"
        assert f"nvidia-smi mig -i {gpu} -cgi {','.join(['1g.10gb'] * 7)} -C" in commands[1]
    for words in ("mig-parted config", "MIG boot script", "MIG boot unit"):
        assert result.op(words).commands, words
    assert "systemctl enable gpuinfra-mig.service" in result.op("Enable gpuinfra-mig").commands
    for gpu in (0, 1):
        assert result.op(f"reboot is needed: MIG mode changed on GPU {gpu}").commands


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_mig_node_plans_nothing(distro):
    state = mig_state("Enabled, Enabled", True)
    result = plan(gpu_sharing, facts(distro, state, converged=True), MIG_NODE)
    assert result.commands == [], result.changing


@pytest.mark.parametrize("distro", DISTROS)
def test_changed_layout_plans_only_the_difference(distro):
    data = {**NODE, "mig_strategy": "mixed", "gpu_sharing": {
        "mode": "mig", "mig_layout": [SEVEN, {"1g.10gb": 3, "3g.40gb": 1}]}}
    state = mig_state("Enabled, Enabled", True)
    result = plan(gpu_sharing, facts(distro, state, data, converged=True),
                  data)
    (changed,) = [op for op in result.changing if op.name.startswith("gpu_sharing | MIG: ")]
    assert changed.name.endswith("GPU 1: destroy GI 10 (1g.10gb), GI 11 (1g.10gb), GI 12 "
                                 "(1g.10gb), GI 13 (1g.10gb); create 3g.40gb")
    assert changed.commands[-1] == "nvidia-smi mig -i 1 -cgi 3g.40gb -C"
    assert not [c for c in changed.commands if "-mig " in c or "-i 0 " in c]


@pytest.mark.parametrize("distro", DISTROS)
def test_busy_gpu_is_refused_naming_the_process(distro):
    data = {**NODE, "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 2}}}
    state = mig_state("Enabled, Enabled", True, apps=f"{UUIDS[1]}, 4242, /usr/bin/python3")
    with pytest.raises(OperationError, match=r"GPU 1 .*4242 /usr/bin/python3.*[Dd]rain"):
        plan(gpu_sharing, facts(distro, state, data, converged=True), data)


def test_pending_mode_plans_no_instance_and_says_so():
    state = mig_state("Disabled, Enabled", False)
    result = plan(gpu_sharing, facts("debian-12", state, converged=True),
                  MIG_NODE)
    assert result.commands == []


def test_no_driver_yet_writes_the_files_and_leaves_the_gpus_to_the_boot_unit():
    result = plan(gpu_sharing, facts("ubuntu-24.04", {}), MIG_NODE)
    assert result.op("MIG boot script").commands
    assert not [op for op in result.ops if op.name.startswith("gpu_sharing | MIG: GPU")]


@pytest.mark.parametrize("distro", DISTROS)
def test_mps_node_gets_the_daemon_with_its_limits(distro):
    result = plan(gpu_sharing, facts(distro, {}, MPS_NODE), MPS_NODE)
    install = [op for op in result.ops if "Install the CUDA MPS daemon" in op.name]
    if distro == "debian-12":  # Ubuntu's nvidia-compute-utils (the driver role) carries it
        assert install[0].commands[-1].endswith("nvidia-cuda-mps=535.261.03-1")
    else:
        assert install == []
    run = result.op(f"Run {mps.UNIT_NAME}")
    assert "set_default_active_thread_percentage 25" in run.name
    assert f"systemctl start {mps.UNIT_NAME}" in run.commands
    assert result.op("MPS control daemon unit").commands
    profile = result.op(f"MPS clients find the daemon's pipes in {mps.PIPE_DIRECTORY}")
    assert profile.commands and mps.PIPE_DIRECTORY == "/run/nvidia-mps"
    assert f"export CUDA_MPS_PIPE_DIRECTORY={mps.PIPE_DIRECTORY}\n" in \
        file_text(mps.client_profile())


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_mps_node_plans_nothing(distro):
    result = plan(gpu_sharing, facts(distro, {}, MPS_NODE, converged=True), MPS_NODE)
    assert result.commands == [], result.changing
