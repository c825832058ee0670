"""Validation says everything in one round (the operator review, section 2.2: E14 and E15
showed only after the first round's problems were fixed; E4's typo dragged three follow-on
errors; E6 and E9 pointed at the wrong fix)."""

from __future__ import annotations

import copy

from gpuinfra.spec import HostInput
from gpuinfra_deploy.run.knobs import spec_problems

NIC = {"name": "mlx5_0", "pci": "0000:18:00.0", "link_layer": "infiniband", "rate_gbps": 400,
       "model": "ConnectX-7"}
HGX = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}


def site(worker: dict, everywhere: dict | None = None) -> list[HostInput]:
    return [HostInput("head01", ("head",), {"node_address": "10.0.0.1", **(everywhere or {})}),
            HostInput("hgx01", ("workers",), {"node_address": "10.0.0.2",
                                              **copy.deepcopy(worker), **(everywhere or {})})]


def lines(hosts: list[HostInput]) -> list[str]:
    return [f"[{e.host}] {e.field}: {e.problem} | fix: {e.fix}" for e in spec_problems(hosts)]


def test_a_copied_nic_address_shows_with_the_nics_other_problems():
    """Both NICs have a bad rate AND one address: all three in the first round."""
    nics = [{**NIC, "rate_gbps": 25}, {**NIC, "name": "mlx5_1", "rate_gbps": 25}]
    found = lines(site({**HGX, "rdma_nics": nics}))
    assert sum("not a rate infiniband" in f for f in found) == 2, found
    assert any("one PCI address for several NICs (mlx5_0, mlx5_1)" in f for f in found), found


def test_a_misspelt_gpu_model_still_has_the_host_judged():
    """gpu_modle: the typo, and the MIG profile it would have refused, in the same round;
    no "set on a host without gpu_model" follow-ons."""
    worker = {**HGX, "gpu_modle": HGX["gpu_model"],
              "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.20gb": 2}}}
    del worker["gpu_model"]
    found = lines(site(worker))
    assert any("did you mean 'gpu_model'" in f for f in found), found
    assert any("no MIG profile '3g.20gb'" in f for f in found), found
    assert not any("without gpu_model" in f for f in found), found


def test_an_uninstallable_branch_points_to_the_nearest_newer_one():
    found = lines(site(HGX, {"driver_branch": "560"}))
    assert any("driver_branch = '570'" in f for f in found), found


def test_a_count_the_board_cannot_hold_names_the_boards_count():
    found = [f for f in lines(site({**HGX, "gpu_count": 9})) if "gpu_count/" in f]
    assert found and "set gpu_count to 8" in found[0], found
