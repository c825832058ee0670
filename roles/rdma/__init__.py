"""The `rdma` role: hosts with ``rdma_nics`` get RDMA on their ConnectX NICs, with ATS and
GPUDirect RDMA on GPU nodes (Soft-RoCE devices in the lab).

The stack (the distribution's inbox rdma-core, or NVIDIA's DOCA-OFED from its repository or
the site's mirror, pinned by release and signing key; never both); the IOMMU in passthrough
mode through the kernel-argument mechanism the vfio role shares
(gpuinfra_deploy/ops/kernel_args.py);
``ATS_ENABLED`` in each NIC's firmware, set only where it differs from the spec, the reboot
recorded in the marker; on GPU nodes the GPUDirect RDMA path (nvidia-peermem loaded and
persisted, or DMA-BUF) and ACS off, at every boot, on the PCIe bridges between each GPU and its
nearest NIC only (never those VFIO isolation needs on a hypervisor); with ``soft_roce`` (the
lab), rxe devices made on their netdevs by a boot-time unit. Every file it writes is rendered
from data and judged (sh -n, systemd-analyze verify) before it goes live. Data keys:
defaults.py and the spec; per-distribution values: :data:`DISTRO`. Run it alone with
``pyinfra INVENTORY roles/rdma/deploy.py``.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host, logger
from pyinfra.api import OperationError, deploy
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from gpuinfra import reboot
from gpuinfra.apt.files import flat_repo_list, origin_preference
from gpuinfra.knowledge.packages import open_modules_for
from gpuinfra.knowledge.repositories import DOCA_URL
from gpuinfra.parsers.pcisysfs import PciSysfs
from gpuinfra.rdma.node import (
    ACS_SCRIPT,
    ACS_UNIT,
    MODULES_LOAD,
    PEERMEM,
    RXE_SCRIPT,
    RXE_UNIT,
    acs_bridges,
    acs_script,
    acs_unit,
    ancestors_of,
    gpudirect_path,
    nearest_pairs,
    peermem_modules_load,
    rxe_script,
    rxe_unit,
)
from gpuinfra.spec import NodeSpec
from gpuinfra.text import FileText
from gpuinfra.vfio import binding
from gpuinfra_deploy.facts.kernel import LoadedModules
from gpuinfra_deploy.facts.pci import PciFunctions
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S, apt_keyring
from gpuinfra_deploy.ops.checked import check_script, checked_files, upload_source
from gpuinfra_deploy.ops.kernel_args import kernel_arguments, node_arguments
from gpuinfra_deploy.ops.reboot import reboot_when_needed
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import text as render_text
from gpuinfra_roles.rdma.facts import AcsControl, PciPaths, RdmaDevices
from gpuinfra_roles.rdma.operations import firmware_ats

STAGE = "/etc/gpuinfra/.rdma-staged"
DOCA_KEYRING = "/usr/share/keyrings/gpuinfra-doca.gpg"
DOCA_LIST = "/etc/apt/sources.list.d/gpuinfra-doca.list"
DOCA_PIN = "/etc/apt/preferences.d/gpuinfra-doca-origin"
# DOCA's rdma-core, perftest... replace the distribution's: its origin is pinned above them.
DOCA_PRIORITY = 600

# The inbox stack: verbs, the rxe provider (ibverbs-providers), diagnostics, perftest, the
# firmware tool that reads ATS (mstconfig), setpci (pciutils) and `rdma` (iproute2).
_INBOX = ("rdma-core", "ibverbs-utils", "ibverbs-providers", "infiniband-diags", "perftest",
          "mstflint", "pciutils", "iproute2")
# DOCA-OFED's metapackage brings its own rdma-core, drivers (DKMS) and perftest.
_DOCA = ("doca-ofed", "mstflint", "pciutils", "iproute2")
# Per-distribution values: the package lists and DOCA's repository directory
# (linux.mellanox.com/public/repo/doca/<release>/<dir>/x86_64/; the ubuntu ones seen in use,
# debian12 by DOCA's naming: check your release's listing when you set rdma_stack).
# UNVERIFIED (knowledge audit 9735030 row 45): the directory name ``debian12`` is in use
# (``.../repo/doca/1.5.2/debian12/aarch64/`` in a SONiC BlueField build recipe), but no x86_64
# debian12 directory of a current DOCA release was found; a wrong one fails `apt update` before
# anything is installed.
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {"inbox": _INBOX, "doca": _DOCA, "doca_dir": "debian12"},
    # Inbox: rdma-core, ibverbs-utils, ibverbs-providers, infiniband-diags 56.1-1, perftest
    # 25.01.0+0.80-1, mstflint 4.31.0+1-4, iproute2 6.15.0-1 (trixie main Packages, 2026-12-07).
    # UNVERIFIED: ``debian13`` is DOCA's naming applied to trixie; no DOCA listing was readable
    # from here (as debian12 above): a wrong one fails `apt update` before anything is installed.
    "debian-13": {"inbox": _INBOX, "doca": _DOCA, "doca_dir": "debian13"},
    "ubuntu-22.04": {"inbox": _INBOX, "doca": _DOCA, "doca_dir": "ubuntu22.04"},
    "ubuntu-24.04": {"inbox": _INBOX, "doca": _DOCA, "doca_dir": "ubuntu24.04"},
}


@deploy("rdma")
def rdma(site: Site, node: NodeSpec) -> None:
    if not node.rdma_nics:
        raise OperationError(f"rdma: {node.name} has no rdma_nics")
    distro = DISTRO[host_distro()]
    stack = site.spec.rdma_stack
    _stack(stack, distro, node)
    triggers: list[tuple[Any, str]] = []
    if not node.soft_roce:  # rxe does no device DMA: no IOMMU setting, no firmware
        triggers.append((kernel_arguments(*node_arguments(node)), reboot.KERNEL_ARGS_CHANGED))
        triggers += [(op, reboot.ATS_CHANGED) for op in _firmware_ats(node)]
    if node.gpus is not None:
        _gpudirect(stack, node)
        if node.settings["rdma_acs_disable"]:
            _acs_off(node)
        else:  # ACS comes back at the next boot: the vfio role waits for that
            _no_acs_unit("rdma_acs_disable is False: ACS stays as the kernel set it")
    if node.soft_roce:
        _soft_roce(node)
    reboot_when_needed(site.spec.reboot_policy,
                       "to apply the IOMMU mode and the NICs' firmware settings", triggers,
                       worker=node.is_worker)


# ---------------------------------------------------------------------------- the stack

def _stack(stack: str, distro: dict[str, Any], node: NodeSpec) -> None:
    """One stack: DOCA-OFED's repository present only when it is the stack."""
    if stack == "doca-ofed":
        _doca_repository(distro, node)
    else:
        removed = [files.file(name=f"No DOCA-OFED repository ({path})", path=path,
                              present=False) for path in (DOCA_LIST, DOCA_PIN)]
        apt.update(name="Refresh apt after removing DOCA-OFED's repository",
                   _if=any_changed(*removed))
    packages = list(distro["doca" if stack == "doca-ofed" else "inbox"])
    apt.packages(name=f"Install the RDMA stack ({stack}): {', '.join(packages)}",
                 packages=packages, update=True, cache_time=APT_CACHE_S, no_recommends=True)


def doca_url(node: NodeSpec, distro: dict[str, Any]) -> str:
    """DOCA-OFED's repository for the node: release and distribution in the path (the pin)."""
    base = (node.settings["rdma_doca_mirror"] or DOCA_URL).rstrip("/")
    return f"{base}/{node.settings['rdma_doca_version']}/{distro['doca_dir']}/x86_64"


def _doca_repository(distro: dict[str, Any], node: NodeSpec) -> None:
    url = doca_url(node, distro)
    base = (node.settings["rdma_doca_mirror"] or DOCA_URL).rstrip("/")
    key = apt_keyring(name="Add DOCA-OFED's signing key (pinned fingerprint)",
                      url=f"{base}/GPG-KEY-Mellanox.pub", path=DOCA_KEYRING,
                      fingerprint=node.settings["rdma_doca_key_fingerprint"])
    listed = files.put(name=f"Add DOCA-OFED's repository ({url})", dest=DOCA_LIST,
                       src=upload_source(render_text(flat_repo_list(url, DOCA_KEYRING))),
                       mode="644")
    pinned = files.put(name="DOCA-OFED's packages replace the distribution's (apt pin)",
                       dest=DOCA_PIN,
                       src=upload_source(render_text(origin_preference(url, DOCA_PRIORITY))),
                       mode="644")
    apt.update(name="Refresh apt after adding DOCA-OFED's repository",
               _if=any_changed(key, listed, pinned))


# ---------------------------------------------------------------------------- firmware

def _nic_addresses(node: NodeSpec) -> dict[str, str]:
    """Each real NIC's PCI address: the spec's, else where sysfs finds the device."""
    found = host.get_fact(RdmaDevices)
    out = {}
    for nic in node.rdma_nics:
        address = nic.pci or found.get(nic.name)
        if address is None:
            raise OperationError(f"rdma: {node.name}: no RDMA device {nic.name} on this host "
                                 f"(ibv_devices lists {', '.join(sorted(found)) or 'none'}); "
                                 "set its pci in rdma_nics, or fix its name")
        out[nic.name] = address
    return out


def _firmware_ats(node: NodeSpec) -> list[Any]:
    addresses = _nic_addresses(node)
    return [firmware_ats(name=f"{nic.name}: ATS_ENABLED={nic.ats} in firmware "
                         f"({addresses[nic.name]})",
                         nic=nic.name, pci=addresses[nic.name], wanted=nic.ats)
            for nic in node.rdma_nics]


# ---------------------------------------------------------------------------- GPU nodes

def _gpudirect(stack: str, node: NodeSpec) -> None:
    assert node.gpus is not None
    open_modules = open_modules_for(node.gpus.model, node.settings["nvidia_driver_open_modules"])
    path = gpudirect_path(stack, open_modules, node.settings["rdma_peermem"])
    if path.path != "peermem":
        if path.path == "none":
            logger.warning(f"{host.print_prefix}rdma: no GPUDirect RDMA: {path.reason}")
        host.noop(f"GPUDirect RDMA by {path.path}: {path.reason}")
        files.file(name="nvidia-peermem not loaded at boot", path=MODULES_LOAD, present=False)
        return
    stage = f"{STAGE}/modules-load"
    checked_files(name="nvidia-peermem loaded at boot (modules-load.d)",
                  files={MODULES_LOAD: peermem_modules_load()}, stage=stage,
                  check=check_script("modprobe -n nvidia-peermem", "modprobe -n", stage))
    loaded = host.get_fact(LoadedModules).get("modules", {})
    if "nvidia" in loaded and PEERMEM not in loaded:
        server.shell(name="Load nvidia-peermem now", commands=["modprobe nvidia-peermem"])


def _acs_off(node: NodeSpec) -> None:
    """ACS off at every boot on the bridges between each GPU and its nearest NIC."""
    pci = PciSysfs.from_json(host.get_fact(PciFunctions))
    paths = {a: tuple(p) for a, p in host.get_fact(PciPaths).items()}
    gpus = [f.address for f in pci.functions
            if f.vendor_id == "10de" and f.class_code[:4] in ("0300", "0302")]
    protected: set[str] = set()
    if node.vfio is not None:  # VFIO's isolation: the bridges above passed-through devices
        passed = binding(node.vfio.addresses, node.vfio.ids, pci).functions
        protected = ancestors_of(passed, paths)
        gpus = [g for g in gpus if g not in passed]
    pairs = nearest_pairs(gpus, _nic_addresses(node).values(), paths)
    candidates = acs_bridges(pairs, protected)
    control = host.get_fact(AcsControl, bridges=candidates) if candidates else {}
    bridges = [b for b in candidates if control.get(b) is not None]
    if not bridges:
        _no_acs_unit("no bridge with ACS between a GPU and its NIC: nothing to turn off")
        return
    _boot_unit("ACS off on the GPU-NIC bridges: " + ", ".join(bridges), ACS_SCRIPT,
               acs_script(bridges), ACS_UNIT, acs_unit(), "acs")


def _no_acs_unit(why: str) -> None:
    """No ACS unit or script (the next boot keeps ACS as the kernel enables it)."""
    host.noop(why)
    gone = [files.file(name=f"No ACS unit ({path})", path=path, present=False)
            for path in (ACS_UNIT, ACS_SCRIPT)]
    systemd.daemon_reload(name="systemd forgets the ACS unit", _if=any_changed(*gone))


# ---------------------------------------------------------------------------- Soft-RoCE

def _soft_roce(node: NodeSpec) -> None:
    _boot_unit("Soft-RoCE devices: " + ", ".join(f"{n.name} on {n.netdev}"
                                                  for n in node.rdma_nics),
               RXE_SCRIPT, rxe_script(node.rdma_nics), RXE_UNIT, rxe_unit(node.rdma_nics),
               "rxe")


def _boot_unit(what: str, script_path: str, script: FileText, unit_path: str, unit: FileText,
               stage_name: str) -> None:
    """A boot-time oneshot: its script (checked by sh -n) and unit (systemd-analyze verify),
    enabled, and run again now when either changed."""
    stage = f"{STAGE}/{stage_name}"
    script_name = script_path.rsplit("/", 1)[1]
    unit_name = unit_path.rsplit("/", 1)[1]
    script_op = checked_files(name=f"{what} (script)", files={script_path: script},
                              stage=f"{stage}-script", mode="0755",
                              check=check_script(f"sh -n {stage}-script/{script_name}", "sh -n",
                                                 f"{stage}-script"))
    unit_op = checked_files(name=f"{what} (unit)", files={unit_path: unit}, stage=f"{stage}-unit",
                            check=check_script(f"systemd-analyze verify {stage}-unit/{unit_name}",
                                               "systemd", f"{stage}-unit"))
    systemd.daemon_reload(name=f"systemd reads {unit_name}", _if=unit_op.did_change)
    systemd.service(name=f"Enable {unit_name} at boot", service=unit_name, enabled=True,
                    running=True)
    systemd.service(name=f"Run {unit_name} again (script or unit changed)", service=unit_name,
                    restarted=True, _if=any_changed(script_op, unit_op))


def applies(site: Site, node: NodeSpec) -> bool:
    """Hosts with rdma_nics in the spec."""
    return bool(node.rdma_nics)


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("rdma", rdma, applies, reads=("nvidia_driver",))  # the driver's knobs
apply = ROLE.apply
