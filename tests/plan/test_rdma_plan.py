"""Plan tests of the `rdma` role on recorded facts: Debian 12, Ubuntu 22.04 and 24.04, the
inbox stack and DOCA-OFED, a GPU node with a PCIe switch between its GPUs and its NIC, and a
Soft-RoCE lab guest. A converged host plans nothing.

Fixture layers (tests/plan/facts/): base-fresh, <distro>, rdma-gpu-node-SYNTHESIZED (the PCI
tree; see its comment); the NIC's firmware is the real ConnectX-5 query (ATS off).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from pyinfra.api.exceptions import PyinfraError

from gpuinfra import reboot
from gpuinfra.apt.files import flat_repo_list, origin_preference
from gpuinfra.knowledge.repositories import DOCA_URL
from gpuinfra.parsers.mlxconfig import parse_mlxconfig
from gpuinfra.rdma.node import (
    ACS_SCRIPT,
    ACS_UNIT,
    MODULES_LOAD,
    RXE_SCRIPT,
    RXE_UNIT,
    acs_script,
    acs_unit,
    peermem_modules_load,
    rxe_script,
    rxe_unit,
)
from gpuinfra.spec.model import RdmaNic
from gpuinfra.vfio import GRUB_DROPIN, RDMA_WHY, grub_dropin
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_roles.rdma import (
    DISTRO,
    DOCA_KEYRING,
    DOCA_LIST,
    DOCA_PIN,
    DOCA_PRIORITY,
    rdma,
)
from tests.conftest import REPO
from tests.plan.harness import (
    KEYRING_KEYS,
    FakeHost,
    load_facts,
    pinned_keyrings,
    plan_cluster,
    upload_text,
)

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
HOST = "gpu1"
CX5 = (REPO / "tests/fixtures/real/mlxconfig"
       / "connectx5-mcx555a-edr-ib-mlxconfig-q-full-bluebanquise.txt")
NIC = {"name": "mlx5_0", "pci": "0000:04:00.0", "link_layer": "infiniband", "rate_gbps": 400,
       "model": "ConnectX-7"}
GPU_NODE = {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "pcie-only",
            "rdma_nics": [NIC]}
FINGERPRINT = "0" * 24 + "A024F6F0E6D6A281"
DOCA = {"rdma_stack": "doca-ofed", "rdma_doca_key_fingerprint": FINGERPRINT}
BRIDGES = ["0000:02:00.0", "0000:02:01.0", "0000:02:02.0"]
RXE = RdmaNic("rxe0", None, False, "ethernet", 2.5, "soft-roce", 1, "enp0s3")
LAB_GUEST = {"soft_roce": True, "rdma_nics": [{"name": "rxe0", "netdev": "enp0s3",
                                               "rate_gbps": 2.5, "gid_index": 1}]}
STAMP = {"mode": 644, "size": 0, "user": "root", "group": "root",
         "mtime": {"__datetime__": "2026-11-22T03:30:00"}}


def firmware(ats_next_boot: bool, ats_current: bool | None = None) -> dict:
    query = parse_mlxconfig(CX5.read_text()).to_json()
    query["params"]["ATS_ENABLED"].update(value=ats_next_boot, current=ats_current)
    return query


def doca_url_of(distro: str) -> str:
    return f"{DOCA_URL}/2.9.1/{DISTRO[distro]['doca_dir']}/x86_64"


def fresh(distro: str) -> dict:
    facts = load_facts("base-fresh", distro, "rdma-gpu-node-SYNTHESIZED")
    facts["gpuinfra_roles.rdma.facts.FirmwareAts"] = {"pci=0000:04:00.0": firmware(False)}
    return facts


def converged(distro: str, stack: str, rendered: dict[str, str]) -> dict:
    facts = fresh(distro)
    from datetime import datetime
    facts["files.File"] = {**facts["files.File"], "path=/var/lib/apt/periodic/update-success-"
                           "stamp": {**STAMP, "mtime": datetime.fromisoformat(
                               STAMP["mtime"]["__datetime__"])}}
    facts["files.Directory"] = {**facts["files.Directory"],
                                "path=/etc/default/grub.d": {"mode": 755}}
    if stack == "doca-ofed":
        meta = {"mode": 644, "user": "root", "group": "root"}
        facts["files.File"][f"path={DOCA_KEYRING}"] = meta
        facts[KEYRING_KEYS] = pinned_keyrings({DOCA_KEYRING: FINGERPRINT})
        put = {DOCA_LIST: file_text(flat_repo_list(doca_url_of(distro), DOCA_KEYRING)),
               DOCA_PIN: file_text(origin_preference(doca_url_of(distro), DOCA_PRIORITY))}
        facts["files.File"].update({f"path={p}": meta for p in put})
        facts["files.Directory"].update({f"path={p.rsplit('/', 1)[0]}": {
            "mode": 755, "user": "root", "group": "root"} for p in put})
        facts["files.Sha1File"] = {"*": None, **{f"path={p}": hashlib.sha1(
            t.encode()).hexdigest() for p, t in put.items()}}
    packages = DISTRO[distro]["doca" if stack == "doca-ofed" else "inbox"]
    facts["deb.DebPackages"] = {**facts["deb.DebPackages"], **{p: ["1"] for p in packages}}
    facts["gpuinfra_roles.rdma.facts.FirmwareAts"] = {"pci=0000:04:00.0": firmware(True, True)}
    facts["files.Sha256File"] = {"*": None, **{f"path={path}": hashlib.sha256(
        text.encode()).hexdigest() for path, text in rendered.items()}}
    units = {"gpuinfra-acs-off.service": True, "gpuinfra-soft-roce.service": True}
    facts["systemd.SystemdStatus"] = {"*": units}
    facts["systemd.SystemdEnabled"] = {"*": units}
    facts["gpuinfra_deploy.facts.kernel.LoadedModules"] = {
        "modules": {"nvidia": {}, "nvidia_peermem": {}}}
    return facts


def run(facts: dict, node: dict | None = None, **site: Any):
    hosts = [FakeHost(HOST, ("workers",), facts, dict(node or GPU_NODE))]
    return plan_cluster(rdma, hosts, HOST, {"schedulers": [], **site})


def uploaded(result, words: str) -> str:
    op = result.op(words)
    uploads = [c for c in op.raw if type(c).__name__ == "FileUploadCommand"]
    assert len(uploads) == 1, op
    return upload_text(uploads[0].src)


def gpu_node_files(stack: str) -> dict[str, str]:
    files = {GRUB_DROPIN: file_text(grub_dropin(("iommu=pt",), RDMA_WHY)),
             ACS_SCRIPT: file_text(acs_script(BRIDGES)),
             ACS_UNIT: file_text(acs_unit())}
    if stack == "doca-ofed":
        files[MODULES_LOAD] = file_text(peermem_modules_load())
    return files


# ----------------------------------------------------------------------------- fresh GPU node

@pytest.mark.parametrize("distro", DISTROS)
def test_inbox_stack_on_a_fresh_gpu_node(distro):
    result = run(fresh(distro))
    install = result.op("Install the RDMA stack (inbox)").commands[-1]
    for package in ("rdma-core", "ibverbs-utils", "infiniband-diags", "perftest", "mstflint"):
        assert package in install
    assert "doca-ofed" not in install
    assert result.op(f"No DOCA-OFED repository ({DOCA_LIST})").commands == ()
    # one kernel-argument mechanism with vfio: the same drop-in, iommu=pt only
    assert 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt"' in \
        uploaded(result, "Kernel arguments for GRUB")
    assert result.op("mlx5_0: ATS_ENABLED=True").commands == \
        ("mstconfig -y -d 0000:04:00.0 set ATS_ENABLED=1",)
    marker = " ".join(result.op("Record that a reboot is needed: ATS_ENABLED").commands)
    assert reboot.ATS_CHANGED in marker
    # the closed modules with the inbox stack: no GPUDirect path, nvidia-peermem not persisted
    assert result.op("nvidia-peermem not loaded at boot").commands == ()


@pytest.mark.parametrize("distro", DISTROS)
def test_acs_goes_off_only_on_the_switch_ports_of_the_gpu_nic_paths(distro):
    result = run(fresh(distro))
    script = uploaded(result, "ACS off on the GPU-NIC bridges: " + ", ".join(BRIDGES)
                      + " (script)")
    assert script == file_text(acs_script(BRIDGES))
    assert "0000:00:01.0" not in script and "0000:01:00.0" not in script  # root, upstream
    assert "systemd-analyze verify" in " ".join(result.op("(unit)").commands)
    assert "systemctl enable gpuinfra-acs-off.service" in \
        " ".join(result.op("Enable gpuinfra-acs-off.service").commands)


@pytest.mark.parametrize("distro", DISTROS)
def test_doca_ofed_stack_pinned_never_with_the_inbox(distro):
    result = run(fresh(distro), **DOCA)
    url = f"https://linux.mellanox.com/public/repo/doca/2.9.1/{DISTRO[distro]['doca_dir']}/x86_64"
    assert f"{url}/ /" in uploaded(result, "Add DOCA-OFED's repository")
    assert "Pin-Priority: 600" in uploaded(result, "DOCA-OFED's packages replace")
    key = " ".join(result.op("Add DOCA-OFED's signing key").commands)
    assert FINGERPRINT in key and "GPG-KEY-Mellanox.pub" in key
    install = result.op("Install the RDMA stack (doca-ofed)").commands[-1]
    assert "doca-ofed" in install and "rdma-core" not in install
    assert uploaded(result, "nvidia-peermem loaded at boot") == file_text(peermem_modules_load())
    assert result.op("Load nvidia-peermem now").commands == ("modprobe nvidia-peermem",)


def test_doca_mirror_replaces_nvidias_url():
    result = run(fresh("ubuntu-22.04"), **DOCA, rdma_doca_mirror="http://mirror.example/doca")
    assert "http://mirror.example/doca/2.9.1/ubuntu22.04/x86_64/ /" in \
        uploaded(result, "Add DOCA-OFED's repository")


def test_open_modules_on_the_inbox_stack_use_dma_buf():
    result = run(fresh("ubuntu-24.04"), {**GPU_NODE, "nvidia_driver_open_modules": True})
    assert result.op("nvidia-peermem not loaded at boot").commands == ()
    assert not [op for op in result.ops if "Load nvidia-peermem" in op.name]


def test_next_boot_set_but_not_rebooted_is_not_set_again():
    facts = fresh("debian-12")
    facts["gpuinfra_roles.rdma.facts.FirmwareAts"] = {"pci=0000:04:00.0": firmware(True, False)}
    assert run(facts).op("mlx5_0: ATS_ENABLED=True").commands == ()


def test_firmware_without_ats_enabled_stops_the_host():
    from pyinfra.api import OperationError

    facts = fresh("debian-12")
    query = firmware(False)
    del query["params"]["ATS_ENABLED"]
    facts["gpuinfra_roles.rdma.facts.FirmwareAts"] = {"pci=0000:04:00.0": query}
    with pytest.raises(OperationError, match="set ats=False"):
        run(facts)


# ----------------------------------------------------------------------------- converged

@pytest.mark.parametrize("distro", DISTROS)
@pytest.mark.parametrize("stack", ["inbox", "doca-ofed"])
def test_converged_gpu_node_plans_nothing(distro, stack):
    site = DOCA if stack == "doca-ofed" else {}
    result = run(converged(distro, stack, gpu_node_files(stack)), **site)
    assert result.changing == [], result.changing


# ----------------------------------------------------------------------------- Soft-RoCE (lab)

@pytest.mark.parametrize("distro", DISTROS)
def test_soft_roce_guest_gets_rxe_at_boot_and_no_firmware_or_iommu(distro):
    facts = fresh(distro)
    result = run(facts, LAB_GUEST)
    assert uploaded(result, "Soft-RoCE devices: rxe0 on enp0s3 (script)") \
        == file_text(rxe_script([RXE]))
    assert uploaded(result, "Soft-RoCE devices: rxe0 on enp0s3 (unit)") \
        == file_text(rxe_unit([RXE]))
    names = " ".join(op.name for op in result.ops)
    assert "ATS_ENABLED" not in names and "IOMMU" not in names and "ACS" not in names


def test_converged_soft_roce_guest_plans_nothing():
    files = {RXE_SCRIPT: file_text(rxe_script([RXE])), RXE_UNIT: file_text(rxe_unit([RXE]))}
    result = run(converged("debian-12", "inbox", files), LAB_GUEST)
    assert result.changing == [], result.changing


def test_a_hypervisor_keeping_acs_is_accepted_and_gets_no_acs_unit():
    """Issue 23, finding 11: ACS clearing and VFIO on one node are refused by the gate
    (tests/unit/test_spec_rdma.py); with rdma_acs_disable = False the node is accepted and
    the rdma role removes an ACS unit an earlier deploy left (ACS is back at the next boot,
    which the vfio role waits for)."""
    node = {**GPU_NODE, "gpu_count": 1, "vfio_devices": ["0000:03:00.0"],
            "rdma_acs_disable": False}
    facts = fresh("debian-12")
    meta = {"mode": 644, "user": "root", "group": "root"}
    facts["files.File"] = {**facts["files.File"], f"path={ACS_UNIT}": meta,
                           f"path={ACS_SCRIPT}": {**meta, "mode": 755}}
    hosts = [FakeHost(HOST, ("hypervisors",), facts, node)]
    result = plan_cluster(rdma, hosts, HOST, {"schedulers": []})
    assert not [op for op in result.ops if "ACS off" in op.name]
    assert result.op(f"No ACS unit ({ACS_UNIT})").commands == (f"rm -f {ACS_UNIT}",)
    assert result.op(f"No ACS unit ({ACS_SCRIPT})").commands == (f"rm -f {ACS_SCRIPT}",)
    assert result.op("systemd forgets the ACS unit").commands == ("systemctl daemon-reload",)


def test_a_hypervisor_whose_rdma_role_would_clear_acs_is_refused_before_connecting():
    node = {**GPU_NODE, "gpu_count": 1, "vfio_devices": ["0000:03:00.0"]}
    hosts = [FakeHost(HOST, ("hypervisors",), fresh("debian-12"), node)]
    with pytest.raises(PyinfraError, match=r"\[gpu1\] rdma_acs_disable = True: the rdma role "
                                           "clears ACS"):
        plan_cluster(rdma, hosts, HOST, {"schedulers": []})
