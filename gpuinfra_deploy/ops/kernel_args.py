"""The kernel's arguments, one mechanism for every role that needs them (vfio: the IOMMU on
for passthrough; rdma: passthrough mode for GPUDirect RDMA; slurm: cgroup v1 where the
distribution's Slurm has no cgroup v2 plugin): a GRUB drop-in and update-grub, or
/etc/kernel/cmdline and proxmox-boot-tool on Proxmox VE with systemd-boot.

Each role passes the node's whole list (:func:`node_arguments`, from
gpuinfra.vfio.node_kernel_args), so a node with several of these roles gets one file that no
role changes back.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.api import OperationError
from pyinfra.facts.files import FileContents
from pyinfra.operations import files, server

from gpuinfra.platforms import CGROUP_V1
from gpuinfra.spec import NodeSpec
from gpuinfra.vfio import (
    GRUB_DROPIN,
    KERNEL_CMDLINE,
    grub_dropin,
    kernel_cmdline,
    node_kernel_args,
)
from gpuinfra_deploy.facts.kernel import BootLoader, CpuVendor
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.checked import check_script, checked_files

# Where the new boot configuration is judged before it goes live (the vfio role's stage
# since it had the mechanism first: kept so that converged hosts see no change).
STAGE = "/etc/gpuinfra/.vfio-staged"


def needs_cgroup_v1(node: NodeSpec) -> bool:
    """This node runs slurmd on a distribution whose Slurm has only the cgroup/v1 plugin
    (gpuinfra.platforms.CGROUP_V1)."""
    return node.is_worker and "slurm" in node.schedulers and host_distro() in CGROUP_V1


def node_arguments(node: NodeSpec) -> tuple[tuple[str, ...], str]:
    """Every kernel argument this node needs and why, whichever role asks: the IOMMU on for
    a hypervisor, passthrough mode for real RDMA NICs, cgroup v1 for a Slurm 21.08 node."""
    hypervisor = node.is_hypervisor
    return node_kernel_args(hypervisor, bool(node.rdma_nics) and not node.soft_roce,
                            host.get_fact(CpuVendor) if hypervisor else "",
                            needs_cgroup_v1(node))


def kernel_arguments(args: tuple[str, ...], why: str) -> Any:
    """The kernel arguments ``args`` (:func:`node_arguments`: every role's, for this node) in
    the boot loader's configuration; returns the operation that changed it (a reboot applies
    it).

    + args: the arguments, e.g. ``("intel_iommu=on", "iommu=pt")``
    + why: the comment the GRUB drop-in carries
    """
    loader = host.get_fact(BootLoader)
    if loader == "systemd-boot":
        current = "\n".join(host.get_fact(FileContents, path=KERNEL_CMDLINE) or [])
        if "root=" not in current:
            raise OperationError(f"{host.name}: {KERNEL_CMDLINE} has no root= "
                                 "argument: not touching the kernel command line of a "
                                 "systemd-boot host that does not boot from it")
        stage = f"{STAGE}/cmdline"
        changed = checked_files(
            name=f"Kernel arguments in {KERNEL_CMDLINE}: {' '.join(args)}",
            files={KERNEL_CMDLINE: kernel_cmdline(current, args)}, stage=stage,
            check=check_script(f"test $(wc -l < {stage}/cmdline) -eq 1 && grep -q 'root=' "
                               f"{stage}/cmdline", "the kernel command line check", stage))
        server.shell(name="Copy the kernel command line to the ESPs (proxmox-boot-tool)",
                     commands=["proxmox-boot-tool refresh"], _if=changed.did_change)
        return changed
    if loader != "grub":
        raise OperationError(f"{host.name}: no update-grub and no proxmox-boot-tool "
                             "with systemd-boot: cannot set the kernel arguments")
    stage = f"{STAGE}/grub"
    staged = f"{stage}/{GRUB_DROPIN.rsplit('/', 1)[1]}"
    files.directory(name="GRUB drop-in directory", path=GRUB_DROPIN.rsplit("/", 1)[0])
    changed = checked_files(
        name=f"Kernel arguments for GRUB: {' '.join(args)}",
        files={GRUB_DROPIN: grub_dropin(args, why)}, stage=stage,
        # update-grub sources /etc/default/grub, then the drop-ins: the new one must source.
        check=check_script(f"sh -ec '. /etc/default/grub; . {staged}; "
                           "echo \"$GRUB_CMDLINE_LINUX\"'", "sh (GRUB's defaults)", stage))
    server.shell(name="Regenerate the GRUB configuration (update-grub)",
                 commands=["update-grub"], _if=changed.did_change)
    return changed
