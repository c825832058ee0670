"""The `gpu_sharing` role: the node side of the spec's ``gpu_sharing`` (MIG and MPS).

MIG (``{"mode": "mig", "mig_layout": ...}``): the layout as nvidia-mig-parted's config
(``/etc/nvidia-mig-manager/config.yaml``, gpuinfra.sharing.migconfig; read back before it goes
live),
so NVIDIA's MIG manager or mig-parted can use the same file; a boot script and a oneshot unit
(``gpuinfra-mig.service``) that re-create the instances at boot (they do not survive a
reboot) before slurmd, the kubelet and DCGM start; and the layout applied now, from the GPUs'
state read first (gpuinfra.sharing.migplan): the MIG mode switched where it differs (a mode still
pending needs a GPU reset or a reboot: the reboot marker, or the reboot with
``reboot_policy = "if-needed"``), only the instances that differ destroyed and created, and a
GPU whose instances would be destroyed under running processes refused, naming them.

MPS (``{"mode": "mps", ...}``): the MPS control daemon package at the driver's version, and a
unit (``gpuinfra-mps.service``, gpuinfra.sharing.mps) that sets compute mode EXCLUSIVE_PROCESS, runs
``nvidia-cuda-mps-control -d`` with its pipes in ``/run/nvidia-mps`` (root's, made by systemd:
never MPS' default /tmp/nvidia-mps, which a local user could create first) and applies the
spec's limits through the control interface; every login shell of the node exports that pipe
directory (``/etc/profile.d/gpuinfra-mps.sh``); checked by ``systemd-analyze verify`` before it goes
live, restarted when it changed, bounded restarts at boot (gpuinfra_deploy/ops/boot.py).

Time-slicing stays a scheduler feature (Slurm shards, the device plugin's replicas): nothing
runs on the node for it. Data keys: defaults.py; per-distribution values: :data:`DISTRO`.
Run it alone with ``pyinfra INVENTORY roles/gpu_sharing/deploy.py``.
"""

from __future__ import annotations

import shlex

from pyinfra import host, logger
from pyinfra.api import OperationError, deploy
from pyinfra.operations import apt, files, server, systemd

from gpuinfra.knowledge.packages import DriverRelease
from gpuinfra.sharing import migplan, mps
from gpuinfra.sharing.migconfig import (
    MIG_PARTED_CHECK,
    MIG_PARTED_CONFIG,
    config_name,
    mig_parted_yaml,
)
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.nvidia import NvidiaMigState
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.boot import BootNeeds, boot_order
from gpuinfra_deploy.ops.checked import check_script, checked_files, upload_source
from gpuinfra_deploy.ops.reboot import reboot_when_needed
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import text

STAGE = "/etc/gpuinfra/.gpu-sharing-staged"

# Per-distribution values. The MPS control daemon: Debian builds it as its own package
# (nvidia-cuda-mps, same source and version as the driver: its 535 pin covers it); Ubuntu
# ships it in nvidia-compute-utils-<branch>-server, which the driver role installs.
DISTRO = {
    "debian-12": {"mps_packages": ("nvidia-cuda-mps",), "yaml": "python3-yaml"},
    # Trixie (non-free Packages, 2026-12-07): nvidia-cuda-mps 550.163.01-2 only; source
    # nvidia-graphics-drivers-tesla-535 builds no MPS daemon (no nvidia-tesla-535-cuda-mps):
    # MPS on a 535 trixie node is refused (mps_missing). python3-yaml 6.0.2-1+b2 (main).
    "debian-13": {"mps_packages": ("nvidia-cuda-mps",), "yaml": "python3-yaml",
                  "mps_missing": ("535",)},
    "ubuntu-22.04": {"mps_packages": (), "yaml": "python3-yaml"},
    "ubuntu-24.04": {"mps_packages": (), "yaml": "python3-yaml"},
}

MPS_BOOT = BootNeeds(mps.UNIT_NAME, "the NVIDIA driver, kept loaded by nvidia-persistenced",
                     ("nvidia-persistenced.service",), ("nvidia-persistenced.service",))


@deploy("gpu_sharing")
def gpu_sharing(site: Site, node: NodeSpec, driver: DriverRelease) -> None:
    mode = node.sharing.mode
    if not node.settings["gpu_sharing_enabled"]:
        host.noop("gpu_sharing_enabled is False: MIG and MPS left as they are")
        return
    if mode == "mig":
        _mig(site, node)
    elif mode == "mps" and node.schedulers == ("kubernetes",):
        # The device plugin runs its own MPS control daemon (a DaemonSet): a second one on
        # the node would take the GPUs from it.
        host.noop("MPS on a Kubernetes-only node: the device plugin's MPS daemon serves it")
    elif mode == "mps":
        _mps(node, driver)
    else:
        host.noop(f"gpu_sharing mode {mode!r}: nothing runs on the node for it")


# ----------------------------------------------------------------------------- MIG

def _mig(site: Site, node: NodeSpec) -> None:
    assert node.gpus is not None  # the gate gives every MIG node its GPUs
    distro = DISTRO[host_distro()]
    apt.packages(name=f"Install {distro['yaml']} (reads the MIG config back)",
                 packages=packages(site, node), update=True, cache_time=APT_CACHE_S,
                 no_recommends=True)
    _mig_files(node)
    states = migplan.node_state(host.get_fact(NvidiaMigState) or
                                dict.fromkeys(migplan.SECTIONS, ""))
    if not states:
        host.noop("no NVIDIA driver answers yet (first install, reboot pending): "
                  f"{migplan.BOOT_UNIT} lays the GPUs out at boot once MIG mode is on; "
                  "deploy again after the reboot")
        return
    plans = migplan.plan_node(states, node.sharing.mig_layout, node.gpus.model)
    refusals = [p.refusal for p in plans if p.refusal]
    if refusals:
        raise OperationError(f"gpu_sharing: {node.name}: " + "; ".join(refusals))
    mode_changes = []
    for plan in plans:
        for note in plan.notes:
            logger.warning(f"{host.print_prefix}{note}")
        if not plan.changes:
            continue
        op = server.shell(name=f"MIG: {plan.describe()}", commands=migplan.commands(plan))
        if plan.set_mode is not None:
            mode_changes.append((op, migplan.MIG_PENDING_REASON.format(gpu=plan.index)))
    if not any(p.changes for p in plans):
        host.noop(f"MIG already as the spec says on {len(plans)} GPU(s)")
    pending = [p.index for p in plans if p.pending and p.set_mode is None]
    if pending:
        logger.warning(f"{host.print_prefix}MIG mode pending on GPU(s) "
                       f"{', '.join(map(str, pending))}: reset them (nvidia-smi -r -i N, "
                       "idle GPU) or reboot; the boot unit then creates the instances")
    reboot_when_needed(site.spec.reboot_policy, "to apply the MIG mode", mode_changes,
                       worker=node.is_worker)


def _mig_files(node: NodeSpec) -> None:
    """mig-parted's config, the boot script and its unit: each read back before it goes
    live; systemd reloaded and the unit enabled when it changed."""
    assert node.gpus is not None
    files.directory(name="MIG config directory", path=MIG_PARTED_CONFIG.rsplit("/", 1)[0],
                    mode="755")
    stage = f"{STAGE}/mig-parted"
    staged = shlex.quote(f"{stage}/{MIG_PARTED_CONFIG.rsplit('/', 1)[1]}")
    checked_files(name=f"MIG layout as mig-parted config ({MIG_PARTED_CONFIG})",
                  files={MIG_PARTED_CONFIG: mig_parted_yaml([node])}, stage=stage,
                  check=check_script(f"python3 -c {shlex.quote(MIG_PARTED_CHECK)} {staged} "
                                     f"{shlex.quote(config_name(node))}",
                                     "the mig-parted config check", stage))
    stage = f"{STAGE}/mig-boot"
    staged = shlex.quote(f"{stage}/{migplan.BOOT_SCRIPT.rsplit('/', 1)[1]}")
    checked_files(name=f"MIG boot script ({migplan.BOOT_SCRIPT})",
                  files={migplan.BOOT_SCRIPT: migplan.boot_script(node.sharing.mig_layout,
                                                                  node.gpus.model)},
                  stage=stage, mode="0755",
                  check=check_script(f"sh -n {staged}", "sh -n", stage))
    stage = f"{STAGE}/mig-unit"
    staged = shlex.quote(f"{stage}/{migplan.BOOT_UNIT}")
    unit = checked_files(name=f"MIG boot unit ({migplan.BOOT_UNIT}), checked by systemd",
                         files={migplan.BOOT_UNIT_PATH: migplan.boot_unit_text()}, stage=stage,
                         check=check_script(f"systemd-analyze verify {staged}", "systemd",
                                            stage))
    systemd.daemon_reload(name="Reload systemd units (new gpuinfra-mig unit)",
                          _if=unit.did_change)
    # Enabled only: it runs at boot; the deploy lays the GPUs out itself (below).
    systemd.service(name=f"Enable {migplan.BOOT_UNIT} (MIG instances at every boot)",
                    service=migplan.BOOT_UNIT, running=None, enabled=True)


# ----------------------------------------------------------------------------- MPS

def _mps(node: NodeSpec, driver: DriverRelease) -> None:
    assert node.gpus is not None
    distro = host_distro()
    if driver.branch in DISTRO[distro].get("mps_missing", ()):
        raise OperationError(f"gpu_sharing: {distro} carries no CUDA MPS daemon for driver "
                             f"branch {driver.branch} (its nvidia-cuda-mps is another "
                             "branch's build): set driver_branch = '550', or share these GPUs "
                             "another way (time-slicing, MIG)")
    packages = DISTRO[distro]["mps_packages"]
    installed = None
    if packages:
        installed = apt.packages(
            name=f"Install the CUDA MPS daemon ({', '.join(packages)} {driver.version})",
            packages=[f"{p}={driver.version}" for p in packages], update=True,
            cache_time=APT_CACHE_S, no_recommends=True, allow_downgrades=True,
            extra_install_args="--allow-change-held-packages")
    stage = f"{STAGE}/mps"
    staged = shlex.quote(f"{stage}/{mps.UNIT_NAME}")
    unit = checked_files(name=f"MPS control daemon unit ({mps.UNIT_NAME}), checked by systemd",
                         files={mps.UNIT_PATH: mps.unit_text(
                             node.sharing, node.gpus.count,
                             node.settings["gpu_sharing_mps_compute_mode"])},
                         stage=stage, check=check_script(f"systemd-analyze verify {staged}",
                                                         "systemd", stage))
    files.put(name=f"MPS clients find the daemon's pipes in {mps.PIPE_DIRECTORY} "
                   f"({mps.CLIENT_PROFILE})", dest=mps.CLIENT_PROFILE,
              src=upload_source(text(mps.client_profile())), mode="644")
    boot_order([MPS_BOOT])
    systemd.daemon_reload(name="Reload systemd units (new MPS unit)", _if=unit.did_change)
    limits = "; ".join(mps.control_commands(node.sharing, node.gpus.count)) or "none"
    systemd.service(name=f"Run {mps.UNIT_NAME} (limits: {limits})", service=mps.UNIT_NAME,
                    enabled=True, running=True,
                    restarted=unit.will_change or bool(installed and installed.will_change))


def packages(site: Site, node: NodeSpec) -> list[str]:
    """The YAML reader of a MIG node (the MPS daemon is the driver's, pinned: its own)."""
    if node.settings["gpu_sharing_enabled"] and node.sharing.mode == "mig":
        return [DISTRO[host_distro()]["yaml"]]
    return []


def applies(site: Site, node: NodeSpec) -> bool:
    """GPU nodes (the role itself says where the spec shares nothing)."""
    return node.gpus is not None


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("gpu_sharing", gpu_sharing, applies, takes_driver=True, packages=packages)
apply = ROLE.apply
