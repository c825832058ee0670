"""The lab without podman: host plans, inventory/lab.py, hardware profiles, nvidia-smi stand-in."""

from __future__ import annotations

import io
import json
import os
import runpy
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gpuinfra_cli import lab as lab_cli
from gpuinfra_lab import image, podman, profiles, provision, qemu, replay, state
from gpuinfra_lab.profiles import HostPlan, plan_hosts
from tests.conftest import REAL, REPO

HARDWARE = REPO / "gpuinfra_lab" / "hardware"
STAND_IN = REPO / "gpuinfra_lab" / "nvidia-smi"
ALL_PROFILES = sorted(profiles.replayed())  # the container workers


def load_inventory(tmp_path: Path, hosts_json: dict | None) -> dict[str, list]:
    """Run a copy of inventory/lab.py beside a .lab/hosts.json of our own (or none)."""
    (tmp_path / "inventory").mkdir()
    shutil.copy(REPO / "inventory" / "lab.py", tmp_path / "inventory" / "lab.py")
    if hosts_json is not None:
        (tmp_path / ".lab").mkdir()
        (tmp_path / ".lab" / "hosts.json").write_text(json.dumps(hosts_json))
    namespace = runpy.run_path(str(tmp_path / "inventory" / "lab.py"))
    return {k: v for k, v in namespace.items() if isinstance(v, list) and not k.startswith("_")}


def written_hosts(plan: list[HostPlan]) -> dict:
    """hosts.json as `lab up` writes it for ``plan``."""
    hosts = [
        {"name": h.name, "address": f"10.89.0.{i + 2}", "groups": list(h.groups),
         "profile": h.profile}
        for i, h in enumerate(plan)
    ]  # fmt: skip
    return state.hosts_document(hosts, Path("/lab/ssh/id_ed25519"), "localhost/gpuinfra-lab:x",
                                "gpuinfra-lab-0", Path("/lab/known_hosts"))


def smi(profile: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUINFRA_LAB_HARDWARE": str(HARDWARE / profile)}
    return subprocess.run([sys.executable, str(STAND_IN), *args], capture_output=True, env=env)


# --- plans --------------------------------------------------------------------------------------


def test_default_plan_is_head_and_two_workers() -> None:
    plan = plan_hosts()
    assert [(h.name, h.groups, h.profile) for h in plan] == [
        ("lab-head", ("head",), None),
        ("lab-worker1", ("workers",), "8x-h100-sxm-nvswitch"),
        ("lab-worker2", ("workers",), "2x-h100-pcie-bridged"),
    ]


def test_broken_worker_comes_after_the_healthy_ones() -> None:
    plan = plan_hosts(workers=3, broken=True)
    assert [h.name for h in plan][-2:] == ["lab-worker3", "lab-worker4"]
    assert plan[3].profile == "8x-h100-sxm-nvswitch"  # profiles cycle
    assert plan[4].profile == profiles.BROKEN_PROFILE


def test_image_tag_follows_the_recipe() -> None:
    assert image.recipe_tag(b"a") == image.recipe_tag(b"a")
    assert image.recipe_tag(b"a") != image.recipe_tag(b"b")
    assert image.recipe_tag(b"a").startswith("localhost/gpuinfra-lab:")


def test_fixed_addresses_per_host() -> None:
    assert profiles.host_address("10.89.0.0/24", "lab-head") == "10.89.0.10"
    assert profiles.host_address("10.89.0.0/24", "lab-worker3") == "10.89.0.13"
    last = f"lab-worker{profiles.MAX_WORKERS + 1}"
    assert profiles.host_address("10.89.1.0/24", last) == "10.89.1.27"


def test_ssh_config_names_every_host() -> None:
    hosts = written_hosts(plan_hosts())["hosts"]
    text = state.ssh_config_text(hosts, Path("/k"), Path("/lab/known_hosts"))
    assert "Host lab-worker2\n    HostName 10.89.0.4\n" in text
    assert "IdentityFile /k" in text and "UserKnownHostsFile /lab/known_hosts" in text
    assert "StrictHostKeyChecking yes" in text


def test_known_hosts_names_each_host_by_name_and_address() -> None:
    text = state.known_hosts_text({"lab-head": ("10.89.0.2", ["ssh-ed25519 AAAAC3 root@x",
                                                              "ecdsa-sha2-nistp256 AAAAE2"])})
    assert text == ("lab-head,10.89.0.2 ssh-ed25519 AAAAC3\n"
                    "lab-head,10.89.0.2 ecdsa-sha2-nistp256 AAAAE2\n")


# --- inventory/lab.py ---------------------------------------------------------------------------


def test_inventory_without_a_lab_lists_the_default_specs(tmp_path: Path) -> None:
    groups = load_inventory(tmp_path, None)
    assert set(groups) == {"head", "workers", "hypervisors", "slurm_backup", "login"}
    assert groups["slurm_backup"] == groups["login"] == []  # `lab up --backup`, `--login`
    # Each container at the address `lab up` gives it in this checkout's fixed subnet.
    subnet = state.Paths(tmp_path).subnet
    # Every host carries the lab's fabric (a cluster-wide key): the two workers on two leaves.
    fabric = {"fabric_switches": {"leaf1": ["lab-worker1"], "leaf2": ["lab-worker2"],
                                  "spine": ["leaf1", "leaf2"]}}
    assert groups["head"] == [("lab-head", {"node_address": profiles.host_address(subnet,
                                                                                  "lab-head"),
                                            **fabric})]
    assert groups["hypervisors"] == []  # guests only with `lab up --vm`
    expected = {"lab_expected_failures": dict(profiles.NO_NVIDIA_MODULE), **fabric}
    address = {f"lab-worker{i}": profiles.host_address(subnet, f"lab-worker{i}") for i in (1, 2)}
    assert groups["workers"] == [
        ("lab-worker1", {"node_address": address["lab-worker1"], "gpu_model": "H100-SXM5-80GB",
                         "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all", **expected}),
        ("lab-worker2", {"node_address": address["lab-worker2"],
                         "gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
                         "gpu_topology": "bridged-pairs",
                         "gpu_sharing": {"mode": "mps", "clients": 4, "thread_percentage": 50,
                                         "pinned_mem_limit": "8G"}, **expected}),
    ]  # fmt: skip


def test_inventory_reads_the_running_lab(tmp_path: Path) -> None:
    groups = load_inventory(tmp_path, written_hosts(plan_hosts(broken=True)))
    names = [n for n, _ in groups["workers"]]
    assert names == ["lab-worker1", "lab-worker2", "lab-worker3"]
    name, data = groups["workers"][2]
    assert data["gpu_model"] == "A100-PCIE-40GB" and data["gpu_topology"] == "bridged-pairs"
    assert data["ssh_hostname"] == "10.89.0.5" and data["ssh_user"] == "root"
    assert data["ssh_key"] == "/lab/ssh/id_ed25519"
    assert data["ssh_known_hosts_file"] == "/lab/known_hosts"  # written by `lab up`
    assert data["ssh_strict_host_key_checking"] == "yes"
    assert groups["head"][0][1]["ssh_hostname"] == "10.89.0.2"


def test_inventory_omits_hosts_the_lab_does_not_run(tmp_path: Path) -> None:
    groups = load_inventory(tmp_path, written_hosts(plan_hosts(workers=1)))
    assert [n for n, _ in groups["workers"]] == ["lab-worker1"]


def test_every_lab_profile_has_a_spec_and_a_folder(tmp_path: Path) -> None:
    specs = {name: p.spec for name, p in profiles.PROFILES.items()}
    assert {*profiles.WORKER_PROFILES, profiles.BROKEN_PROFILE, *profiles.REPLAY_ONLY} == \
        set(ALL_PROFILES)
    assert {p.name for p in HARDWARE.iterdir()} == set(ALL_PROFILES)
    for name in ALL_PROFILES:
        manifest = json.loads((HARDWARE / name / "manifest.json").read_text())
        assert manifest["gpu_count"] == specs[name]["gpu_count"]
        assert manifest["gpu_model"] == specs[name]["gpu_model"]


# --- hardware profiles --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_PROFILES)
def test_committed_profile_matches_its_builder(name: str) -> None:
    built = profiles.build(name)
    committed = {p.name: p.read_text() for p in (HARDWARE / name).iterdir()}
    assert committed == built, "run: .venv/bin/python -m gpuinfra_lab.profiles"


@pytest.mark.parametrize("name", ALL_PROFILES)
def test_copied_files_are_byte_identical_to_the_captures(name: str) -> None:
    manifest = json.loads((HARDWARE / name / "manifest.json").read_text())
    sources = manifest["sources"]
    copies = {f: s.split()[2] for f, s in sources.items() if s.startswith("copy of ")}
    assert copies or "base" in manifest  # a variant's captures are its base's
    for filename, capture in copies.items():
        assert (HARDWARE / name / filename).read_bytes() == (REPO / capture).read_bytes()


VARIANTS = [n for n in ALL_PROFILES
            if "base" in json.loads((HARDWARE / n / "manifest.json").read_text())]


def test_the_broken_mig_profile_is_the_variant_of_the_healthy_one() -> None:
    assert VARIANTS == ["2x-a100-sxm4-mig-gpu1-differs"]
    manifest = json.loads((HARDWARE / VARIANTS[0] / "manifest.json").read_text())
    assert manifest["base"] == "2x-a100-sxm4-mig-balanced"


@pytest.mark.parametrize("name", VARIANTS)
def test_a_variant_holds_only_what_differs_from_its_base(name: str, tmp_path: Path) -> None:
    """A broken variant keeps one copy of nothing: each of its files differs from its base's,
    the rest (gpus.json) is read from the base's folder, and `lab up` would install the two as
    one folder."""
    base = json.loads((HARDWARE / name / "manifest.json").read_text())["base"]
    assert base in ALL_PROFILES and base != name
    own = {p.name: p.read_bytes() for p in (HARDWARE / name).iterdir()}
    assert "gpus.json" not in own
    assert [f for f, data in own.items() if (HARDWARE / base / f).is_file()
            and (HARDWARE / base / f).read_bytes() == data] == []
    files = replay.profile_files(HARDWARE, name)
    assert files["gpus.json"] == HARDWARE / base / "gpus.json"
    assert {f for f, path in files.items() if path.parent.name == name} == set(own)
    query = ("--query-gpu=index,uuid,mig.mode.current,mig.mode.pending", "--format=csv")
    assert smi(name, *query).returncode == 0
    assert smi(name, *query).stdout == smi(base, *query).stdout
    # installed by `lab up` (gpuinfra_lab/provision.py): one folder, the base's files and its own
    tar = provision.guest_tar(state.Paths(REPO), HostPlan("w", ("workers",), name), "key")
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(tmp_path, filter="data")
    installed = tmp_path / provision.GUEST_HARDWARE
    assert {p.name: p.read_bytes() for p in installed.iterdir()} == \
        {f: path.read_bytes() for f, path in files.items()}
    env = {**os.environ, "GPUINFRA_LAB_HARDWARE": str(installed)}
    alone = subprocess.run([sys.executable, str(STAND_IN), *query], capture_output=True, env=env)
    assert alone.stdout == smi(name, *query).stdout


@pytest.mark.parametrize("name", ALL_PROFILES)
def test_device_nodes(name: str) -> None:
    manifest = json.loads((HARDWARE / name / "manifest.json").read_text())
    nodes = {n["path"]: (n["major"], n["minor"]) for n in manifest["device_nodes"]}
    count = manifest["gpu_count"]
    assert {nodes[f"/dev/nvidia{i}"] for i in range(count)} == {(195, i) for i in range(count)}
    assert nodes["/dev/nvidiactl"] == (195, 255)
    assert nodes["/dev/nvidia-uvm"] == (511, 0)
    assert len(nodes) == count + 3


def test_p2p_layout_reproduces_a_capture() -> None:
    capture = (REAL / "nvidia-smi-topo-p2p" / "8x-h100-80gb-hbm3-p2p-r-all-OK.txt").read_text()
    assert replay.p2p_matrix(replay.uniform_p2p_cells(8, "OK"), capture) == capture


def test_8x_h100_nvlink_covers_every_gpu_with_its_uuid() -> None:
    text = (HARDWARE / "8x-h100-sxm-nvswitch" / "nvlink-s.txt").read_text()
    gpus = json.loads((HARDWARE / "8x-h100-sxm-nvswitch" / "gpus.json").read_text())
    assert replay.parse_gpu_lines(text) == [(g["name"], g["uuid"]) for g in gpus]
    assert text.count("26.562 GB/s") == 8 * 18


# --- the nvidia-smi stand-in --------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_PROFILES)
def test_stand_in_replays_every_capture_byte_for_byte(name: str) -> None:
    replay = json.loads((HARDWARE / name / "manifest.json").read_text())["replay"]
    for command, filename in replay.items():
        out = smi(name, *command.split())
        assert out.returncode == 0, command
        assert out.stdout == (HARDWARE / name / filename).read_bytes(), command


def test_stand_in_accepts_the_long_spellings() -> None:
    topo = (HARDWARE / "8x-h100-sxm-nvswitch" / "topo-m.txt").read_bytes()
    assert smi("8x-h100-sxm-nvswitch", "topo", "--matrix").stdout == topo
    listing = smi("8x-h100-sxm-nvswitch", "--list-gpus").stdout
    assert listing == smi("8x-h100-sxm-nvswitch", "-L").stdout


def test_stand_in_query_gpu_reproduces_the_a100_capture() -> None:
    capture = "hpe-dl380-gen11-2x-a100-pcie-40gb-name-busid-vbios-temp-util-mem-clocks.txt"
    fields = (
        "gpu_name gpu_bus_id vbios_version temperature.gpu utilization.gpu memory.total "
        "memory.free memory.used clocks.applications.graphics clocks.applications.memory"
    )
    out = smi("2x-a100-pcie-bridge-missing", "--query-gpu", *fields.split(), "--format", "csv")
    assert out.stdout == (REAL / "nvidia-smi-query-gpu" / capture).read_bytes()


def test_stand_in_query_gpu_formats() -> None:
    out = smi("8x-h100-sxm-nvswitch", "-i", "7", "--query-gpu=index,memory.total,count",
              "--format=csv,noheader,nounits")  # fmt: skip
    assert out.stdout == b"7, 81559, 8\n"
    out = smi("2x-h100-pcie-bridged", "--query-gpu=name,pci.bus_id,driver_version",
              "--format=csv")  # fmt: skip
    assert out.stdout.decode().splitlines() == [
        "name, pci.bus_id, driver_version",
        "NVIDIA H100 PCIe, 00000000:C2:00.0, 535.161.08",
        "NVIDIA H100 PCIe, 00000000:D5:00.0, 535.161.08",
    ]


def test_stand_in_nvlink_for_one_gpu() -> None:
    out = smi("2x-h100-pcie-bridged", "nvlink", "-s", "-i", "1").stdout.decode()
    assert out.startswith("GPU 1: NVIDIA H100 PCIe (UUID: GPU-9b1446e2")
    assert out.count("Link ") == 18


@pytest.mark.parametrize(
    "args",
    [(), ("--bogus",), ("topo", "-p2p", "x"), ("topo", "-p2p", "n"), ("-q", "-d", "CLOCK"),
     ("--query-gpu=name",), ("--query-gpu=compute_cap", "--format=csv"),
     ("nvlink", "-s", "-i", "9")],
)  # fmt: skip
def test_stand_in_fails_like_the_real_tool(args: tuple[str, ...]) -> None:
    out = smi("8x-h100-sxm-nvswitch", *args)
    assert out.returncode == 6
    assert out.stdout == b""
    assert out.stderr.startswith(b"nvidia-smi (gpuinfra lab replay): ")


# --- the command line ---------------------------------------------------------------------------


def test_lab_parser() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    lab_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["lab", "up", "--workers", "3", "--broken"])
    assert (args.workers, args.broken, args.func) == (3, True, lab_cli.cmd_up)
    assert parser.parse_args(["lab", "down"]).func == lab_cli.cmd_down
    assert parser.parse_args(["lab", "status"]).func == lab_cli.cmd_status


def test_bad_worker_count_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert lab_cli.main(["up", "--workers", "-1"]) == 1
    assert capsys.readouterr().err == "gpuinfra lab: --workers must be between 0 and 16\n"


def test_each_checkout_has_its_own_lab(tmp_path: Path) -> None:
    """Two checkouts on one machine never touch each other's lab: containers, network and the
    podman filters carry the checkout's id."""
    one, two = state.Paths(tmp_path / "a"), state.Paths(tmp_path / "b")
    assert one.lab_id != two.lab_id and len(one.lab_id) == 8
    assert one.network == f"gpuinfra-lab-{one.lab_id}" != two.network
    assert podman.Podman(one).container("lab-head") == f"lab-head-{one.lab_id}"
    labels = podman.wanted_labels(plan_hosts()[1], "img", "10.0.0.1", one.lab_id)
    assert labels["gpuinfra.lab.id"] == one.lab_id and labels["gpuinfra.lab.host"] == "lab-worker1"


def test_host_tools_never_remove_a_package_of_the_machine() -> None:
    """`lab up` installs podman with apt-get: a dry run that would remove a package (Docker
    CE's containerd.io, say) stops it with the names, and the real run has --no-remove."""
    simulation = ("NOTE: This is only a simulation!\n"
                  "Remv containerd.io [1.7.27-1] [docker-ce ]\n"
                  "Remv docker-ce [5:28.3.2-1~debian.12~bookworm]\n"
                  "Inst runc (1.1.5+ds1-1+deb12u1 Debian:12.12/stable [amd64])\n"
                  "Conf runc (1.1.5+ds1-1+deb12u1 Debian:12.12/stable [amd64])\n")
    assert podman.would_remove(simulation) == ["containerd.io", "docker-ce"]
    assert podman.would_remove(simulation.replace("Remv", "Inst")) == []
    assert '"--no-remove"' in Path(podman.__file__).read_text()


def test_guests_have_a_cluster_address_each(tmp_path: Path) -> None:
    """The gate needs every host's address (monitoring is on in the lab): a guest's is its
    segment address (guest N: host N of the subnet, as qemu.segment_places gives it), else
    the one QEMU's user-mode DHCP gives it (dhcpstart 10.0.2.(14+N), on its command line)."""
    plan = plan_hosts(1, guests={"hv-standins": 2, "rdma-soft-roce": 2})
    groups = load_inventory(tmp_path, written_hosts(plan))
    address = {n: d["node_address"] for g in ("workers", "hypervisors") for n, d in groups[g]
               if n.startswith(("lab-hv", "lab-rdma"))}
    assert address == {"lab-hv1": "10.0.2.15", "lab-hv2": "10.0.2.16",
                       "lab-rdma1": "10.77.0.1", "lab-rdma2": "10.77.0.2"}
    hv2 = next(p for p in plan if p.name == "lab-hv2")
    command = qemu.qemu_command(hv2, hv2.machine, tmp_path, 2222, "tcg", "id", tmp_path / "k")
    assert "user,id=mgmt,dhcpstart=10.0.2.16,hostfwd=tcp:127.0.0.1:2222-:22" in command
