"""The lab's QEMU guests without QEMU: host plans, the command line, segments, the disk's
partition table, the image key, inventory/lab.py and ssh_config for a guest."""

from __future__ import annotations

import json
import runpy
import shutil
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from gpuinfra_cli.lab import guest_counts
from gpuinfra_lab import profiles, qemu, state, vmimage
from gpuinfra_lab.profiles import GuestMachine, HostPlan, plan_hosts
from tests.conftest import REPO


def guest(name: str = "lab-hv1", profile: str = "hv-standins") -> HostPlan:
    return HostPlan(name, profiles.PROFILES[profile].groups, profile)


def test_guests_follow_the_containers_and_broken_gives_the_broken_variant():
    plan = plan_hosts(workers=0, guests={"hv-standins": 1})
    assert [(h.name, h.groups, h.profile) for h in plan] == [
        ("lab-head", ("head",), None), ("lab-hv1", ("hypervisors",), "hv-standins")]
    assert plan[1].machine is profiles.HV_MACHINE and plan[0].machine is None
    broken = plan_hosts(workers=0, broken=True, guests={"hv-standins": 1})
    assert broken[-1].profile == "hv-standins-group-split"
    assert broken[-1].machine == plan[1].machine  # same machine: the guest keeps running


def test_guest_profiles_are_table_entries():
    assert profiles.GUEST_PROFILES == ("hv-standins", "rdma-soft-roce")
    assert profiles.BROKEN_GUESTS == {"hv-standins": "hv-standins-group-split"}
    assert profiles.guest_problem("hv-standins", 1) is None
    assert "unknown guest profile" in profiles.guest_problem("rdma", 1)
    assert "between 1 and 4" in profiles.guest_problem("hv-standins", 5)
    assert "between 1 and 2" in profiles.guest_problem("rdma-soft-roce", 3)  # one segment
    with pytest.raises(ValueError, match="guest profile"):
        profiles.build("hv-standins")


def test_lab_cli_reads_vm_counts():
    assert guest_counts(["hv-standins"]) == {"hv-standins": 1}
    assert guest_counts(["hv-standins=2"]) == {"hv-standins": 2}
    assert "N must be a number" in guest_counts(["hv-standins=x"])
    assert "unknown guest profile" in guest_counts(["nope"])


def test_qemu_command_has_the_iommu_the_forward_the_fw_cfg_and_the_standins(tmp_path: Path):
    cmd = qemu.qemu_command(guest(), profiles.HV_MACHINE, tmp_path, 40022, "tcg", "abcd1234",
                            tmp_path / "keys")
    line = " ".join(cmd)
    assert cmd[:3] == ["qemu-system-x86_64", "-name",
                       "gpuinfra-lab-abcd1234-lab-hv1,process=gpuinfra-lab-abcd1234-lab-hv1"]
    assert "-machine q35,accel=tcg -cpu qemu64,vendor=GenuineIntel -smp 2 -m 1024" in line
    assert "-device intel-iommu,intremap=off" in line
    assert "user,id=mgmt,dhcpstart=10.0.2.15,hostfwd=tcp:127.0.0.1:40022-:22" in line  # loopback
    assert f"name=opt/gpuinfra/authorized_keys,file={tmp_path / 'keys'}" in line
    assert "name=opt/gpuinfra/hostname,string=lab-hv1" in line
    # The guest's SSH host key comes from this side: the lab never learns it over the network.
    assert f"name=opt/gpuinfra/ssh_host_ed25519_key,file={tmp_path / qemu.HOST_KEY}" in line
    assert line.endswith(" ".join(profiles.HV_MACHINE.devices))
    assert "segment" not in line


def test_a_segment_joins_two_guests_over_loopback(tmp_path: Path):
    machine = GuestMachine(segment="rdma", cpus=1)

    class Plan(HostPlan):
        @property
        def machine(self):  # a guest profile not in the table (the next issue's kind)
            return machine

    plans = [Plan("lab-rdma1", ("workers",), "x"), Plan("lab-rdma2", ("workers",), "x")]
    places = qemu.segment_places(plans, {"rdma": 41000})
    first, second = places["lab-rdma1"], places["lab-rdma2"]
    assert first.listen and not second.listen and first.port == second.port == 41000
    assert (first.address, second.address) == ("10.77.0.1/24", "10.77.0.2/24")
    assert first.mac != second.mac
    cmd = " ".join(qemu.qemu_command(plans[1], machine, tmp_path, 40023, "tcg", "id", tmp_path,
                                     second))
    assert "-netdev socket,id=segment,connect=127.0.0.1:41000" in cmd
    assert f"name=opt/gpuinfra/segment,string=10.77.0.2/24 {second.mac}" in cmd
    with pytest.raises(state.LabError, match="a socket segment joins two"):
        qemu.segment_places([*plans, Plan("lab-rdma3", ("workers",), "x")], {"rdma": 41000})


def test_machine_key_changes_with_the_machine_only():
    key = qemu.machine_key(profiles.HV_MACHINE)
    assert key == qemu.machine_key(profiles.PROFILES["hv-standins-group-split"].machine)
    assert key != qemu.machine_key(replace(profiles.HV_MACHINE, memory_mib=2048))


def test_the_disk_gets_one_bootable_linux_partition_from_1_mib():
    table = vmimage.mbr(4 * 1024**3)
    status, _, kind, _, start, sectors = struct.unpack("<B3sB3sII", table[:16])
    assert (status, kind, start) == (0x80, 0x83, 2048)
    assert start + sectors == 4 * 1024**3 // 512
    assert table[-2:] == b"\x55\xaa" and len(table) == 66  # 4 entries + signature


def test_the_vm_image_key_follows_its_recipe():
    assert vmimage.image_key("tag:a", b"x") == vmimage.image_key("tag:a", b"x")
    assert vmimage.image_key("tag:a", b"x") != vmimage.image_key("tag:b", b"x")
    assert vmimage.image_key("tag:a", b"x") != vmimage.image_key("tag:a", b"y")
    assert vmimage.CACHE == Path("/var/cache/gpuinfra-lab")  # outside the checkout: shared


def test_inventory_and_ssh_config_reach_a_guest_through_its_port(tmp_path: Path):
    hosts = [{"name": "lab-head", "address": "10.89.0.10", "groups": ["head"], "profile": None},
             {"name": "lab-hv1", "address": "127.0.0.1", "port": 40022,
              "groups": ["hypervisors"], "profile": "hv-standins"}]
    (tmp_path / "inventory").mkdir()
    shutil.copy(REPO / "inventory" / "lab.py", tmp_path / "inventory" / "lab.py")
    (tmp_path / ".lab").mkdir()
    known = tmp_path / ".lab" / "known_hosts"
    doc = state.hosts_document(hosts, Path("/k"), "img", "net", known)
    (tmp_path / ".lab" / "hosts.json").write_text(json.dumps(doc))
    groups = runpy.run_path(str(tmp_path / "inventory" / "lab.py"))
    name, data = groups["hypervisors"][0]
    assert name == "lab-hv1" and data["ssh_port"] == 40022
    assert data["ssh_hostname"] == "127.0.0.1"
    assert (data["ssh_known_hosts_file"], data["ssh_strict_host_key_checking"]) == \
        (str(known), "yes")
    assert data["vfio_devices"] == profiles.HV_SPEC["vfio_devices"]
    assert "ssh_port" not in groups["head"][0][1]
    text = state.ssh_config_text(hosts, Path("/k"), known)
    assert "Host lab-hv1\n    HostName 127.0.0.1\n    Port 40022\n" in text


def test_a_guest_host_key_is_made_here_private_and_trusted_under_its_port(tmp_path: Path):
    key = tmp_path / qemu.HOST_KEY
    line = state.ensure_ed25519(key, "lab-hv1")
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert key.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert line.startswith("ssh-ed25519 ") and line == state.ensure_ed25519(key, "x")  # kept
    assert qemu.host_public_key(tmp_path) == line.strip()
    kind, blob = line.split()[:2]
    # ssh, paramiko and pyinfra look a non-22 port up as [address]:port.
    assert state.known_hosts_text({"lab-hv1": ("[127.0.0.1]:40022", [line])}) == \
        f"lab-hv1,[127.0.0.1]:40022 {kind} {blob}\n"


def test_the_segment_nic_has_a_fixed_slot_so_its_name_is_known():
    from gpuinfra_lab.profiles import RDMA_SPEC, SEGMENT_NETDEV

    plan = plan_hosts(workers=0, guests={"rdma-soft-roce": 2})
    places = qemu.segment_places(plan[1:], {"rdma": 41000})
    cmd = qemu.qemu_command(plan[1], plan[1].machine, Path("/x"), 2222, "tcg", "t",
                            Path("/k"), places["lab-rdma1"])
    assert any(part.endswith(",addr=0x10") and "netdev=segment" in part for part in cmd)
    assert SEGMENT_NETDEV == "enp0s16" and RDMA_SPEC["rdma_nics"][0]["netdev"] == "enp0s16"


def test_each_release_has_its_own_image_and_debian_12_keeps_its_tag():
    """`lab up --os debian-13` builds trixie beside bookworm: two tags from one recipe, and
    Debian 12's tag is the one it had before releases were a choice (no rebuild)."""
    from gpuinfra_lab.image import SUITES, recipe_tag

    script = b"echo customise\n"
    tags = {os_name: recipe_tag(script, os_name) for os_name in SUITES}
    assert SUITES == {"debian-12": "bookworm", "debian-13": "trixie"}
    assert len(set(tags.values())) == 2
    import hashlib
    import json

    from gpuinfra_lab.image import MIRROR, PACKAGES, VARIANT
    before = json.dumps(["bookworm", MIRROR, VARIANT, sorted(PACKAGES)]).encode() + script
    assert tags["debian-12"].endswith(hashlib.sha256(before).hexdigest()[:12])


def test_dropping_old_images_keeps_every_releases_current_one():
    from gpuinfra_lab.image import IMAGE_REPO, drop_old_images, recipe_tag

    script = b"echo customise\n"
    bookworm, trixie = recipe_tag(script, "debian-12"), recipe_tag(script, "debian-13")
    old = f"{IMAGE_REPO}:000000000000"
    removed = []

    class Podman:
        def run(self, *args, check=True):
            if args[0] == "images":
                return "\n".join([bookworm, trixie, old])
            removed.append(args[1])
            return ""

    drop_old_images(Podman(), trixie, script)
    assert removed == [old]


def test_lab_up_without_os_keeps_the_running_labs_release(tmp_path):
    """A proof that runs `lab up --workers 3` on a trixie lab adds a trixie worker."""
    import json

    from gpuinfra_cli.lab import running_release

    class Paths:
        hosts_json = tmp_path / "hosts.json"

    assert running_release(Paths) is None  # no lab: the default
    Paths.hosts_json.write_text(json.dumps({"hosts": [{"name": "lab-head", "os": "debian-13"},
                                                      {"name": "lab-worker1", "os": "debian-13"}]}))
    assert running_release(Paths) == "debian-13"
    Paths.hosts_json.write_text(json.dumps({"hosts": [{"name": "lab-head"}]}))  # before --os
    assert running_release(Paths) is None
