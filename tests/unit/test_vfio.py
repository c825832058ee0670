"""The VFIO library (gpuinfra/vfio.py and its sysfs parser) on the lab guest's real captures:
kernel arguments, module files, the binding rule, IOMMU groups, VM definitions (libvirt XML
judged by virt-xml-validate itself, Proxmox hostpci)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from gpuinfra.errors import GpuinfraError, ParseError
from gpuinfra.parsers import PARSERS, parser_for
from gpuinfra.parsers.pcisysfs import (
    PciSysfs,
    device_users_command,
    parse_device_users,
    parse_driverctl_saved,
    parse_pci_sysfs,
)
from gpuinfra.parsers.proxmox import parse_qm_config
from gpuinfra.spec.model import VmSpec
from gpuinfra.vfio import (
    binding,
    domain_xml,
    group_problems,
    grub_dropin,
    hostpci_changes,
    iommu_off,
    kernel_args,
    kernel_cmdline,
    missing_kernel_args,
    modprobe_conf,
    normalize_address,
    qm_hostpci,
    vm_functions,
)
from gpuinfra_deploy.templates import text as file_text
from tests.conftest import REAL, REPO

CAPTURES = REPO / "tests" / "fixtures" / "vfio"
PAIR = ["0000:04:01.0", "0000:04:02.0"]
AUDIO = "0000:04:03.0"


def capture(name: str):
    return parse_pci_sysfs((CAPTURES / f"sysfs-pci-lab-hv-{name}.txt").read_text())


# ----------------------------------------------------------------------------- the parser

def test_the_fresh_capture_reads_every_function_with_driver_and_group():
    pci = capture("fresh").by_address()
    assert pci["0000:01:00.0"].pci_id == "1af4:1044" and pci["0000:01:00.0"].driver == \
        "virtio-pci"
    assert pci[AUDIO].pci_id == "8086:293e" and pci[AUDIO].driver == "snd_hda_intel"
    assert pci["0000:03:00.0"].is_bridge and pci["0000:03:00.0"].driver is None
    group = {pci[a].iommu_group for a in [*PAIR, AUDIO, "0000:03:00.0"]}
    assert len(group) == 1  # behind the PCIe-to-PCI bridge: one group
    assert pci["0000:01:00.0"].iommu_group not in group
    assert all(f.driver_override is None for f in pci.values())


def test_the_converged_capture_shows_the_overrides():
    pci = capture("converged").by_address()
    assert pci["0000:04:01.0"].driver == "vfio-pci"
    assert pci["0000:04:01.0"].driver_override == "vfio-pci"  # driverctl, by address
    assert pci[AUDIO].driver == "vfio-pci" and pci[AUDIO].driver_override is None  # by ID


@pytest.mark.parametrize("text", ["", "0000:00:00.0 0x8086 0x29c0 0x060000 -\n",
                                  "00:00.0 0x8086 0x29c0 0x060000 - 1 (null)\n"],
                         ids=["empty", "short-line", "no-domain"])
def test_the_parser_refuses_what_is_not_its_listing(text):
    with pytest.raises(ParseError):
        parse_pci_sysfs(text)


def test_the_parser_refuses_every_real_capture_and_every_parser_refuses_it():
    for path in sorted(p for p in REAL.rglob("*.txt")):
        with pytest.raises(ParseError):
            parse_pci_sysfs(path.read_text())
    text = (CAPTURES / "sysfs-pci-lab-hv-fresh.txt").read_text()
    for kind in (k for k, parser in PARSERS.items() if not parser.excerpts):
        with pytest.raises(ParseError):
            parser_for(kind)(text, mode="r") if kind == "p2p" else parser_for(kind)(text)


def test_driverctl_saved_overrides_and_device_users():
    assert parse_driverctl_saved("0000:04:01.0 vfio-pci\n") == {"0000:04:01.0": "vfio-pci"}
    with pytest.raises(ParseError):
        parse_driverctl_saved("pci-0000:04:01.0\n")
    assert parse_device_users("0000:04:01.0 2345 qemu-system-x86\n") == {
        "0000:04:01.0": ["2345 (qemu-system-x86)"]}
    assert "/dev/vfio/" in device_users_command(["0000:04:01.0"])
    with pytest.raises(ParseError):
        device_users_command(["0000:04:01.0; reboot"])


def test_device_users_command_finds_a_process_holding_a_file(tmp_path: Path):
    """The shell of the fact, run here: no such devices, so it prints nothing, and exits 0."""
    run = subprocess.run(["sh", "-c", device_users_command(["0000:ff:1f.7"])],
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == ""


# ----------------------------------------------------------------------------- kernel, modules

def test_kernel_arguments_per_cpu_vendor():
    assert kernel_args("GenuineIntel") == ("intel_iommu=on", "iommu=pt")
    # amd_iommu= has no "on" value (kernel-parameters.txt; parse_amd_iommu_options prints
    # "Unknown option"): the AMD IOMMU is on when the firmware enables it.
    assert kernel_args("AuthenticAMD") == ("iommu=pt",)
    with pytest.raises(GpuinfraError, match="no IOMMU kernel arguments known"):
        kernel_args("CentaurHauls")
    cmdline = "BOOT_IMAGE=/boot/vmlinuz root=UUID=x ro console=ttyS0 iommu=pt"
    assert missing_kernel_args(cmdline, kernel_args("GenuineIntel")) == ["intel_iommu=on"]
    assert missing_kernel_args("a intel_iommu=onx", ["intel_iommu=on"]) == ["intel_iommu=on"]


def test_grub_drop_in_appends_and_sources(tmp_path: Path):
    text = file_text(grub_dropin(("intel_iommu=on", "iommu=pt")))
    (tmp_path / "d.cfg").write_text(text)
    out = subprocess.run(["sh", "-ec", f'GRUB_CMDLINE_LINUX="console=ttyS0"; . {tmp_path}/d.cfg;'
                          ' echo "$GRUB_CMDLINE_LINUX"'], capture_output=True, text=True)
    assert out.stdout == "console=ttyS0 intel_iommu=on iommu=pt\n"


def test_systemd_boot_cmdline_keeps_what_is_there():
    current = "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"
    assert kernel_cmdline(current, ("intel_iommu=on", "iommu=pt")) == \
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt intel_iommu=on\n"


def test_modprobe_conf_claims_ids_before_the_host_drivers():
    text = file_text(modprobe_conf(["10de:2230", "10de:1aef"],
                                   ["nvidia", "nouveau", "snd_hda_intel"]))
    assert "options vfio-pci ids=10de:2230,10de:1aef\n" in text
    assert text.count("pre: vfio-pci") == 3
    assert "options vfio-pci" not in file_text(modprobe_conf([], ["nvidia"]))
    with pytest.raises(GpuinfraError, match="not a vendor:device ID"):
        modprobe_conf(["10de:2230\ninstall nvidia /bin/sh"], ["nvidia"])


# ----------------------------------------------------------------------------- binding, groups

def test_binding_expands_ids_and_cards_and_splits_the_methods():
    pci = capture("fresh")
    bound = binding(["0000:01:00.0", *PAIR], ["8086:293e"], pci)
    assert bound.functions == ("0000:01:00.0", *PAIR, AUDIO)
    assert bound.by_id == (AUDIO,) and bound.by_address == ("0000:01:00.0", *PAIR)
    assert bound.missing == () and bound.unmatched_ids == ()
    gone = binding(["0000:09:00.0"], ["10de:2331"], pci)
    assert gone.missing == ("0000:09:00.0",) and gone.unmatched_ids == ("10de:2331",)


def test_binding_by_id_claims_every_card_of_the_model():
    """Why a site keeping some cards of a model binds by address: an ID takes them all."""
    bound = binding([], ["1af4:1044"], capture("fresh"))
    assert bound.functions == ("0000:01:00.0", "0000:02:00.0", *PAIR)


def test_a_group_split_is_found_planned_and_live():
    fresh, split = capture("fresh"), capture("split")
    planned = group_problems(PAIR, fresh)
    assert [(p.device, p.other.address) for p in planned] == [(a, AUDIO) for a in PAIR]
    assert "shares an IOMMU group (group" in str(planned[0])
    assert "with 0000:04:03.0 (8086:293e, snd_hda_intel)" in str(planned[0])
    # Planned: the whole group passed through is fine (the bridge excepted, it has no driver).
    assert group_problems([*PAIR, AUDIO], fresh) == []
    # Live: the converged host is whole; the split capture (audio back on its driver) is not.
    assert group_problems([*PAIR, AUDIO], capture("converged"), live=True) == []
    live = group_problems(PAIR, split, live=True)
    assert [p.other.address for p in live] == [AUDIO, AUDIO]


def test_functions_without_a_group_mean_the_iommu_is_off():
    pci = capture("fresh")
    assert iommu_off(PAIR, pci) == []
    off = PciSysfs([replace(f, iommu_group=None) for f in pci.functions])
    assert iommu_off(PAIR, off) == PAIR


# ----------------------------------------------------------------------------- VMs

def _validate(tmp_path: Path, xml: str) -> subprocess.CompletedProcess:
    if shutil.which("virt-xml-validate") is None:
        pytest.fail("virt-xml-validate missing: `make test` installs libvirt-clients "
                    "(apt-get install libvirt-clients)")
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    return subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True,
                          text=True)


def test_vm_functions_take_whole_cards():
    functions, missing = vm_functions(["0000:04:01.0", "0000:09:00.0"], capture("fresh"))
    assert functions == ["0000:04:01.0"] and missing == ["0000:09:00.0"]


@pytest.mark.parametrize("vm", [
    VmSpec("lab-vm2", (*PAIR, AUDIO), 2, 2048),
    VmSpec("train1", ("0000:3b:00.0",), 8, 65536, disk="/var/lib/libvirt/images/train1.qcow2"),
], ids=["lab-pair", "disk"])
def test_domain_xml_is_valid_for_libvirt(tmp_path: Path, vm: VmSpec):
    functions = list(vm.devices) if vm.name != "train1" else ["0000:3b:00.0", "0000:3b:00.1"]
    xml = file_text(domain_xml(vm, functions))
    result = _validate(tmp_path, xml)
    assert result.returncode == 0, result.stdout + result.stderr
    if vm.name == "train1":  # a card with two functions: one root port, multifunction
        assert xml.count("pcie-root-port") == 1 and "multifunction=\"on\"" in xml
        assert "<source file=\"/var/lib/libvirt/images/train1.qcow2\" />" in xml


def test_virt_xml_validate_goes_red_on_a_broken_domain(tmp_path: Path):
    xml = file_text(domain_xml(VmSpec("lab-vm1", ("0000:01:00.0",)), ["0000:01:00.0"]))
    broken = xml.replace("<vcpu>4</vcpu>", "<vcpu>four</vcpu>")
    assert broken != xml
    assert _validate(tmp_path, broken).returncode != 0


def test_domain_xml_takes_full_function_addresses_only():
    with pytest.raises(GpuinfraError, match="not a PCI function address"):
        domain_xml(VmSpec("lab-vm1", ("01:00.0",)), ["01:00.0"])
    # What the template is given is data; autoescaping keeps markup in a value out of the XML.
    xml = file_text(domain_xml(VmSpec("a&b", ()), []))
    assert "<name>a&amp;b</name>" in xml


def test_proxmox_hostpci_entries_and_their_changes():
    wanted = qm_hostpci(["0000:3b:00.0", "0000:3b:00.1", "0000:3c:00.0"])
    assert wanted == {"hostpci0": "0000:3b:00,pcie=1", "hostpci1": "0000:3c:00,pcie=1"}
    config = parse_qm_config("boot: order=scsi0\nhostpci0: 0000:3b:00,pcie=1\n"
                             "hostpci2: 0000:81:00,pcie=1\nname: train1\n")
    assert hostpci_changes(wanted, config) == ({"hostpci1": "0000:3c:00,pcie=1"}, ["hostpci2"])
    converged = {"name": "train1", "hostpci0": "0000:3b:00,pcie=1",
                 "hostpci1": "0000:3c:00,pcie=1"}
    assert hostpci_changes(wanted, converged) == ({}, [])


def test_addresses_normalize_to_sysfs_form():
    assert normalize_address("3B:00.1") == "0000:3b:00.1"
    assert normalize_address("0001:3B:00.1") == "0001:3b:00.1"
