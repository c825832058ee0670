"""Issue 45 item 2: each Slurm node's Features (GPU family and model, GPU count, NVLink kind,
RDMA fabric, the site's own) and Weight (the nodes with less GPU memory fill first), and
partitions chosen by feature."""

from __future__ import annotations

from typing import Any

import pytest

from gpuinfra.slurm.features import gpu_family, node_features, node_weight
from gpuinfra.spec import HostInput
from gpuinfra_deploy.run.knobs import build_spec, spec_problems
from tests.unit.test_slurmconf import SETTINGS

H100 = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all",
        "rdma_nics": [{"name": "mlx5_0", "pci": "0000:17:00.0"}]}
L40S = {"gpu_model": "L40S", "gpu_count": 4, "gpu_topology": "pcie-only"}
PAIRS = {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"}


def hosts(cluster: dict[str, Any] | None = None, **workers: dict[str, Any]) -> list[HostInput]:
    data = {"cluster_name": "mixed", **(cluster or {})}
    out = [HostInput("head01", ("head",), {**data, "node_address": "10.0.0.1"})]
    for i, (name, node) in enumerate(workers.items(), 2):
        out.append(HostInput(name, ("workers",), {**data, "node_address": f"10.0.0.{i}",
                                                  **node}))
    return out


MIXED = {"hgx01": H100, "l40s01": L40S, "pcie01": PAIRS, "cpu01": {}}


def test_each_node_says_what_it_is() -> None:
    spec = build_spec(hosts(**MIXED))
    assert node_features(spec.node("hgx01")) == ("h100", "h100-sxm5-80gb", "gpus8", "nvswitch",
                                                 "infiniband")
    assert node_features(spec.node("l40s01")) == ("l40s", "gpus4")
    assert node_features(spec.node("pcie01")) == ("h100", "h100-pcie-80gb", "gpus2", "nvlink")
    assert node_features(spec.node("cpu01")) == ()


def test_the_cheaper_nodes_weigh_less() -> None:
    spec = build_spec(hosts(**MIXED))
    weights = {n: node_weight(spec.node(n)) for n in MIXED}
    assert weights == {"hgx01": 641, "l40s01": 193, "pcie01": 161, "cpu01": 1}


def test_the_site_adds_features_and_sets_weights() -> None:
    spec = build_spec(hosts(hgx01={**H100, "slurm_node_features": ["rack12", "h100"],
                                   "slurm_node_weight": 5}))
    node = spec.node("hgx01")
    assert node_features(node)[-1] == "rack12" and node_features(node).count("h100") == 1
    assert node_weight(node) == 5


@pytest.mark.parametrize(("key", "value"), [
    ("slurm_node_features", ["a,b"]), ("slurm_node_features", ["h100&ib"]),
    ("slurm_node_features", ["big mem"]), ("slurm_node_features", "h100"),
    ("slurm_node_weight", 0), ("slurm_node_weight", "10"), ("slurm_node_weight", 2**31),
])
def test_what_slurm_would_misread_is_refused(key: str, value: Any) -> None:
    found = [e for e in spec_problems(hosts(hgx01={**H100, key: value})) if e.field == key]
    assert found and found[0].host == "hgx01" and found[0].fix


def test_gpu_family() -> None:
    assert [gpu_family(k) for k in ("H100-SXM5-80GB", "L40S", "RTX-4090", "GB200-186GB")] == \
        ["h100", "l40s", "rtx-4090", "gb200"]


def test_a_partition_of_every_node_with_a_feature() -> None:
    parts = [{"name": "h100", "features": ["h100"], "default": True},
             {"name": "ib", "features": ["h100", "infiniband"]}]
    spec = build_spec(hosts({"slurm_partitions": parts}, **MIXED))
    assert {p.name: p.nodes for p in spec.partitions} == {"h100": ("hgx01", "pcie01"),
                                                          "ib": ("hgx01",)}


@pytest.mark.parametrize(("part", "words"), [
    ({"name": "p", "features": ["b200"]}, "no Slurm node has all of b200"),
    ({"name": "p", "features": ["h100"], "nodes": ["hgx01"]}, "both nodes and features"),
    ({"name": "p", "features": []}, "non-empty list"),
    ({"name": "p", "features": ["h100|l40s"]}, "feature"),
])
def test_a_partition_by_feature_that_selects_nothing_is_refused(part: dict, words: str) -> None:
    found = [e for e in spec_problems(hosts({"slurm_partitions": [part]}, **MIXED))
             if "features" in e.field]
    assert found and words in found[0].problem, [e.problem for e in found]


def test_a_host_outside_head_and_workers_is_in_no_scheduler_unless_it_says() -> None:
    """Issue 45 item 5: a hypervisor or service host gets no MUNGE, Slurm or Pyxis."""
    def hv(data: dict[str, Any]) -> list[HostInput]:
        return [*hosts(gpu01=L40S), HostInput("kvm01", ("hypervisors",), {
            "cluster_name": "mixed", "node_address": "10.0.0.9",
            "vfio_devices": ["0000:3b:00.0"], **data})]
    assert build_spec(hv({})).node("kvm01").schedulers == ()
    assert build_spec(hv({"node_schedulers": []})).node("kvm01").schedulers == ()
    assert build_spec(hv({"node_schedulers": ["slurm"]})).node("kvm01").schedulers == ("slurm",)
    assert build_spec(hv({})).node("gpu01").schedulers == ("slurm",)


@pytest.mark.parametrize("who", ["head01", "gpu01"])
def test_an_empty_scheduler_list_on_the_head_or_a_worker_is_refused(who: str) -> None:
    sites = hosts(gpu01=L40S)
    sites = [HostInput(h.name, h.groups, {**h.data, "node_schedulers": []})
             if h.name == who else h for h in sites]
    found = [e for e in spec_problems(sites) if e.field == "node_schedulers"]
    assert found and found[0].host == who and "empty on" in found[0].problem


def test_scontrol_reboot_works_and_waits_for_a_gpu_servers_post() -> None:
    """Issue 45 item 4: RebootProgram set, ResumeTimeout 900 s by default (slurm.conf(5): a
    node not back within ResumeTimeout, 60 s by default, is marked DOWN)."""
    from gpuinfra.slurm.conf import slurm_conf
    from gpuinfra_deploy.templates import role_file

    spec = build_spec(hosts(hgx01=H100))
    workers = spec.workers_of("slurm")
    conf = slurm_conf(spec, {n.name: n.address for n in spec.nodes},
                      {n.name: None for n in workers}, {n.name: "h100" for n in workers})
    node = spec.node("hgx01")
    settings = {**SETTINGS, "resume_timeout": node.settings["slurm_resume_timeout"],
                "reboot_program": node.settings["slurm_reboot_program"]}
    lines = str(role_file("slurm", "/etc/slurm/slurm.conf", conf=conf,
                          settings=settings)).splitlines()
    assert "RebootProgram=/usr/sbin/reboot" in lines and "ResumeTimeout=900" in lines


@pytest.mark.parametrize(("key", "value"), [
    ("slurm_reboot_program", "/tmp/reboot"), ("slurm_reboot_program", "reboot"),
    ("slurm_reboot_program", "/usr/sbin/../../tmp/x"), ("slurm_resume_timeout", 30),
    ("slurm_conf_extra", {"ResumeTimeout": "60"}), ("slurm_conf_extra", {"RebootProgram": "/x"}),
])
def test_reboot_settings_slurm_or_root_would_regret_are_refused(key: str, value: Any) -> None:
    found = [e for e in spec_problems(hosts({key: value}, hgx01=H100)) if e.field == key]
    assert found and found[0].fix
