"""The kernel's IOMMU arguments, one mechanism for every role that needs them (vfio: the IOMMU
on for passthrough; rdma: passthrough mode for GPUDirect RDMA): a GRUB drop-in and
update-grub, or /etc/kernel/cmdline and proxmox-boot-tool on Proxmox VE with systemd-boot.

Each role passes the node's whole list (gpuinfra.vfio.node_kernel_args), so a node with both
roles gets one file that neither role changes back.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.api import OperationError
from pyinfra.facts.files import FileContents
from pyinfra.operations import files, server

from gpuinfra.vfio import GRUB_DROPIN, KERNEL_CMDLINE, grub_dropin, kernel_cmdline
from gpuinfra_deploy.facts.kernel import BootLoader
from gpuinfra_deploy.ops.checked import check_script, checked_files

# Where the new boot configuration is judged before it goes live (the vfio role's stage
# since it had the mechanism first: kept so that converged hosts see no change).
STAGE = "/etc/gpuinfra/.vfio-staged"


def kernel_arguments(args: tuple[str, ...], why: str) -> Any:
    """The IOMMU arguments ``args`` (gpuinfra.vfio.node_kernel_args: every role's, for this
    node) in the boot loader's configuration; returns the operation that changed it (a reboot
    applies it).

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
            name=f"IOMMU kernel arguments in {KERNEL_CMDLINE}: {' '.join(args)}",
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
        name=f"IOMMU kernel arguments for GRUB: {' '.join(args)}",
        files={GRUB_DROPIN: grub_dropin(args, why)}, stage=stage,
        # update-grub sources /etc/default/grub, then the drop-ins: the new one must source.
        check=check_script(f"sh -ec '. /etc/default/grub; . {staged}; "
                           "echo \"$GRUB_CMDLINE_LINUX\"'", "sh (GRUB's defaults)", stage))
    server.shell(name="Regenerate the GRUB configuration (update-grub)",
                 commands=["update-grub"], _if=changed.did_change)
    return changed
