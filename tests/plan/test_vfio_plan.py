"""Plan tests of the `vfio` role on recorded facts: Debian 12, Ubuntu 22.04 and 24.04 (GRUB,
libvirt) and Proxmox VE 8 (systemd-boot through proxmox-boot-tool, or GRUB; qm).

The host's PCI functions are the lab hypervisor guest's, captured from sysfs on its real kernel
(tests/fixtures/vfio/): before the role (fresh), after it and a reboot (converged), and with the
audio device of the stand-in pair's IOMMU group handed back to its host driver (split). The
spec is the lab's (gpuinfra_lab/profiles.py). Fixture layers (tests/plan/facts/): base-fresh,
<distro>, vfio-fresh (recorded on the lab guest), vfio-converged, and proxmox-ve-8 /
proxmox-ve-8-grub.
"""

from __future__ import annotations

import hashlib

import pytest
from pyinfra.api import OperationError

from gpuinfra import reboot
from gpuinfra.parsers.pcisysfs import parse_pci_sysfs
from gpuinfra.parsers.pciuse import parse_host_use
from gpuinfra.vfio import (
    GRUB_DROPIN,
    KERNEL_CMDLINE,
    LIBVIRT_DIR,
    MODPROBE_CONF,
    MODULES_LOAD,
    VFIO_MODULES,
    binding,
    domain_xml,
    grub_dropin,
    kernel_cmdline,
    modprobe_conf,
    modules_load_conf,
    vm_functions,
)
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_lab.profiles import HV_SPEC, HV_SPEC_GROUP_SPLIT
from gpuinfra_roles.vfio import vfio
from gpuinfra_roles.vfio.defaults import DEFAULTS
from tests.conftest import REPO
from tests.plan.harness import FakeHost, load_facts, plan_cluster, upload_text

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
CAPTURES = REPO / "tests" / "fixtures" / "vfio"
HOST = "kvm1"
PROXMOX_CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
INTEL = ("intel_iommu=on", "iommu=pt")
SSH_NIC, ROOT_DISK = "0000:00:01.0", "0000:00:02.0"  # the lab guest's (sysfs captures)


def pci(capture: str) -> dict:
    return parse_pci_sysfs((CAPTURES / f"sysfs-pci-lab-hv-{capture}.txt").read_text()).to_json()


def fresh(distro: str, *more: str) -> dict:
    facts = load_facts("base-fresh", distro.replace("proxmox-ve-8", "debian-12"), "vfio-fresh",
                       *more)
    facts["gpuinfra_deploy.facts.pci.PciFunctions"] = pci("fresh")
    return facts


def test_the_recorded_host_use_is_the_guests_capture():
    """vfio-fresh.json's PciHostUse (the guest's SSH NIC and root disk) is its capture."""
    assert fresh("debian-12")["gpuinfra_deploy.facts.pci.PciHostUse"] == parse_host_use(
        (CAPTURES / "host-use-lab-hv-fresh.txt").read_text())


def converged(distro: str, *more: str, spec: dict = HV_SPEC) -> dict:
    """A host the role converged and that rebooted since: every file the role renders in
    place (its digest), the modules block there, overrides saved and bound."""
    facts = fresh(distro, "vfio-converged", *more)
    facts["gpuinfra_deploy.facts.pci.PciFunctions"] = pci("converged")
    digests = facts.setdefault("files.Sha256File", {})
    for path, text in rendered(spec, facts).items():
        digests[f"path={path}"] = hashlib.sha256(text.encode()).hexdigest()
    return facts


def rendered(spec: dict, facts: dict) -> dict[str, str]:
    """Every file the role writes, as its renderers make them for ``spec`` on this host."""
    from gpuinfra.spec.model import VmSpec

    host_pci = parse_pci_sysfs((CAPTURES / "sysfs-pci-lab-hv-converged.txt").read_text())
    ids = [d for d in spec["vfio_devices"] if "." not in d]
    files = {MODPROBE_CONF: file_text(modprobe_conf(ids, DEFAULTS["vfio_host_drivers"])),
             MODULES_LOAD: file_text(modules_load_conf())}
    if facts.get("gpuinfra_deploy.facts.kernel.BootLoader") == "systemd-boot":
        files[KERNEL_CMDLINE] = kernel_cmdline(PROXMOX_CMDLINE, INTEL)
    else:
        files[GRUB_DROPIN] = file_text(grub_dropin(INTEL))
    for vm in spec["vms"]:
        functions, _ = vm_functions(vm["devices"], host_pci)
        typed = VmSpec(vm["name"], tuple(vm["devices"]), vm["vcpus"], vm["memory_mib"])
        files[f"{LIBVIRT_DIR}/{vm['name']}.xml"] = file_text(domain_xml(typed, functions))
    return files


def run(facts: dict, spec: dict = HV_SPEC, **data):
    hosts = [FakeHost(HOST, ("hypervisors",), facts, {**spec, **data})]
    return plan_cluster(vfio, hosts, HOST, {"schedulers": []})


def commands(result, words: str) -> tuple[str, ...]:
    return result.op(words).commands


def uploaded(result, words: str) -> str:
    """The text an operation uploads (its one FileUploadCommand)."""
    op = result.op(words)
    uploads = [c for c in op.raw if type(c).__name__ == "FileUploadCommand"]
    assert len(uploads) == 1, op
    return upload_text(uploads[0].src)


# ----------------------------------------------------------------------------- fresh host

@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_host_gets_iommu_arguments_early_binding_and_vms(distro):
    result = run(fresh(distro))
    install = commands(result, "Install driverctl")[-1]
    assert "install --no-install-recommends driverctl" in install and "libvirt-clients" in install
    assert 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX intel_iommu=on iommu=pt"' in \
        uploaded(result, "Kernel arguments for GRUB")
    assert "sh -ec '. /etc/default/grub; . /etc/gpuinfra/.vfio-staged/grub/gpuinfra-vfio.cfg" \
        in " ".join(commands(result, "Kernel arguments for GRUB"))
    assert commands(result, "update-grub") == ("update-grub",)
    options = uploaded(result, "vfio-pci options and softdeps")
    assert "options vfio-pci ids=8086:293e\n" in options
    for driver in ("nvidia", "nouveau", "snd_hda_intel"):
        assert f"softdep {driver} pre: vfio-pci\n" in options
    assert "modprobe --showconfig -C" in " ".join(commands(result, "vfio-pci options and"))
    assert uploaded(result, "VFIO modules loaded at boot").endswith("vfio\nvfio_iommu_type1\n"
                                                                     "vfio_pci\n")
    block = " ".join(commands(result, "VFIO modules in the initramfs"))
    assert all(m in block for m in VFIO_MODULES)
    assert commands(result, "Rebuild the initramfs") == ("update-initramfs -u -k all",)
    # By address: the two stand-in GPUs of the pair and GPU 0; the audio device goes by ID.
    assert commands(result, "Bind the devices passed by address") == tuple(
        f"driverctl set-override {a} vfio-pci"
        for a in ("0000:01:00.0", "0000:04:01.0", "0000:04:02.0"))
    for vm, functions in (("lab-vm1", 1), ("lab-vm2", 3)):
        op = result.op(f"VM {vm}: libvirt domain XML ({functions} functions")
        assert f"virt-xml-validate /etc/gpuinfra/.vfio-staged/libvirt/{vm}.xml domain" in \
            " ".join(op.commands)
    assert not [op for op in result.ops if "virsh define" in op.name]  # libvirt does not run
    markers = [c for op in result.ops if "Record that a reboot" in op.name for c in op.commands]
    assert [m.split("'")[1] for m in markers] == [reboot.KERNEL_ARGS_CHANGED,
                                                  reboot.VFIO_OPTIONS_CHANGED,
                                                  reboot.VFIO_INITRAMFS_CHANGED]


def test_an_amd_host_gets_iommu_pt_and_no_amd_iommu_on():
    """amd_iommu= has no "on" value (kernel-parameters.txt, parse_amd_iommu_options)."""
    facts = fresh("debian-12")
    facts["gpuinfra_deploy.facts.kernel.CpuVendor"] = "AuthenticAMD"
    dropin = uploaded(run(facts), "Kernel arguments for GRUB")
    assert "iommu=pt" in dropin and "amd_iommu" not in dropin


def test_the_vm_xml_has_every_function_of_each_card_on_its_own_root_port():
    xml = uploaded(run(fresh("debian-12")), "VM lab-vm2: libvirt domain XML")
    assert xml.count("<hostdev ") == 3 and xml.count("model=\"pcie-root-port\"") == 3
    assert "bus=\"0x04\" slot=\"0x03\" function=\"0x0\"" in xml  # the audio device


def test_with_libvirt_running_the_vms_it_lacks_are_defined():
    facts = converged("debian-12")
    facts["gpuinfra_deploy.facts.virt.LibvirtDomains"] = ["lab-vm1"]
    result = run(facts)
    assert commands(result, "Define VM lab-vm1") == ()
    assert commands(result, "Define VM lab-vm2") == (
        "virsh -c qemu:///system define /etc/gpuinfra/libvirt/lab-vm2.xml",)


def test_reboot_policy_if_needed_reboots_the_host():
    result = run(fresh("debian-12"), reboot_policy="if-needed")
    assert result.op("Reboot to turn the IOMMU on").commands


# ----------------------------------------------------------------------------- converged host

@pytest.mark.parametrize("distro", [*DISTROS, "proxmox-ve-8"])
def test_converged_host_plans_no_command(distro):
    more = ("proxmox-ve-8",) if distro == "proxmox-ve-8" else ()
    spec = PROXMOX_SPEC if more else HV_SPEC
    facts = converged(distro, *more, spec=spec)
    result = run(facts, spec)
    assert result.commands == [], result.changing


def test_converged_check_goes_red_when_an_override_is_lost():
    facts = converged("debian-12")
    del facts["gpuinfra_deploy.facts.pci.DriverctlOverrides"]["0000:04:02.0"]
    result = run(facts)
    assert commands(result, "Bind the devices passed by address") == (
        "driverctl set-override 0000:04:02.0 vfio-pci",)


# ----------------------------------------------------------------------------- refusals

def test_a_split_iommu_group_is_refused_before_any_change():
    with pytest.raises(OperationError) as caught:
        run(fresh("debian-12"), HV_SPEC_GROUP_SPLIT)
    message = str(caught.value)
    assert "vfio: kvm1: 0000:04:01.0 shares an IOMMU group (group 9) with 0000:04:03.0 " \
           "(8086:293e, snd_hda_intel), which vfio_devices does not pass through" in message
    assert "another slot, or ACS in the BIOS; never the ACS override patch in production" \
        in message


def test_a_device_missing_on_the_host_is_refused():
    spec = {**HV_SPEC, "vfio_devices": [*HV_SPEC["vfio_devices"], "0000:09:00.0"]}
    with pytest.raises(OperationError, match="0000:09:00.0 .vfio_devices. is not a PCI "
                                             "function of this host"):
        run(fresh("debian-12"), spec)


def test_a_vm_device_that_no_id_covers_is_refused_at_deploy():
    spec = {"vfio_devices": ["8086:293e"],
            "vms": [{"name": "v", "devices": ["0000:02:00.0"]}]}
    with pytest.raises(OperationError, match="VM 'v' gets 0000:02:00.0, which vfio_devices "
                                             "does not pass through"):
        run(fresh("debian-12"), spec)


def test_a_device_in_use_is_not_rebound_and_the_process_is_named():
    facts = fresh("debian-12")
    facts["gpuinfra_deploy.facts.pci.DeviceUsers"] = {
        "*": {"0000:04:01.0": ["2345 (qemu-system-x86)"]}}
    with pytest.raises(OperationError, match=r"not rebinding .*in use: 0000:04:01.0 by 2345 "
                                             r"\(qemu-system-x86\). Stop those processes"):
        run(facts)


# Issue 23, finding 5: VFIO never takes what the host runs on. The lab guest's own SSH NIC
# and root disk, from its captures.

def test_the_hosts_own_nic_by_address_is_refused_naming_it_and_why():
    spec = {"vfio_devices": [SSH_NIC]}
    with pytest.raises(OperationError) as caught:
        run(fresh("debian-12"), spec)
    message = str(caught.value)
    assert "vfio: kvm1: 0000:00:01.0 (1af4:1000, class 0x020000) is a device this host runs " \
           "on: its network interface enp0s1 is up. Fix: remove it from vfio_devices" in message


def test_the_hosts_own_nic_by_id_is_refused_naming_ids_and_the_device():
    spec = {"vfio_devices": ["1af4:1000"]}
    with pytest.raises(OperationError) as caught:
        run(fresh("debian-12"), spec)
    message = str(caught.value)
    assert "vfio_devices lists 1af4:1000: 'options vfio-pci ids=1af4:1000' takes every " \
           "function with that ID, including 0000:00:01.0, which this host runs on: its " \
           "network interface enp0s1 is up. Fix: pass the devices meant for VMs by address" \
           in message
    assert message.count("0000:00:01.0") == 1  # named once, as the ID's


def test_the_hosts_root_disk_is_refused():
    with pytest.raises(OperationError, match=r"0000:00:02.0 \(1af4:1001, class 0x010000\) is "
                                             r"a device this host runs on: its block device "
                                             r"vda1 is mounted at /\."):
        run(fresh("debian-12"), {"vfio_devices": [ROOT_DISK]})


@pytest.mark.parametrize(("use", "words"), [
    (["it is the boot VGA device (the host's console)"], "boot VGA"),
    (["its block device sdb2 is swap"], "sdb2 is swap"),
    (["its block device sdb1 is held by dm-0 (LVM, RAID or dm-crypt)"], "held by dm-0"),
], ids=["boot-vga", "swap", "lvm"])
def test_a_function_the_host_uses_otherwise_is_refused(use, words):
    facts = fresh("debian-12")
    facts["gpuinfra_deploy.facts.pci.PciHostUse"] = {"0000:02:00.0": use}
    with pytest.raises(OperationError, match=f"0000:02:00.0 .*{words}"):
        run(facts, {"vfio_devices": ["0000:02:00.0"]})


def test_the_lab_spec_is_refused_when_its_id_also_claims_a_device_the_host_uses():
    facts = fresh("debian-12")  # the lab spec passes the audio device by ID, 8086:293e
    facts["gpuinfra_deploy.facts.pci.PciHostUse"] = {
        "0000:04:03.0": ["its block device sdc is mounted at /srv"]}
    with pytest.raises(OperationError, match="ids=8086:293e' takes every function with that "
                                             "ID, including 0000:04:03.0, .*sdc is mounted"):
        run(facts)


def test_non_display_functions_are_warned_about_not_refused(caplog):
    run(fresh("debian-12"))
    warned = [r.getMessage() for r in caplog.records if "class 0x00ff00" in r.getMessage()]
    assert any("0000:01:00.0 (1af4:1044) has class 0x00ff00: not a display/3D controller"
               in m for m in warned), warned
    # An audio function beside no display function is not a GPU's companion: warned too.
    assert any("0000:04:03.0 (8086:293e) has class 0x040300" in r.getMessage()
               for r in caplog.records)


def test_a_host_whose_use_could_not_be_read_is_refused():
    facts = fresh("debian-12")
    facts["gpuinfra_deploy.facts.pci.PciHostUse"] = None  # the command printed nothing
    with pytest.raises(OperationError, match="could not read what the host runs on"):
        run(facts)


# Issue 23, finding 11: ACS cleared by the rdma role makes the IOMMU groups lie.

@pytest.mark.parametrize(("evidence", "words"), [
    ({"unit": True, "script": True, "active": True}, "on this boot"),
    ({"unit": True, "script": True, "active": False}, "at every boot from the next"),
    ({"unit": False, "script": False, "active": True}, "on this boot"),
], ids=["active", "installed", "unit-removed-not-rebooted"])
def test_a_node_whose_acs_the_rdma_role_cleared_is_refused(evidence, words):
    facts = fresh("debian-12")
    facts["gpuinfra_deploy.facts.pci.AcsOffUnit"] = evidence
    with pytest.raises(OperationError) as caught:
        run(facts)
    message = str(caught.value)
    assert f"the rdma role clears ACS on this node's PCIe bridges {words}" in message
    assert "set rdma_acs_disable = False for this host" in message and "reboot" in message


# Issue 23, finding 4: a VM disk stays inside vfio_image_dir, links resolved on the host.

IMAGES = "/var/lib/libvirt/images"
DISK_SPEC = {**HV_SPEC, "vms": [{**HV_SPEC["vms"][0], "disk": f"{IMAGES}/vm1.qcow2"},
                                HV_SPEC["vms"][1]]}


def with_disk(real: str, kind: str) -> dict:
    facts = fresh("debian-12")
    facts["gpuinfra_deploy.facts.virt.ResolvedPaths"] = {
        f"paths={[IMAGES, f'{IMAGES}/vm1.qcow2']}": {
            IMAGES: {"real": IMAGES, "kind": "dir"},
            f"{IMAGES}/vm1.qcow2": {"real": real, "kind": kind}}}
    return facts


@pytest.mark.parametrize(("real", "kind", "words"), [
    ("/etc/shadow", "file", "resolves to /etc/shadow, outside /var/lib/libvirt/images"),
    ("/dev/sda", "block", "outside"),
    (f"{IMAGES}/vm1.qcow2", "block", "is a block device, not an image file"),
], ids=["link-to-shadow", "link-to-disk", "device-node-inside"])
def test_a_vm_disk_leading_out_of_the_image_directory_is_refused(real, kind, words):
    with pytest.raises(OperationError) as caught:
        run(with_disk(real, kind), DISK_SPEC)
    assert f"VM 'lab-vm1': {IMAGES}/vm1.qcow2" in str(caught.value)
    assert words in str(caught.value)


def test_a_vm_disk_the_host_could_not_resolve_is_refused():
    facts = with_disk(f"{IMAGES}/vm1.qcow2", "file")
    facts["gpuinfra_deploy.facts.virt.ResolvedPaths"] = {"*": {}}
    with pytest.raises(OperationError, match="vm1.qcow2 could not be resolved on the host"):
        run(facts, DISK_SPEC)


@pytest.mark.parametrize("kind", ["file", "missing"])
def test_a_vm_disk_inside_the_image_directory_is_written(kind):
    result = run(with_disk(f"{IMAGES}/vm1.qcow2", kind), DISK_SPEC)
    xml = uploaded(result, "VM lab-vm1: libvirt domain XML")
    assert f'<source file="{IMAGES}/vm1.qcow2" />' in xml


def test_with_the_iommu_off_overrides_are_saved_for_the_next_boot():
    facts = fresh("debian-12")
    for function in facts["gpuinfra_deploy.facts.pci.PciFunctions"]["functions"]:
        function["iommu_group"] = None
    result = run(facts)
    assert commands(result, "Bind the devices passed by address")[0] == \
        "driverctl --noprobe set-override 0000:01:00.0 vfio-pci"


def test_an_override_no_longer_listed_is_removed():
    facts = converged("debian-12")
    facts["gpuinfra_deploy.facts.pci.DriverctlOverrides"]["0000:02:00.0"] = "vfio-pci"
    result = run(facts)
    assert commands(result, "Bind the devices passed by address") == (
        "driverctl unset-override 0000:02:00.0",)


# ----------------------------------------------------------------------------- Proxmox VE 8

PROXMOX_SPEC = {**HV_SPEC, "vms": [{**HV_SPEC["vms"][0], "vmid": 101},
                                   {**HV_SPEC["vms"][1], "vmid": 102}]}


def test_proxmox_systemd_boot_gets_its_kernel_cmdline_and_qm_hostpci():
    facts = fresh("proxmox-ve-8", "proxmox-ve-8")
    facts["gpuinfra_deploy.facts.virt.QmConfig"] = {"vmid=101": None, "vmid=102": {
        "name": "lab-vm2", "machine": "q35", "hostpci0": "0000:04:01,pcie=1",
        "hostpci3": "0000:81:00,pcie=1"}}
    result = run(facts, PROXMOX_SPEC)
    assert commands(result, "Install driverctl")[-1].endswith(
        "install --no-install-recommends driverctl pciutils")
    assert uploaded(result, f"Kernel arguments in {KERNEL_CMDLINE}") == \
        f"{PROXMOX_CMDLINE} intel_iommu=on iommu=pt\n"
    assert commands(result, "proxmox-boot-tool") == ("proxmox-boot-tool refresh",)
    assert not [op for op in result.ops if "GRUB" in op.name or "libvirt" in op.name]
    assert commands(result, "VM 101 (lab-vm1)") == (
        "qm create 101 --name lab-vm1 --machine q35 --bios ovmf --memory 1024 --cores 1 "
        "--hostpci0 0000:01:00,pcie=1",)
    # lab-vm2: its three functions are two cards (0000:04:01, 0000:04:02) and the audio card.
    assert commands(result, "VM 102 (lab-vm2)") == (
        "qm set 102 --hostpci1 0000:04:02,pcie=1 --hostpci2 0000:04:03,pcie=1 "
        "--delete hostpci3",)


def test_proxmox_with_grub_uses_the_grub_drop_in():
    facts = fresh("proxmox-ve-8", "proxmox-ve-8")
    facts["gpuinfra_deploy.facts.kernel.BootLoader"] = "grub"
    facts["gpuinfra_deploy.facts.virt.QmConfig"] = {"*": None}
    result = run(facts, PROXMOX_SPEC)
    assert commands(result, "update-grub") == ("update-grub",)
    assert not [op for op in result.ops if "proxmox-boot-tool" in op.name]


def test_proxmox_vm_without_vmid_is_refused():
    facts = fresh("proxmox-ve-8", "proxmox-ve-8")
    with pytest.raises(OperationError, match="VM 'lab-vm1' has no vmid"):
        run(facts, HV_SPEC)


def test_a_systemd_boot_cmdline_without_root_is_not_touched():
    facts = fresh("proxmox-ve-8", "proxmox-ve-8")
    facts["files.FileContents"][f"path={KERNEL_CMDLINE}"] = None
    with pytest.raises(OperationError, match="has no root= argument"):
        run(facts, PROXMOX_SPEC)


def test_binding_rule_matches_the_captures():
    """The captures are what the spec says: fresh, nothing on vfio-pci; converged, exactly
    the functions the spec passes through."""
    fresh_pci = parse_pci_sysfs((CAPTURES / "sysfs-pci-lab-hv-fresh.txt").read_text())
    done = parse_pci_sysfs((CAPTURES / "sysfs-pci-lab-hv-converged.txt").read_text())
    wanted = binding([d for d in HV_SPEC["vfio_devices"] if "." in d],
                     [d for d in HV_SPEC["vfio_devices"] if "." not in d], done)
    assert not [f for f in fresh_pci.functions if f.driver == "vfio-pci"]
    assert sorted(f.address for f in done.functions if f.driver == "vfio-pci") == \
        list(wanted.functions)
