"""The `vfio` role: a KVM host whose VMs get whole PCI devices (GPUs) through VFIO.

IOMMU kernel arguments for the CPU vendor (a GRUB drop-in and update-grub; on Proxmox VE with
systemd-boot, /etc/kernel/cmdline and proxmox-boot-tool refresh); the VFIO modules at boot and
in the initramfs, ``options vfio-pci ids=`` with ``softdep`` lines so vfio-pci claims its
devices before nvidia/nouveau (initramfs rebuilt only when these files change); per-address
binding with driverctl; a libvirt domain per VM (checked by virt-xml-validate, defined with
virsh where libvirt runs) or its Proxmox VE ``hostpci`` entries; the reboot marker (or the
reboot, with ``reboot_policy = "if-needed"``) shared with the driver role. Refused before any
change: a listed device missing on the host, a device whose IOMMU group holds a device the host
keeps, a VM device that is not passed through, a device the host runs on (a NIC up, a disk in
use, the boot VGA; directly or through an ID), ACS cleared by the rdma role, a VM disk whose
links lead out of ``vfio_image_dir``. Data keys: defaults.py and the spec
(``vfio_devices``, ``vms``, ``vfio_nvlink``); per-platform values: :data:`DISTRO`. Run it alone
with ``pyinfra INVENTORY roles/vfio/deploy.py``.
"""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra import host, logger
from pyinfra.api import OperationError, deploy
from pyinfra.operations import apt, files, server

from gpuinfra import reboot
from gpuinfra.parsers.pcisysfs import PciSysfs
from gpuinfra.rdma.node import ACS_UNIT
from gpuinfra.spec import NodeSpec
from gpuinfra.spec.model import VfioSpec
from gpuinfra.vfio import (
    GROUP_FIX,
    INITRAMFS_MODULES,
    LIBVIRT_DIR,
    MODPROBE_CONF,
    MODULES_LOAD,
    VFIO_MODULES,
    Binding,
    binding,
    class_warnings,
    disk_escape,
    domain_xml,
    group_problems,
    host_use_refusals,
    kept_gpus_problem,
    modprobe_conf,
    modules_load_conf,
    qm_hostpci,
    vm_functions,
)
from gpuinfra_deploy.facts.pci import AcsOffUnit, PciFunctions, PciHostUse
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.facts.virt import LibvirtDomains, ProxmoxVersion, ResolvedPaths
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.checked import check_script, checked_files
from gpuinfra_deploy.ops.kernel_args import kernel_arguments, node_arguments
from gpuinfra_deploy.ops.reboot import reboot_when_needed
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_roles.vfio.operations import qm_vm, vfio_overrides

STAGE = "/etc/gpuinfra/.vfio-staged"

# Per-platform values: the task list below has no platform conditionals. Proxmox VE 8 is
# Debian 12 underneath (its os-release says so); `pveversion` tells them apart.
# virt-xml-validate (libvirt-clients) runs xmllint (libxml2-utils, only a recommendation).
_LIBVIRT = {"packages": ("driverctl", "pciutils", "libvirt-clients", "libxml2-utils"),
            "vms": "libvirt"}
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": _LIBVIRT,
    # driverctl 0.115-2, pciutils 1:3.13.0-2, libvirt-clients 11.3.0-3+deb13u3, libxml2-utils
    # (trixie main Packages, 2026-12-07). Proxmox VE 9 (on trixie): not supported (below).
    "debian-13": _LIBVIRT,
    "ubuntu-22.04": _LIBVIRT,
    "ubuntu-24.04": _LIBVIRT,
    # Proxmox VE manages its VMs with qm (no libvirt): hostpci entries instead of domain XML.
    "proxmox-ve-8": {"packages": ("driverctl", "pciutils"), "vms": "qm"},
}


@deploy("vfio")
def vfio(site: Site, node: NodeSpec) -> None:
    spec = node.vfio
    if spec is None:  # the spec gate gives every hypervisor its vfio settings
        raise OperationError(f"vfio: {node.name} is not a hypervisor")
    platform = DISTRO[_platform()]
    pci = PciSysfs.from_json(host.get_fact(PciFunctions))
    bound = binding(spec.addresses, spec.ids, pci)
    _refuse_what_cannot_work(node.name, spec, bound, pci)
    _refuse_what_the_host_needs(node, bound, pci, check_disks=platform["vms"] == "libvirt")
    apt.packages(name=f"Install {', '.join(platform['packages'])}",
                 packages=packages(site, node), update=True, cache_time=APT_CACHE_S,
                 no_recommends=True)

    arguments = kernel_arguments(*node_arguments(node))
    options, in_initramfs = _boot_binding(spec.ids, node.settings["vfio_host_drivers"])
    vfio_overrides(name="Bind the devices passed by address to vfio-pci (driverctl)",
                   functions=list(bound.by_address))
    if platform["vms"] == "qm":
        _proxmox_vms(spec, pci)
    else:
        _libvirt_vms(spec, pci)

    reboot_when_needed(site.spec.reboot_policy,
                       "to turn the IOMMU on and let vfio-pci claim its devices at boot",
                       [(arguments, reboot.KERNEL_ARGS_CHANGED),
                        (options, reboot.VFIO_OPTIONS_CHANGED),
                        (in_initramfs, reboot.VFIO_INITRAMFS_CHANGED)], worker=node.is_worker)


def packages(site: Site, node: NodeSpec) -> list[str]:
    """driverctl and the checks' tools, from the distribution (or Proxmox VE's Debian)."""
    return list(DISTRO[_platform()]["packages"])


def _platform() -> str:
    distro = host_distro()
    pve = host.get_fact(ProxmoxVersion)
    if pve is None:
        return distro
    if distro != "debian-12" or pve != 8:
        raise OperationError(f"vfio: {host.name}: Proxmox VE {pve} on {distro}: the role "
                             "supports Proxmox VE 8 (Debian 12)")
    return "proxmox-ve-8"


def _refuse_what_cannot_work(name: str, spec: VfioSpec, bound: Binding, pci: PciSysfs) -> None:
    """Stop before any change when the devices named are not there, when a VM would get a
    device that is not passed through, or when an IOMMU group would be split."""
    problems = [f"{a} (vfio_devices) is not a PCI function of this host (lspci -D lists them)"
                for a in bound.missing]
    for vm in spec.vms:
        functions, missing = vm_functions(vm.devices, pci)
        problems += [f"VM {vm.name!r}: {d} is not a PCI function of this host" for d in missing]
        problems += [f"VM {vm.name!r} gets {f}, which vfio_devices does not pass through "
                     "(neither its address nor its ID is listed)"
                     for f in functions if f not in bound.functions]
    problems += [f"{p}, which vfio_devices does not pass through: a VM gets an IOMMU group "
                 f"whole or not at all. Fix: pass every device of the group through, or "
                 f"{GROUP_FIX}" for p in group_problems(bound.functions, pci)]
    if problems:
        raise OperationError(f"vfio: {name}: " + "; ".join(problems))
    for pci_id in bound.unmatched_ids:
        logger.warning(f"{host.print_prefix}vfio: no device with ID {pci_id} on this host "
                       "(vfio_devices): nothing to claim")


def _refuse_what_the_host_needs(node: NodeSpec, bound: Binding, pci: PciSysfs,
                                check_disks: bool) -> None:
    """Stop before any change when VFIO would take what the host runs on (a NIC that is up,
    a disk in use, the boot VGA, or any of them through an ID), when the rdma role cleared
    ACS on this node, or when a VM's disk leads out of the image directory; warn on
    functions that are not GPUs or their companions."""
    use = host.get_fact(PciHostUse)
    problems = ["could not read what the host runs on (sysfs /sys/class/net, /sys/class/block, "
                "/proc/self/mountinfo printed nothing). Fix: check that sysfs and /proc are "
                "mounted, then deploy again"] if use is None else \
        host_use_refusals(node.vfio.ids, bound, pci, use)
    if node.gpus is not None:
        kept = kept_gpus_problem(node.gpus.model.key, node.gpus.model.pci_ids,
                                 node.gpus.count, bound, pci)
        problems += [kept] if kept else []
    acs = host.get_fact(AcsOffUnit)
    if acs["active"] or acs["unit"] or acs["script"]:
        when = "on this boot" if acs["active"] else "at every boot from the next"
        problems.append(
            f"the rdma role clears ACS on this node's PCIe bridges {when} ({ACS_UNIT}"
            f"{' active' if acs['active'] else ' installed'}): ACS Control is written 0 after "
            "the kernel computed the IOMMU groups, so they no longer isolate the devices VFIO "
            "would hand to VMs. Fix: set rdma_acs_disable = False for this host, run the rdma "
            "role (pyinfra INVENTORY roles/rdma/deploy.py: it removes the unit), "
            "reboot (ACS back on, groups computed again), then deploy again")
    disks = [vm.disk for vm in node.vfio.vms if vm.disk] if check_disks else []
    if disks:
        image_dir = node.settings["vfio_image_dir"]
        resolved = host.get_fact(ResolvedPaths, paths=[image_dir, *disks])
        image_dir_real = resolved.get(image_dir, {}).get("real", image_dir)
        for vm in node.vfio.vms:
            if not vm.disk:
                continue
            where = resolved.get(vm.disk)
            escape = disk_escape(vm.disk, where["real"], where["kind"], image_dir_real) \
                if where else f"{vm.disk} could not be resolved on the host (readlink -m)"
            if escape:
                problems.append(f"VM {vm.name!r}: {escape}. Fix: put the image file itself in "
                                f"{image_dir} (vfio_image_dir)")
    if problems:
        raise OperationError(f"vfio: {node.name}: " + "; ".join(problems))
    for warning in class_warnings(bound, pci):
        logger.warning(f"{host.print_prefix}vfio: {warning}")


def _boot_binding(ids: tuple[str, ...], host_drivers: list[str]) -> tuple[Any, Any]:
    """vfio-pci claims the listed IDs at boot, loaded first and from the initramfs; returns
    the two operations whose change rebuilds the initramfs (a reboot applies it)."""
    stage = f"{STAGE}/modprobe"
    options = checked_files(
        name="vfio-pci options and softdeps (modprobe.d)",
        files={MODPROBE_CONF: modprobe_conf(ids, host_drivers)}, stage=stage,
        check=check_script(f"modprobe --showconfig -C {stage}/{MODPROBE_CONF.rsplit('/', 1)[1]}",
                           "modprobe", stage,
                           fail_pattern="(libkmod|modprobe): (ERROR|WARNING|FATAL)"))
    stage = f"{STAGE}/modules-load"
    staged = f"{stage}/{MODULES_LOAD.rsplit('/', 1)[1]}"
    checked_files(name="VFIO modules loaded at boot (modules-load.d)",
                  files={MODULES_LOAD: modules_load_conf()}, stage=stage,
                  check=check_script(f"for m in $(grep -v '^#' {staged}); do modprobe -n \"$m\""
                                     " || exit 1; done", "modprobe -n", stage))
    in_initramfs = files.block(name="VFIO modules in the initramfs", path=INITRAMFS_MODULES,
                               content="\n".join(VFIO_MODULES),
                               marker="# {mark} gpuinfra vfio modules")
    server.shell(name="Rebuild the initramfs (vfio modules or options changed)",
                 commands=["update-initramfs -u -k all"],
                 _if=lambda: options.did_change() or in_initramfs.did_change())
    return options, in_initramfs


def _libvirt_vms(spec: VfioSpec, pci: PciSysfs) -> None:
    """Each VM's domain XML, checked by virt-xml-validate, defined with virsh when libvirt
    runs (and the XML changed or libvirt does not know the VM)."""
    if not spec.vms:
        return
    files.directory(name=f"Directory of the VMs' libvirt XML ({LIBVIRT_DIR})", path=LIBVIRT_DIR,
                    mode="755")
    domains = host.get_fact(LibvirtDomains)
    for vm in spec.vms:
        functions, _ = vm_functions(vm.devices, pci)
        path = f"{LIBVIRT_DIR}/{vm.name}.xml"
        stage = f"{STAGE}/libvirt"
        staged = shlex.quote(f"{stage}/{vm.name}.xml")
        xml = checked_files(name=f"VM {vm.name}: libvirt domain XML ({len(functions)} "
                            "functions passed through)", files={path: domain_xml(vm, functions)},
                            stage=stage, check=check_script(
                                f"virt-xml-validate {staged} domain", "virt-xml-validate",
                                stage))
        if domains is None:
            host.noop(f"libvirt does not run here: VM {vm.name} is in {path}, not defined")
            continue
        known = vm.name in domains
        server.shell(name=f"Define VM {vm.name} in libvirt (virsh define)",
                     commands=[f"virsh -c qemu:///system define {shlex.quote(path)}"],
                     _if=lambda xml=xml, known=known: xml.did_change() or not known)


def _proxmox_vms(spec: VfioSpec, pci: PciSysfs) -> None:
    for vm in spec.vms:
        if vm.vmid is None:
            raise OperationError(f"vfio: {host.name}: VM {vm.name!r} has no vmid: Proxmox VE "
                                 "names VMs by id (set vms[...]['vmid'])")
        functions, _ = vm_functions(vm.devices, pci)
        qm_vm(name=f"VM {vm.vmid} ({vm.name}): hostpci entries", vmid=vm.vmid, vm_name=vm.name,
              hostpci=qm_hostpci(functions), memory_mib=vm.memory_mib, cores=vm.vcpus)


def applies(site: Site, node: NodeSpec) -> bool:
    """The hypervisors (group hypervisors): VFIO passthrough for their VMs."""
    return node.is_hypervisor


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
ROLE = Role("vfio", vfio, applies, packages=packages)
apply = ROLE.apply
