"""The spec of hypervisors (VFIO): a valid one builds; each bad input is refused before any
host is touched, named by host, field, value and fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuinfra.spec import HostInput, build_cluster, validate

GPUS = ["0000:3b:00.0", "0000:3c:00.0", "0000:5e:00.0", "0000:5f:00.0"]


def site(**kvm: Any) -> list[HostInput]:
    """A head, a worker (a Slurm site needs one) and a KVM host with four bridged A6000
    pairs' worth of addresses."""
    data = {"vfio_devices": list(GPUS),
            "vms": [{"name": "train1", "devices": GPUS[:2], "vcpus": 8, "memory_mib": 65536},
                    {"name": "train2", "devices": GPUS[2:], "vmid": 101}],
            "vfio_nvlink": [{"gpus": GPUS[:2]}, {"gpus": GPUS[2:], "fabric": "bridge"}]}
    data.update(kvm)
    return [HostInput("head01", ("head",), {}), HostInput("cpu01", ("workers",), {}),
            HostInput("kvm01", ("hypervisors",), data)]


def errors_of(hosts: list[HostInput], field: str) -> list[str]:
    return [str(e) for e in validate(hosts) if e.field.startswith(field)]


def test_valid_hypervisor_builds_its_vfio_spec():
    spec = build_cluster(site())
    kvm = spec.node("kvm01")
    assert kvm.is_hypervisor and kvm.vfio.addresses == tuple(GPUS) and kvm.vfio.ids == ()
    assert [vm.name for vm in kvm.vfio.vms] == ["train1", "train2"]
    assert kvm.vfio.vms[0].memory_mib == 65536 and kvm.vfio.vms[1].vcpus == 4  # default
    assert kvm.vfio.vms[1].vmid == 101
    assert kvm.vfio.nvlink[0].fabric == "bridge"
    assert spec.node("head01").vfio is None


def test_addresses_and_ids_are_normalized():
    kvm = build_cluster(site(vfio_devices=["3B:00.0", "0000:3c:00.0", "0000:5e:00.0",
                                           "0000:5f:00.0", "10DE:1AEF"])).node("kvm01")
    assert kvm.vfio.addresses[0] == "0000:3b:00.0" and kvm.vfio.ids == ("10de:1aef",)


@pytest.mark.parametrize(("value", "words"), [
    ("0000:3b:00.0", "must be a list"),
    (["0000:3b:00"], "malformed PCI address"),
    (["10de:233"], "malformed PCI address or vendor:device ID"),
    (["0000:3b:00.8"], "malformed"),
    (["0000:3b:00.0\n"], "malformed"),
    ([None], "malformed"),
    ([], "passes nothing through"),
], ids=["string", "no-function", "short-id", "function-8", "newline", "none", "empty"])
def test_malformed_vfio_devices_are_refused(value, words):
    found = errors_of(site(vfio_devices=value, vms=None, vfio_nvlink=None), "vfio_devices")
    assert any(words in e for e in found), found


def test_a_device_listed_twice_is_refused():
    found = errors_of(site(vfio_devices=[*GPUS, "0000:3B:00.0"]), "vfio_devices")
    assert any("listed twice" in e for e in found), found


def test_vfio_on_a_host_outside_hypervisors_is_refused():
    hosts = site()
    hosts[-1] = HostInput("kvm01", ("workers",), hosts[-1].data)
    found = [str(e) for e in validate(hosts)]
    for key in ("vfio_devices", "vms", "vfio_nvlink"):
        assert any(f"kvm01: {key} = " in e and "outside the 'hypervisors' group" in e
                   and "add kvm01 to hypervisors" in e for e in found), key


def test_a_device_in_two_vms_is_refused():
    vms = [{"name": "a", "devices": [GPUS[0]]}, {"name": "b", "devices": ["0000:3b:00.1"]}]
    found = errors_of(site(vms=vms, vfio_nvlink=None), "vms")
    assert any("in two VMs: 'a' and 'b'" in e for e in found), found


def test_a_vm_device_that_is_not_passed_through_is_refused():
    vms = [{"name": "a", "devices": ["0000:af:00.0"]}]
    found = errors_of(site(vms=vms, vfio_nvlink=None), "vms")
    assert any("does not pass through" in e and "add '0000:af:00.0' to vfio_devices" in e
               for e in found), found


def test_a_vm_device_may_be_covered_by_an_id_checked_at_deploy():
    vms = [{"name": "a", "devices": ["0000:af:00.0"]}]
    assert validate(site(vfio_devices=["10de:2230"], vms=vms, vfio_nvlink=None)) == []


def test_another_function_of_a_listed_card_is_passed_through():
    vms = [{"name": "a", "devices": ["0000:3b:00.0", "0000:3b:00.1"]}]
    assert validate(site(vms=vms, vfio_nvlink=None)) == []


@pytest.mark.parametrize(("vm", "field", "words"), [
    ({"name": "a b", "devices": GPUS[:1]}, "['name']", "malformed VM name"),
    ({"name": "a", "devices": []}, "['devices']", "missing or empty"),
    ({"name": "a", "devices": ["10de:2230"]}, "['devices']", "a VM gets devices by address"),
    ({"name": "a", "devices": GPUS[:1], "vcpus": "8"}, "['vcpus']", "without quotes"),
    ({"name": "a", "devices": GPUS[:1], "memory_mib": 10}, "['memory_mib']", "out of range"),
    ({"name": "a", "devices": GPUS[:1], "vmid": 5}, "['vmid']", "out of range"),
    ({"name": "a", "devices": GPUS[:1], "disk": "vm.qcow2"}, "['disk']", "absolute path"),
    ({"name": "a", "devices": GPUS[:1], "cpus": 8}, "['cpus']", "did you mean 'vcpus'"),
], ids=["name", "no-devices", "id-device", "vcpus-text", "memory", "vmid", "disk", "typo"])
def test_bad_vm_settings_are_named(vm, field, words):
    found = errors_of(site(vms=[vm], vfio_nvlink=None), f"vms[0]{field}")
    assert any(words in e for e in found), found


def test_two_vms_with_one_name_or_vmid_are_refused():
    vms = [{"name": "a", "devices": GPUS[:1], "vmid": 100},
           {"name": "a", "devices": GPUS[1:2], "vmid": 100}]
    found = errors_of(site(vms=vms, vfio_nvlink=None), "vms")
    assert any("two VMs with the name 'a'" in e for e in found)
    assert any("two VMs with the vmid 100" in e for e in found)


def test_an_nvlink_pair_split_between_vms_is_refused_naming_the_pair():
    vms = [{"name": "a", "devices": [GPUS[0], GPUS[2]]},
           {"name": "b", "devices": [GPUS[1], GPUS[3]]}]
    found = errors_of(site(vms=vms), "vfio_nvlink[0]")
    assert len(found) == 1, found
    assert "GPUs joined by NVLink are split (0000:3b:00.0 (VM 'a'), 0000:3c:00.0 (VM 'b'))" \
        in found[0]
    assert "sees no NV# link" in found[0] and "give the GPUs of the group to one VM" in found[0]


def test_an_nvlink_pair_split_between_a_vm_and_the_host_is_refused():
    vms = [{"name": "a", "devices": [GPUS[0]]}]
    found = errors_of(site(vfio_devices=GPUS[:1], vms=vms), "vfio_nvlink[0]")
    assert any("0000:3c:00.0 (no VM)" in e for e in found), found


def test_part_of_an_nvswitch_board_in_a_vm_is_refused_with_the_reason():
    board = [f"0000:{b:02x}:00.0" for b in (0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb)]
    vms = [{"name": "half", "devices": board[:4]}]
    found = errors_of(site(vfio_devices=board, vms=vms,
                           vfio_nvlink=[{"gpus": board, "fabric": "nvswitch"}]), "vfio_nvlink")
    assert len(found) == 1, found
    assert "shared-NVSwitch mode" in found[0] and "does not deploy" in found[0]
    assert "give all 8 GPUs of the board (and its NVSwitches) to one VM" in found[0]
    whole = [{"name": "all", "devices": board}]
    assert validate(site(vfio_devices=board, vms=whole,
                         vfio_nvlink=[{"gpus": board, "fabric": "nvswitch"}])) == []


@pytest.mark.parametrize(("groups", "words"), [
    ([{"gpus": GPUS[:1]}], "two or more GPU addresses"),
    ([{"gpus": GPUS[:2], "fabric": "nvlink"}], "unknown NVLink fabric"),
    ([{"gpus": GPUS[:2], "links": 4}], "must be a dict of 'gpus' and 'fabric'"),
    ([{"gpus": GPUS[:2]}, {"gpus": GPUS[1:3]}], "already in vfio_nvlink[0]"),
], ids=["one-gpu", "fabric", "extra-key", "gpu-twice"])
def test_bad_nvlink_groups_are_named(groups, words):
    found = errors_of(site(vfio_nvlink=groups), "vfio_nvlink")
    assert any(words in e for e in found), found


def test_passing_the_hosts_own_gpu_model_by_id_is_refused():
    hosts = site(gpu_model="RTX-A6000", gpu_count=2, gpu_topology="bridged-pairs",
                 vfio_devices=["10de:2230"], vms=None, vfio_nvlink=None)
    found = errors_of(hosts, "vfio_devices")
    assert any("vfio-pci ids=10de:2230 claims every RTX-A6000 of the host" in e
               and "gpu_count = 2" in e and "by address" in e for e in found), found


def test_a_host_rdma_nic_passed_through_is_refused():
    hosts = site(rdma_nics=[{"name": "mlx5_0", "pci": "3b:00.1"}])
    found = errors_of(hosts, "vfio_devices")
    assert any("RDMA NIC mlx5_0 is also passed through" in e for e in found), found


def test_the_spec_keeps_the_hosts_gpus_apart_from_the_vms():
    """A host may keep GPUs (gpu_count) and pass others by address."""
    hosts = copy.deepcopy(site(gpu_model="RTX-A6000", gpu_count=2, gpu_topology="bridged-pairs",
                               vfio_devices=GPUS[2:],
                               vms=[{"name": "a", "devices": GPUS[2:]}],
                               vfio_nvlink=[{"gpus": GPUS[2:]}]))
    assert validate(hosts) == []


# ----------------------------------------------------------------------------- VM disks
# Issue 23, finding 4: a VM's disk went into the libvirt XML whatever absolute path it was.

IMAGES = "/var/lib/libvirt/images"


@pytest.mark.parametrize(("disk", "words"), [
    ("/dev/sda", "outside the VM image directory /var/lib/libvirt/images"),
    ("/etc/shadow", "outside the VM image directory"),
    (f"{IMAGES}/../../../../etc/shadow", "not a normalised path"),
    (f"{IMAGES}/./train1.qcow2", "not a normalised path"),
    (IMAGES, "outside the VM image directory"),
    (f"{IMAGES}/a b.qcow2", "not an absolute path of letters"),
    ("/var/lib/libvirt/images-old/a.qcow2", "outside the VM image directory"),
], ids=["block-device", "shadow", "dotdot", "dot", "the-directory", "space", "prefix"])
def test_a_vm_disk_outside_the_image_directory_is_refused(disk, words):
    hosts = site(vms=[{"name": "a", "devices": GPUS[:1], "disk": disk}], vfio_nvlink=None)
    found = [e for e in validate(hosts) if e.field == "vms[0]['disk']"]
    assert len(found) == 1 and words in found[0].problem, found
    assert found[0].host == "kvm01" and found[0].value == disk
    assert f"put the VM's image in {IMAGES}" in found[0].fix and "vfio_image_dir" in found[0].fix


def test_a_vm_disk_inside_the_image_directory_is_accepted():
    vms = [{"name": "a", "devices": GPUS[:1], "disk": f"{IMAGES}/pool2/a.qcow2"}]
    spec = build_cluster(site(vms=vms, vfio_nvlink=None))
    assert spec.node("kvm01").vfio.vms[0].disk == f"{IMAGES}/pool2/a.qcow2"


def test_the_image_directory_is_the_sites_knob():
    from gpuinfra_deploy.run.knobs import spec_problems

    vms = [{"name": "a", "devices": GPUS[:1], "disk": "/srv/vm-images/a.qcow2"}]
    hosts = [HostInput(h.name, h.groups, {**h.data, "node_address": f"10.0.0.{i}"})
             for i, h in enumerate(site(vms=vms, vfio_nvlink=None), 1)]  # every knob's rules
    assert [e.field for e in spec_problems(hosts)] == ["vms[0]['disk']"]
    moved = [HostInput(h.name, h.groups, {**h.data, "vfio_image_dir": "/srv/vm-images"})
             for h in hosts]
    assert spec_problems(moved) == []


@pytest.mark.parametrize(("value", "words"), [
    ("/", "not an absolute path"),
    ("/dev", "inside the system folder /dev"),
    ("/etc/libvirt", "inside the system folder /etc"),
    ("/var/lib", "/var/lib holds the system's own folders"),
    ("/tmp/images", "inside /tmp, which every user may write"),
    ("/srv/images/../..", "not a normalised path"),
    ("images", "not an absolute path"),
    (["/srv"], "must be a string"),
    # issue 44: the forbidden list missed these
    ("/var/spool/cron", "inside the system folder /var/spool/cron"),
    ("/var/log/vms", "inside the system folder /var/log"),
    ("/var/backups", "inside the system folder /var/backups"),
    ("/run/vms", "under /run, a tmpfs"),
], ids=["root", "dev", "etc", "var-lib", "tmp", "dotdot", "relative", "list", "cron",
        "var-log", "backups", "run"])
def test_a_bad_image_directory_is_refused_once(value, words):
    from gpuinfra_deploy.run.knobs import spec_problems

    hosts = [HostInput(h.name, h.groups, {**h.data, "vfio_image_dir": value})
             for h in site(vms=[{"name": "a", "devices": GPUS[:1], "disk": "/dev/sda"}],
                           vfio_nvlink=None)]
    found = [e for e in spec_problems(hosts) if e.field == "vfio_image_dir"]
    assert len(found) == 1 and words in found[0].problem, found
    assert found[0].host == "every host" and found[0].value == value
