"""Judging pasted kernel captures: `lsmod`, `dmesg` and `/proc/cmdline`, against the node's
GPUDirect RDMA path and IOMMU arguments (the rules the rdma and vfio roles deploy with:
:func:`gpuinfra.rdma.node.gpudirect_path`, :func:`gpuinfra.vfio.node_kernel_args`) and with the
verify suite's own judgement of the modules (``gpudirect_findings``).
"""

from __future__ import annotations

from gpuinfra.captures import CaptureVerdict
from gpuinfra.errors import GpuinfraError
from gpuinfra.monitoring.gpumetrics import (
    DRIVER_FAILURE_CAUSE,
    FATAL_XIDS,
    XID_FATAL_FIX,
    driver_failure_findings,
    judge_xids,
)
from gpuinfra.parsers.cmdline import parse_cmdline
from gpuinfra.parsers.kernellog import parse_kernel_log
from gpuinfra.parsers.system import NO_LSMOD_HEADER, parse_lsmod
from gpuinfra.rdma.node import PEERMEM, GpuDirect
from gpuinfra.rdma.verdicts import gpudirect_findings
from gpuinfra.verdicts import Finding
from gpuinfra.vfio import KERNEL_ARGS, RDMA_ARGS, missing_kernel_args, node_kernel_args

IB_CORE = "ib_core"


def judge_lsmod(text: str, path: GpuDirect, host: str = "-") -> CaptureVerdict:
    """`lsmod` (whole, or grepped: rows without the header are whole and read) against the
    GPUDirect RDMA path. nvidia_peermem missing from a grepped capture is proven only by
    ib_core's row: a loaded nvidia_peermem is one of ib_core's users."""
    modules, header = parse_lsmod(text)
    verdict = CaptureVerdict("lsmod", host, {"gpudirect": path.path},
                             blocks=len(modules.modules), sentences=True)
    if not header:
        verdict.cuts.append(NO_LSMOD_HEADER)
    if path.path != "peermem":
        verdict.findings += gpudirect_findings(path, modules.modules)
        verdict.judged = path.path == "none"
        return verdict
    if PEERMEM in modules.modules:
        verdict.cuts = []  # the one row the expectation asks about is whole: nothing is missing
        return verdict
    ib_core = modules.modules.get(IB_CORE)
    if header or ib_core is not None:
        found = gpudirect_findings(path, modules.modules)
        if not header and ib_core is not None:
            users = ", ".join(ib_core.used_by) or "none"
            found = [Finding.said(f.check, f"{f.what} (ib_core's users: {users})", f.cause,
                                  f.fix) for f in found]
        verdict.findings += found
    else:
        verdict.cuts.append(f"{PEERMEM} and {IB_CORE} are not in the rows shown: whether "
                            f"{PEERMEM} is loaded is not in the capture")
        verdict.judged = False
    return verdict


def judge_dmesg(text: str, iommu: str | None, host: str = "-",
                drain: tuple[int, ...] | None = None) -> CaptureVerdict:
    """A kernel log: fatal XIDs (the alert rules' list), nvidia_peermem's unresolved
    symbols, and the IOMMU: ``iommu`` "on" (a hypervisor: VFIO needs it), "passthrough" (an
    RDMA node: iommu=pt) or None (not judged). What the log does not hold proves nothing: a
    log without the IOMMU lines asked for is "no verdict"."""
    log = parse_kernel_log(text)
    drain = FATAL_XIDS if drain is None else drain  # the site's policy, with --inventory
    verdict = CaptureVerdict("dmesg", host, {"iommu": iommu, "fatal_xids": list(drain)},
                             blocks=log.lines, cuts=list(log.cuts), sentences=True)
    for judged in judge_xids(log.xids, drain):  # the health check's and the alert's one rule
        verdict.findings.append(Finding.said(
            verdict.kind, f"GPU {judged.pci}: {judged.what}", judged.cause, judged.fix,
            "fail" if judged.fatal else "warn"))
    cleared: dict[str, list[int]] = {}
    for event in log.xids:
        if event.cleared and event.xid not in cleared.setdefault(event.to_json()["pci"], []):
            cleared[event.to_json()["pci"]].append(event.xid)
    for pci, codes in cleared.items():
        verdict.findings.append(Finding.said(
            verdict.kind, f"GPU {pci}: Xid {', '.join(map(str, codes))} logged before the GPU's "
            "reset (gpuinfra-health reset-gpu): no longer judged", "", "", "ok"))
    for subject, what in driver_failure_findings(log.driver_failures):
        verdict.findings.append(Finding.said(verdict.kind, f"{subject}: {what}",
                                             DRIVER_FAILURE_CAUSE, XID_FATAL_FIX))
    if log.peermem_symbols:
        verdict.findings.append(Finding.said(
            verdict.kind,
            f"nvidia_peermem could not load: unresolved {', '.join(log.peermem_symbols)}",
            "the loaded ib_core does not export PeerDirect as nvidia-peermem was built against "
            "(the inbox ib_core has none; DOCA-OFED/MLNX_OFED installed or updated after the "
            "GPU driver)", "reinstall (rebuild) the GPU driver after DOCA-OFED, or use DMA-BUF "
            "(nvidia_driver_open_modules = True); `modprobe nvidia-peermem` and `dmesg | tail`"))
    judged = bool(log.xids or log.peermem_symbols or log.driver_failures)
    if iommu is not None:
        judged = _iommu(verdict, log, iommu) or judged
    verdict.judged = judged
    return verdict


def _iommu(verdict: CaptureVerdict, log: object, wanted: str) -> bool:
    """The IOMMU findings; whether the log held anything to judge them on."""
    from gpuinfra.parsers.kernellog import KernelLog

    assert isinstance(log, KernelLog)
    if log.iommu_off and not log.iommu_on:
        verdict.findings.append(Finding.said(
            verdict.kind, f"the kernel log says the IOMMU is off: {log.iommu_off[0][:100]}",
            "VT-d / AMD-Vi off in the firmware, or the kernel argument intel_iommu=on missing "
            "(Intel)", "enable VT-d / AMD-Vi (IOMMU) in the BIOS; the vfio role's kernel "
            "arguments, then reboot"))
        return True
    if wanted == "passthrough" and log.domain_type == "Translated":
        verdict.findings.append(Finding.said(
            verdict.kind, "iommu: Default domain type: Translated (not Passthrough)",
            "iommu=pt is not on the kernel command line: every NIC DMA is translated by the "
            "IOMMU (GPUDirect RDMA slow, or failing with local protection errors)",
            "the rdma role's kernel argument iommu=pt, then reboot; check /proc/cmdline"))
        return True
    if wanted == "passthrough":
        return log.domain_type == "Passthrough"
    return bool(log.iommu_on)


def expected_kernel_args(hypervisor: bool, rdma: bool, cpu_vendor: str | None
                         ) -> tuple[list[str], list[str]]:
    """(the arguments a node needs that can be judged, what cannot be and why): the rule of
    :func:`gpuinfra.vfio.node_kernel_args`, with the CPU vendor possibly unknown (a pasted
    /proc/cmdline does not say it)."""
    if not hypervisor or cpu_vendor is not None:
        if cpu_vendor is not None and cpu_vendor not in KERNEL_ARGS:
            raise GpuinfraError(f"CPU vendor {cpu_vendor!r}: known: {', '.join(KERNEL_ARGS)}")
        return list(node_kernel_args(hypervisor, rdma, cpu_vendor or "GenuineIntel")[0]), []
    # Every vendor's arguments in common, and the RDMA ones.
    common = [a for a in KERNEL_ARGS["GenuineIntel"]
              if all(a in v for v in KERNEL_ARGS.values())]
    args = common + [a for a in RDMA_ARGS if rdma and a not in common]
    unknown = ["the IOMMU argument of the CPU vendor is not judged (give --cpu-vendor "
               "GenuineIntel or AuthenticAMD)"]
    return list(dict.fromkeys(args)), unknown


def judge_cmdline(text: str, hypervisor: bool, rdma: bool, cpu_vendor: str | None,
                  host: str = "-") -> CaptureVerdict:
    """/proc/cmdline against the IOMMU arguments the vfio and rdma roles put there."""
    args, unknown = expected_kernel_args(hypervisor, rdma, cpu_vendor)
    cmdline = parse_cmdline(text)
    verdict = CaptureVerdict("/proc/cmdline", host,
                             {"hypervisor": hypervisor, "rdma": rdma, "cpu_vendor": cpu_vendor,
                              "args": args}, blocks=1 if cmdline.lines else 0,
                             cuts=list(unknown) + cmdline.cuts, sentences=True)
    missing = missing_kernel_args(" ".join(cmdline.args), args)
    if missing and not cmdline.cuts:
        verdict.findings.append(Finding.said(
            verdict.kind, f"kernel argument(s) {', '.join(missing)} missing from /proc/cmdline",
            "the boot loader change of the vfio/rdma role is not in effect: the host was not "
            "rebooted since the deploy, or update-grub / proxmox-boot-tool refresh did not run",
            "deploy the vfio/rdma role, then reboot the host (reboot_policy = 'if-needed' "
            "reboots it)"))
    elif missing:
        verdict.cuts.append(f"{', '.join(missing)} not in the arguments shown: not judged")
    verdict.judged = bool(args) and bool(cmdline.lines)
    return verdict
