"""The RDMA part of the spec: every refusal of issue 14 named by host, field, value and fix,
before any host is touched; the valid forms build typed NICs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuinfra.spec import HostInput
from gpuinfra_deploy.run.knobs import build_spec, spec_problems

NIC = {"name": "mlx5_0", "pci": "0000:17:00.0", "link_layer": "infiniband", "rate_gbps": 400,
       "model": "ConnectX-7"}
RXE = {"name": "rxe0", "netdev": "enp0s3", "rate_gbps": 2.5, "gid_index": 1}
FINGERPRINT = "0" * 24 + "A024F6F0E6D6A281"


def site(nics: list[Any] | None = None, gpu01: dict | None = None,
         everywhere: dict | None = None) -> list[HostInput]:
    worker = {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs",
              "rdma_nics": copy.deepcopy(nics if nics is not None else [NIC])}
    worker.update(gpu01 or {})
    hosts = [HostInput("head01", ("head",), {"node_address": "10.0.0.1", **(everywhere or {})}),
             HostInput("gpu01", ("workers",), {"node_address": "10.0.0.2", **worker,
                                               **(everywhere or {})})]
    return hosts


def problems(hosts: list[HostInput], field: str) -> list[str]:
    found = [e for e in spec_problems(hosts) if e.field.startswith(field)]
    for e in found:  # every refusal names the host, the value and a fix
        assert e.host and e.fix and e.allowed
    return [f"{e.host}: {e.problem}" for e in found]


def test_a_full_nic_builds():
    nic = build_spec(site()).node("gpu01").rdma_nics[0]
    assert (nic.pci, nic.ats, nic.link_layer, nic.rate_gbps, nic.model) == \
        ("0000:17:00.0", True, "infiniband", 400.0, "ConnectX-7")


def test_a_short_pci_address_gets_its_domain():
    nic = build_spec(site([{**NIC, "pci": "17:00.0"}])).node("gpu01").rdma_nics[0]
    assert nic.pci == "0000:17:00.0"


def test_soft_roce_nics_default_to_ethernet_without_ats():
    spec = build_spec(site([RXE], {"soft_roce": True}))
    node = spec.node("gpu01")
    assert node.soft_roce
    nic = node.rdma_nics[0]
    assert (nic.link_layer, nic.ats, nic.model, nic.rate_gbps, nic.netdev) == \
        ("ethernet", False, "soft-roce", 2.5, "enp0s3")


@pytest.mark.parametrize("pci", ["17:00", "0000:17:00.8", "zz:00.0", "0000:17:00.0\n", 17])
def test_malformed_pci_address_is_refused(pci):
    assert any("malformed PCI address" in p
               for p in problems(site([{**NIC, "pci": pci}]), "rdma_nics[0]['pci']"))


def test_duplicate_pci_address_is_refused():
    nics = [NIC, {**NIC, "name": "mlx5_1", "pci": "17:00.0"}]
    found = problems(site(nics), "rdma_nics")
    assert any("one PCI address for several NICs (mlx5_0, mlx5_1)" in p for p in found)


@pytest.mark.parametrize("layer, rate", [("infiniband", 25), ("infiniband", 300),
                                         ("ethernet", 56), ("infiniband", 2.5)])
def test_a_rate_the_link_layer_cannot_have_is_refused(layer, rate):
    nic = {**NIC, "link_layer": layer, "rate_gbps": rate, "model": None}
    nic = {k: v for k, v in nic.items() if v is not None}
    assert any(f"not a rate {layer}" in p
               for p in problems(site([nic]), "rdma_nics[0]['rate_gbps']"))


def test_ethernet_25g_is_a_rate_roce_can_have():
    nic = {"name": "mlx5_0", "pci": "17:00.0", "link_layer": "ethernet", "rate_gbps": 25}
    assert build_spec(site([nic])).node("gpu01").rdma_nics[0].rate_gbps == 25


def test_a_rate_above_the_model_is_refused():
    nic = {**NIC, "model": "ConnectX-6", "rate_gbps": 400}
    assert any("faster than a ConnectX-6 port (200 Gb/s)" in p
               for p in problems(site([nic]), "rdma_nics[0]['rate_gbps']"))


def test_a_soft_roce_rate_must_be_one_rxe_reports():
    found = problems(site([{**RXE, "rate_gbps": 400}], {"soft_roce": True}),
                     "rdma_nics[0]['rate_gbps']")
    assert any("not a rate a Soft-RoCE device can have" in p for p in found)


def test_ats_on_a_model_that_lacks_it_is_refused():
    found = problems(site([{**RXE, "ats": True}], {"soft_roce": True}), "rdma_nics[0]['ats']")
    assert any("ATS requested on a soft-roce" in p for p in found)


def test_a_link_layer_the_model_lacks_is_refused():
    nic = {**NIC, "model": "ConnectX-6 Dx", "rate_gbps": 200}
    assert any("has no infiniband ports" in p
               for p in problems(site([nic]), "rdma_nics[0]['link_layer']"))


def test_gid_index_on_infiniband_is_refused():
    assert any("NCCL_IB_GID_INDEX is for RoCE" in p
               for p in problems(site([{**NIC, "gid_index": 3}]), "rdma_nics[0]['gid_index']"))


def test_two_gid_indexes_on_one_host_are_refused():
    roce = {"name": "mlx5_0", "pci": "17:00.0", "link_layer": "ethernet", "gid_index": 3}
    nics = [roce, {**roce, "name": "mlx5_1", "pci": "18:00.0", "gid_index": 1}]
    assert any("different RoCE GID indexes" in p for p in problems(site(nics), "rdma_nics"))


def test_soft_roce_nic_needs_a_netdev_and_no_pci():
    hosts = site([{"name": "rxe0", "pci": "0000:00:03.0"}], {"soft_roce": True})
    assert problems(hosts, "rdma_nics[0]['pci']")
    assert problems(hosts, "rdma_nics[0]['netdev']")


def test_soft_roce_model_outside_the_lab_is_refused():
    rxe = {"name": "rxe0", "netdev": "enp0s3", "model": "soft-roce", "link_layer": "ethernet"}
    found = problems(site([rxe]), "rdma_nics[0]['model']")
    assert any("a real site never gets it" in p for p in found)


def test_soft_roce_must_be_a_bool():
    assert problems(site([RXE], {"soft_roce": "yes"}), "soft_roce")


def test_unknown_model_is_refused():
    assert problems(site([{**NIC, "model": "ConnectX-9000"}]), "rdma_nics[0]['model']")


def test_nics_on_a_hypervisor_whose_gpus_all_go_to_vms_are_refused():
    kvm = HostInput("kvm01", ("hypervisors",), {
        "vfio_devices": ["0000:3b:00.0"], "rdma_nics": [dict(NIC, pci="0000:5e:00.0")]})
    hosts = [*site(), kvm]
    found = [e for e in spec_problems(hosts) if e.host == "kvm01" and e.field == "rdma_nics"]
    assert found and "GPUs all go to VMs" in found[0].problem
    assert "vfio_devices" in found[0].fix


KEEPS_GPUS = {"node_address": "10.0.0.9", "vfio_devices": ["0000:3b:00.0"],
              "gpu_model": "H100-PCIE-80GB", "gpu_count": 1,
              "gpu_topology": "pcie-only", "rdma_nics": [dict(NIC, pci="0000:5e:00.0")]}


def test_nics_on_a_hypervisor_that_keeps_gpus_are_accepted_with_acs_kept():
    kvm = HostInput("kvm01", ("hypervisors",), {**KEEPS_GPUS, "rdma_acs_disable": False})
    assert not [e for e in spec_problems([*site(), kvm]) if e.host == "kvm01"]


def test_acs_cleared_by_rdma_on_a_hypervisor_with_vfio_devices_is_refused_naming_both():
    """Issue 23, finding 11: the rdma role writes ACS Control 0 after the kernel computed the
    IOMMU groups; VFIO's isolation rests on those groups. The default (rdma_acs_disable True)
    on a node with vfio_devices is refused, the host, both keys and the fix named."""
    kvm = HostInput("kvm01", ("hypervisors",), dict(KEEPS_GPUS))
    found = [e for e in spec_problems([*site(), kvm]) if e.host == "kvm01"]
    assert [e.field for e in found] == ["rdma_acs_disable"], found
    assert "vfio_devices" in found[0].problem and "IOMMU groups" in found[0].problem
    assert found[0].value is True
    assert "rdma_acs_disable = False for kvm01" in found[0].fix
    assert "remove vfio_devices" in found[0].fix


def test_doca_ofed_needs_the_pinned_signing_key():
    found = problems(site(everywhere={"rdma_stack": "doca-ofed"}), "rdma_doca_key_fingerprint")
    assert any("without the fingerprint" in p for p in found)
    ok = site(everywhere={"rdma_stack": "doca-ofed", "rdma_doca_key_fingerprint": FINGERPRINT})
    assert build_spec(ok).rdma_stack == "doca-ofed"


def test_a_fingerprint_of_another_key_is_refused():
    hosts = site(everywhere={"rdma_stack": "doca-ofed",
                             "rdma_doca_key_fingerprint": "B" * 40})
    assert problems(hosts, "rdma_doca_key_fingerprint")


def test_an_unknown_stack_is_refused():
    assert problems(site(everywhere={"rdma_stack": "mlnx-ofed"}), "rdma_stack")


def test_no_gpudirect_path_is_warned_at_validation():
    spec = build_spec(site())  # inbox stack, H100 PCIe on the proprietary modules (default)
    warned = [w for w in spec.warnings if w.host == "gpu01" and w.field == "rdma_nics"]
    assert warned and "no GPUDirect RDMA" in warned[0].message
    spec = build_spec(site(gpu01={"nvidia_driver_open_modules": True}))  # DMA-BUF
    assert not [w for w in spec.warnings if w.field == "rdma_nics"]


@pytest.mark.parametrize("name", ["-d", "--help", "..", ".", "mlx5_0 x", "mlx5\u0660"])
def test_a_nic_name_that_would_be_an_option_or_a_path_is_refused(name):
    """`rdma link add NAME ...`, `ib_write_bw -d NAME`: a name starting with '-' is an option,
    '..' a path; Unicode digits are not the kernel's."""
    assert problems(site([{**NIC, "name": name}]), "rdma_nics[0]['name']")


@pytest.mark.parametrize("netdev", ["-x", "..", "enp0s\u0663"])
def test_a_netdev_that_would_be_an_option_or_a_path_is_refused(netdev):
    hosts = site([{**RXE, "netdev": netdev}], everywhere={"soft_roce": True})
    assert problems(hosts, "rdma_nics[0]['netdev']")
