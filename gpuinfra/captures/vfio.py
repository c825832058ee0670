"""VFIO judgements with their causes and fixes: the verify suite (gpuinfra_verify/test_vfio.py,
on the host's sysfs) and `gpuinfra check` (on a pasted IOMMU group listing, ``lspci -nnk``,
``virsh dumpxml``, or ``nvidia-smi topo -m`` run inside the VM) both use them.

What goes to a VM is the role's own rule (:func:`gpuinfra.vfio.binding`: the listed addresses,
the functions of the listed IDs, and every other function of those cards); the group rule is
:func:`gpuinfra.vfio.group_problems`. When the expectation names nothing, the NVIDIA display
functions of the capture (and their cards) are taken as the ones meant for VMs, and the
expectation says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuinfra.captures import CaptureVerdict
from gpuinfra.parsers.iommu import ListedFunction, PciListing
from gpuinfra.parsers.libvirt import HostdevCapture
from gpuinfra.parsers.pcisysfs import PciFunction, PciSysfs
from gpuinfra.verdicts import Finding
from gpuinfra.vfio import GROUP_FIX, VFIO_DRIVER, binding, group_problems, slot_of

GPU_HOST_DRIVERS = ("nvidia", "nouveau")
NVIDIA = "10de"

BINDING_CAUSE = ("vfio-pci did not claim them: the host was not rebooted since the deploy, a "
                 "host driver loaded first (softdep, initramfs), or the driverctl override is "
                 "missing")
BINDING_FIX = ("deploy the vfio role and reboot; `lspci -nnk -s <address>` shows the driver in "
               "use, `driverctl list-overrides` the overrides")
GROUP_CAUSE = ("a device given to a VM shares an IOMMU group with a device the host keeps: the "
               "group can only go to VMs whole")
SHARED_CARDS_CAUSE = ("two cards meant for VMs are in one IOMMU group (the root ports above them "
                      "have no ACS): neither can go to a VM without the other")
SHARED_CARDS_FIX = ("give both cards to one VM (name them with --device, or in the spec's VM), "
                    "or move one to a slot with its own group (a CPU root port with ACS); "
                    "never the ACS override patch in production")
HOST_DRIVER_CAUSE = ("the NVIDIA (or nouveau) driver claimed a GPU meant for a VM before "
                     "vfio-pci did")
HOST_DRIVER_FIX = ("deploy the vfio role (softdep nvidia pre: vfio-pci, vfio in the initramfs) "
                   "and reboot")
MISSING_CAUSE = ("no such PCI function on the host: the spec's address is wrong, or the card "
                 "is absent, moved to another slot, or fell off the bus")
MISSING_FIX = "`lspci -nn` on the host; correct vfio_devices (or reseat the card)"
VM_CAUSE = "the VM definitions are missing or not what the spec says"
VM_FIX = "deploy the vfio role (it writes and checks them)"
HOSTDEV_CAUSE = ("the VM passes a host function that is not one of the spec's cards (a "
                 "definition edited by hand, written for another host, or the card moved)")
HOSTDEV_FIX = ("deploy the vfio role (it writes the definition from the spec), or correct the "
               "<source><address> with `virsh edit`; `lspci -nn -s <address>` names the device")


def _sysfs(listing: PciListing) -> PciSysfs:
    """The listing as the role's model of the host (unknown IDs never match an ID)."""
    return PciSysfs([PciFunction(f.address, f.vendor_id or "", f.device_id or "",
                                 {True: "0604", False: "ffff", None: "ffff"}[f.is_bridge]
                                 if f.class_code is None else f.class_code + "00",
                                 f.driver, f.group, None)
                     for f in listing.functions])


def default_devices(listing: PciListing) -> list[str]:
    """The NVIDIA display functions (class 03xx) of the listing: what a pasted listing is
    judged for when the operator names no device."""
    return [f.address for f in listing.functions
            if (f.vendor_id == NVIDIA or f.description.startswith("NVIDIA"))
            and ((f.class_code or "").startswith("03")
                 or f.class_name in ("VGA compatible controller", "3D controller"))]


def expectation_of(addresses: Sequence[str], ids: Sequence[str], source: str,
                   listing: PciListing | None = None) -> tuple[list[str], dict[str, Any]]:
    """(addresses to judge, the expectation as --json shows it)."""
    if addresses or ids or listing is None:
        return list(addresses), {"devices": list(addresses), "ids": list(ids), "from": source}
    found = default_devices(listing)
    return found, {"devices": found, "ids": [], "from": DEFAULT_FROM}


# The expectation's "from" when the operator named nothing: each card must then be a VM's alone.
DEFAULT_FROM = ("every NVIDIA display function in the capture, each card for a VM of its own "
                "(no --device, --id or spec given)")


def _missing(listing: PciListing, addresses: Sequence[str], findings: list[Finding],
             cuts: list[str]) -> None:
    for address in addresses:
        if listing.whole_host:
            findings.append(Finding("vfio-device", address, "a PCI function of the host",
                                    "not in the listing", "fail", MISSING_CAUSE, MISSING_FIX))
        else:
            cuts.append(f"{address} is not in the capture (the listing is not the whole host)")


def judge_iommu_groups(listing: PciListing, addresses: Sequence[str], ids: Sequence[str],
                       host: str | None, expectation: dict[str, Any],
                       cards_apart: bool = False) -> CaptureVerdict:
    """Each IOMMU group holding a function meant for a VM holds nothing else the host keeps
    (bridges excepted; with ``lspci -k`` lines, devices on vfio-pci or on no driver too).
    ``cards_apart`` (no device named: :data:`DEFAULT_FROM`): each card is meant for a VM of
    its own, so two of them in one group fail."""
    verdict = CaptureVerdict("iommu-groups", host, expectation, cuts=list(listing.cuts))
    pci = _sysfs(listing)
    bound = binding(addresses, ids, pci)
    _missing(listing, bound.missing, verdict.findings, verdict.cuts)
    present = listing.by_address()
    groups: dict[int, list[str]] = {}
    for address in bound.functions:
        group = present[address].group
        if group is None:
            verdict.cuts.append(f"{address}: its IOMMU group is not in the capture")
        else:
            groups.setdefault(group, []).append(address)
    problems = group_problems(bound.functions, pci, live=listing.has_driver_lines,
                              drivers_shown=listing.has_driver_lines)
    for group, members in sorted(groups.items()):
        if group in listing.incomplete_groups:
            verdict.cuts.append(f"IOMMU group {group} is cut: not judged")
            continue
        mine = [p for p in problems if p.group == group]
        unknown = [p for p in mine if present[p.other.address].is_bridge is None]
        mine = [p for p in mine if p not in unknown]
        for p in unknown:
            verdict.cuts.append(f"IOMMU group {group}: {p.other.address} is listed without its "
                                "class: cannot tell whether it is a bridge")
        verdict.blocks += 1
        expected = "only the VM's functions, bridges" + (
            ", devices on vfio-pci or no driver" if listing.has_driver_lines else "")
        cards = sorted({slot_of(a) for a in members})
        if cards_apart and len(cards) > 1:
            # Named by no one: each card is meant for a VM of its own, which one group forbids.
            verdict.findings.append(Finding(
                "iommu-group", f"group {group}", "each card in a group of its own",
                f"cards {', '.join(cards)} share it", "fail", SHARED_CARDS_CAUSE,
                SHARED_CARDS_FIX))
        if not mine:
            verdict.findings.append(Finding("iommu-group", f"group {group}", expected,
                                            ", ".join(members) + " and bridges only", "ok"))
            continue
        others = {p.other.address: _described(present[p.other.address], listing)
                  for p in mine}
        verdict.findings.append(Finding(
            "iommu-group", f"group {group}", expected,
            f"{', '.join(members)} share it with " + "; ".join(others.values()), "fail",
            GROUP_CAUSE, GROUP_FIX))
    _cuts_beside(verdict, listing, addresses, ids, groups, cards_apart, len(bound.missing))
    if not verdict.findings and not verdict.cuts:
        verdict.judged = False
        verdict.cuts.append("no function meant for a VM is in the capture")
    return verdict


def _cuts_beside(verdict: CaptureVerdict, listing: PciListing, addresses: Sequence[str],
                 ids: Sequence[str], groups: Mapping[int, list[str]], cards_apart: bool,
                 missing: int) -> None:
    """Issue 47 item 2: the devices named (by address) are each in a group the capture lists
    whole, so what it cut elsewhere cannot change their verdict: said beside it, not as a cut.
    Not with IDs (a cut part could hold another function of that ID) nor with no device named
    (a cut part could hold another card)."""
    if cards_apart or ids or not addresses or missing or not groups:
        return
    if set(groups) & listing.incomplete_groups:
        return
    if any(c.endswith("its IOMMU group is not in the capture")
           or any(c.startswith(f"IOMMU group {g}:") for g in groups) for c in verdict.cuts):
        return
    if verdict.cuts:
        verdict.expectation = {**verdict.expectation, "cut elsewhere (not needed)":
                               list(verdict.cuts)}
        verdict.cuts.clear()


def _described(f: ListedFunction, listing: PciListing) -> str:
    ids = f" [{f.pci_id}]" if f.pci_id else ""
    driver = (f", driver {f.driver or 'none'}" if listing.has_driver_lines
              else ", driver not shown")
    return f"{f.address}{ids} {f.description}{driver}".replace("  ", " ")


def driver_finding(address: str, pci_id: str | None, driver: str | None) -> Finding:
    """One function meant for a VM against the driver bound to it: vfio-pci passes; a host
    GPU driver fails with its own cause; any other (or none) fails with the binding cause."""
    subject = f"{address} ({pci_id})" if pci_id else address
    seen = driver or "no driver"
    if driver == VFIO_DRIVER:
        return Finding("vfio-binding", subject, VFIO_DRIVER, seen, "ok")
    if driver in GPU_HOST_DRIVERS:
        return Finding("vfio-binding", subject, VFIO_DRIVER, f"{seen}, a host GPU driver",
                       "fail", HOST_DRIVER_CAUSE, HOST_DRIVER_FIX)
    return Finding("vfio-binding", subject, VFIO_DRIVER, seen, "fail", BINDING_CAUSE,
                   BINDING_FIX)


def judge_binding(listing: PciListing, addresses: Sequence[str], ids: Sequence[str],
                  host: str | None, expectation: dict[str, Any]) -> CaptureVerdict:
    """``lspci -nnk``: every function meant for a VM (whole cards) is on vfio-pci."""
    verdict = CaptureVerdict("lspci-nnk", host, expectation, cuts=list(listing.cuts))
    if not listing.has_driver_lines:
        verdict.cuts.append("no 'Kernel driver in use' lines: the capture is not `lspci -k`")
        verdict.judged = False
        return verdict
    bound = binding(addresses, ids, _sysfs(listing))
    _missing(listing, bound.missing, verdict.findings, verdict.cuts)
    present = listing.by_address()
    for address in bound.functions:
        f = present[address]
        verdict.findings.append(driver_finding(address, f.pci_id, f.driver))
        verdict.blocks += 1
    if not verdict.findings and not verdict.cuts:
        verdict.judged = False
        verdict.cuts.append("no function meant for a VM is in the capture")
    return verdict


def judge_hostdevs(capture: HostdevCapture, devices: Sequence[str], host: str | None,
                   expectation: dict[str, Any]) -> CaptureVerdict:
    """Every hostdev passes a function of the VM's cards, and every card the VM must get has
    a hostdev (the role gives whole cards: any function of a listed card is right)."""
    verdict = CaptureVerdict("virsh-hostdev", host, expectation, cuts=list(capture.cuts))
    slots = {slot_of(d) for d in devices}
    sources = {h.address for h in capture.hostdevs}
    for h in capture.hostdevs:
        verdict.blocks += 1
        if slot_of(h.address) in slots:
            verdict.findings.append(Finding("vm-hostdev", h.address, "a function of "
                                            + ", ".join(sorted(slots)), h.address, "ok"))
        else:
            verdict.findings.append(Finding(
                "vm-hostdev", h.address, "a function of " + (", ".join(sorted(slots)) or
                                                             "no device (the spec gives none)"),
                f"hostdev of {h.address} (line {h.line})", "fail", HOSTDEV_CAUSE,
                HOSTDEV_FIX))
    for device in devices:
        if device in sources or any(slot_of(s) == slot_of(device) for s in sources):
            continue
        if capture.cuts:
            verdict.cuts.append(f"{device}: no hostdev in the capture (it may be cut)")
        else:
            verdict.findings.append(Finding("vm-hostdev", device, "a hostdev in the VM",
                                            "none", "fail", VM_CAUSE, VM_FIX))
    if not capture.hostdevs and not verdict.findings:
        verdict.judged = False
        verdict.cuts.append("no PCI hostdev in the capture")
    return verdict
