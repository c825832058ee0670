"""The cluster spec on the boards and branches added to the knowledge tables: fixed NVLink
meshes, rack-scale NVLink domains, branches that cannot drive a board, the MIG tables fixed."""

from __future__ import annotations

from typing import Any

import pytest

from gpuinfra.spec import HostInput, build_cluster, validate


def site(branch: str | None = None, mixed: bool = False, **gpu: Any) -> list[HostInput]:
    cluster: dict[str, Any] = {"driver_branch": branch} if branch else {}
    if mixed:
        cluster["mig_strategy"] = "mixed"
    return [HostInput("head01", ("head",), dict(cluster)),
            HostInput("gpu01", ("workers",), {**cluster, **gpu})]


def problems(hosts: list[HostInput]) -> list[str]:
    return [f"{e.field}: {e.problem} (allowed: {e.allowed})" for e in validate(hosts)]


DGX1 = {"gpu_model": "V100-SXM2-32GB", "gpu_count": 8, "gpu_topology": "fixed-mesh"}
HGX2 = {"gpu_model": "V100-SXM3-32GB", "gpu_count": 16, "gpu_topology": "fixed-mesh"}
GB200 = {"gpu_model": "GB200-186GB", "gpu_count": 4, "gpu_topology": "nvlink-domain"}
B200 = {"gpu_model": "B200-180GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}


def test_dgx1_builds_as_a_fixed_mesh_without_fabric_manager():
    node = build_cluster(site(**DGX1)).node("gpu01")
    assert node.gpus.topology.name == "fixed-mesh" and not node.gpus.needs_fabric_manager


def test_hgx2_builds_as_a_fixed_mesh_that_needs_fabric_manager():
    assert build_cluster(site(**HGX2)).node("gpu01").gpus.needs_fabric_manager


def test_p3_8xlarge_builds_as_the_half_mesh():
    assert validate(site(gpu_model="V100-SXM2-16GB", gpu_count=4,
                         gpu_topology="fixed-mesh")) == []


@pytest.mark.parametrize(("gpu", "words"), [
    ({**DGX1, "gpu_count": 6}, "hold 8 or 4 GPUs, not 6"),
    ({**DGX1, "gpu_topology": "pcie-only"}, "fixed-mesh"),
    ({**DGX1, "gpu_model": "H100-SXM5-80GB"}, "no fixed NVLink matrix is known"),
])
def test_fixed_mesh_errors_are_named(gpu, words):
    assert any(words in p for p in problems(site(**gpu))), problems(site(**gpu))


def test_gb200_tray_builds_on_570_as_an_nvlink_domain():
    spec = build_cluster(site("570", **GB200))
    node = spec.node("gpu01")
    assert node.gpus.topology.name == "nvlink-domain" and not node.gpus.needs_fabric_manager
    assert any("nvidia-imex" in w.message for w in spec.warnings)


@pytest.mark.parametrize(("gpu", "branch"), [(B200, None), (GB200, "550")])
def test_blackwell_on_a_branch_that_cannot_drive_it_is_refused(gpu, branch):
    found = [e for e in validate(site(branch, **gpu)) if e.field == "driver_branch"]
    assert found, problems(site(branch, **gpu))
    assert "needs driver branch 570 or newer" in found[0].problem
    assert found[0].allowed == "570, 580"


def test_b200_on_570_is_fine_and_names_the_subnet_manager():
    assert validate(site("570", **B200)) == []
    spec = build_cluster(site("570", **B200))
    assert [w.field for w in spec.warnings] == ["gpu_model"]
    assert "nvlsm" in spec.warnings[0].message


def test_mig_on_h200_needs_550():
    gpu = {"gpu_model": "H200-SXM-141GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all",
           "gpu_sharing": {"mode": "mig", "mig_layout": {"1g.18gb": 7}}}
    found = [e for e in validate(site(**gpu)) if e.field == "driver_branch"]
    assert found and "MIG on H200-SXM-141GB needs driver branch 550" in found[0].problem
    assert validate(site("550", **gpu)) == []


def test_a30_media_profile_is_accepted_once():
    """Fixed: the MIG guide's A30 table has 2g.12gb+me; the table lacked it."""
    gpu = {"gpu_model": "A30", "gpu_count": 2, "gpu_topology": "pcie-only",
           "gpu_sharing": {"mode": "mig", "mig_layout": {"2g.12gb+me": 1, "2g.12gb": 1}}}
    assert validate(site(mixed=True, **gpu)) == []
    gpu["gpu_sharing"] = {"mode": "mig", "mig_layout": {"2g.12gb+me": 1, "1g.6gb+me": 1,
                                                        "1g.6gb": 1}}
    assert any("more than one '+me'" in p for p in problems(site(mixed=True, **gpu)))


def test_rtx_pro_6000_mig_variants():
    gpu = {"gpu_model": "RTX-PRO-6000-BSE", "gpu_count": 1, "gpu_topology": "pcie-only",
           "gpu_sharing": {"mode": "mig", "mig_layout": {"1g.24gb+me.all": 1,
                                                         "1g.24gb-me": 1, "2g.48gb+gfx": 1}}}
    assert validate(site("580", mixed=True, **gpu)) == []
    assert any("needs driver branch 575" in p for p in problems(site("570", mixed=True, **gpu)))
    # The MIG guide's RTX PRO 6000 table also has 1g.24gb+me (one instance): a valid layout.
    gpu["gpu_sharing"] = {"mode": "mig", "mig_layout": {"1g.24gb+me": 1, "1g.24gb": 3}}
    assert validate(site("580", mixed=True, **gpu)) == []
    gpu["gpu_sharing"] = {"mode": "mig", "mig_layout": {"1g.24gb+me": 2}}
    assert any("more than one '+me'" in p for p in problems(site("580", mixed=True, **gpu)))
