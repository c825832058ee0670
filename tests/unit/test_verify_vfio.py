"""The VFIO verify judgements (gpuinfra_verify/vfio_expect.py): green on the converged lab guest's
captures, red with the right words on each broken state."""

from __future__ import annotations

from gpuinfra.parsers.pcisysfs import parse_pci_sysfs
from gpuinfra.vfio import binding
from gpuinfra_lab.profiles import HV_SPEC, HV_SPEC_GROUP_SPLIT
from gpuinfra_verify.vfio_expect import (
    binding_findings,
    group_findings,
    host_driver_findings,
    iommu_findings,
    kernel_arg_findings,
)
from tests.conftest import REPO

CAPTURES = REPO / "tests" / "fixtures" / "vfio"
CMDLINE = (CAPTURES / "proc-cmdline-lab-hv-converged.txt").read_text()


def pci(name: str):
    return parse_pci_sysfs((CAPTURES / f"sysfs-pci-lab-hv-{name}.txt").read_text())


def bound(spec: dict, capture: str):
    devices = spec["vfio_devices"]
    return binding([d for d in devices if "." in d], [d for d in devices if "." not in d],
                   pci(capture))


def test_kernel_arguments_green_then_red_naming_the_argument():
    assert kernel_arg_findings(CMDLINE, "GenuineIntel") == []
    missing = CMDLINE.replace(" intel_iommu=on", "")
    assert kernel_arg_findings(missing, "GenuineIntel") == [
        "kernel argument intel_iommu=on missing from /proc/cmdline"]
    # An AMD host needs no amd_iommu=on (the kernel has no such value): iommu=pt is enough.
    assert kernel_arg_findings(CMDLINE, "AuthenticAMD") == []
    assert kernel_arg_findings(CMDLINE.replace(" iommu=pt", ""), "AuthenticAMD") == [
        "kernel argument iommu=pt missing from /proc/cmdline"]


def test_iommu_on_and_off():
    assert iommu_findings(["dmar0"], 12) == []
    assert len(iommu_findings([], 0)) == 2


def test_converged_guest_passes_every_binding_check():
    wanted, host = bound(HV_SPEC, "converged"), pci("converged")
    groups = {str(f.iommu_group) for f in host.functions if f.driver == "vfio-pci"}
    assert binding_findings(wanted, host, [*groups, "vfio"]) == []
    assert group_findings(wanted, host) == []
    assert host_driver_findings(wanted, host) == []


def test_before_the_role_every_device_is_named_with_its_driver():
    found = binding_findings(bound(HV_SPEC, "fresh"), pci("fresh"), ["vfio"])
    assert "0000:04:01.0 (1af4:1044) is bound to virtio-pci, not vfio-pci" in found
    assert "0000:04:03.0 (8086:293e) is bound to snd_hda_intel, not vfio-pci" in found


def test_deployed_but_not_rebooted_names_the_arguments_and_the_device_by_id():
    """The guest after the first deploy, before its reboot (real captures): the boot-time
    changes are not in effect yet."""
    before = (CAPTURES / "proc-cmdline-lab-hv-before-reboot.txt").read_text()
    assert kernel_arg_findings(before, "GenuineIntel") == [
        "kernel argument intel_iommu=on missing from /proc/cmdline",
        "kernel argument iommu=pt missing from /proc/cmdline"]
    host = pci("deployed-not-rebooted")
    groups = {str(f.iommu_group) for f in host.functions if f.driver == "vfio-pci"}
    found = binding_findings(bound(HV_SPEC, "deployed-not-rebooted"), host, [*groups, "vfio"])
    assert found == ["0000:04:03.0 (8086:293e) is bound to snd_hda_intel, not vfio-pci"]


def test_a_missing_vfio_node_is_named():
    wanted, host = bound(HV_SPEC, "converged"), pci("converged")
    found = binding_findings(wanted, host, ["vfio"])
    assert any("/dev/vfio/" in f and "does not exist" in f for f in found)


def test_a_split_group_names_the_device_it_shares_with():
    found = group_findings(bound(HV_SPEC_GROUP_SPLIT, "split"), pci("split"))
    assert len(found) == 2
    assert all("shares an IOMMU group (group" in f and
               "with 0000:04:03.0 (8086:293e, snd_hda_intel)" in f for f in found)


def test_a_passthrough_device_on_nvidia_is_named():
    host = pci("converged")
    line = "0000:04:01.0 0x1af4 0x1044 0x00ff00 "
    text = (CAPTURES / "sysfs-pci-lab-hv-converged.txt").read_text().replace(
        f"{line}vfio-pci", f"{line}nvidia")
    assert text != (CAPTURES / "sysfs-pci-lab-hv-converged.txt").read_text()
    assert host_driver_findings(bound(HV_SPEC, "converged"), host) == []
    found = host_driver_findings(bound(HV_SPEC, "converged"), parse_pci_sysfs(text))
    assert found == ["0000:04:01.0 (1af4:1044) is bound to nvidia, a host GPU driver"]
