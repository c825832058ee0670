"""Issue 45 item 1: the fabric in the spec (fabric_switches), refused before any host is touched
when Slurm could not read it as a tree, and topology.conf with TopologyPlugin=topology/tree in
the head's files."""

from __future__ import annotations

from typing import Any

import pytest

from gpuinfra.slurm.conf import slurm_conf
from gpuinfra.slurm.extra import extra_lines
from gpuinfra.slurm.running import conf_change, running_config
from gpuinfra.slurm.topology import switch_lines
from gpuinfra.spec import build_cluster
from gpuinfra_roles.slurm.operations import TOPOLOGY_REFUSED, checked_config, topology_check_command
from tests.unit.test_spec_cross import problems, site

FOUR = {"gpu01": {}, "gpu02": {}, "gpu03": {}, "gpu04": {}}
TREE = {"leaf1": ["gpu01", "gpu02"], "leaf2": ["gpu03", "gpu04.example.org"],
        "spine": ["leaf1", "leaf2"]}


def hosts(fabric: Any, **extra: Any) -> list:
    workers = {"gpu01": {}, "gpu02": {}, "gpu03": {}, "gpu04.example.org": {}}
    return site(everywhere={"fabric_switches": fabric, **extra}, **workers)


def refused(fabric: Any, **extra: Any) -> list:
    return [e for e in problems(hosts(fabric, **extra)) if e.field.startswith("fabric_switches")]


def test_a_two_level_tree_is_valid_and_becomes_topology_conf() -> None:
    assert problems(hosts(TREE)) == []
    spec = build_cluster(hosts(TREE))
    assert spec.fabric is not None and spec.fabric.roots == ("spine",)
    assert spec.fabric.leaf_of["gpu04.example.org"] == "leaf2"
    assert switch_lines(spec) == ["SwitchName=leaf1 Nodes=gpu01,gpu02",
                                  "SwitchName=leaf2 Nodes=gpu03,gpu04",
                                  "SwitchName=spine Switches=leaf1,leaf2"]
    assert not [w for w in spec.warnings if w.field == "fabric_switches"]


def test_switches_are_written_after_the_switches_under_them() -> None:
    """The site may list the spine first; slurmctld gets each child defined before its parent."""
    tree = {"core": ["spine1", "spine2"], "spine1": ["leaf1"], "spine2": ["leaf2"],
            "leaf1": ["gpu01", "gpu02"], "leaf2": ["gpu03", "gpu04"]}
    lines = switch_lines(build_cluster(hosts(tree)))
    order = [line.split()[0].removeprefix("SwitchName=") for line in lines]
    assert order.index("leaf1") < order.index("spine1") < order.index("core")
    assert order.index("leaf2") < order.index("spine2") < order.index("core")


@pytest.mark.parametrize(("fabric", "words"), [
    ({"leaf1": ["gpu01", "gpu02"], "leaf2": ["gpu03"]}, "on no switch while others are"),
    ({"a": ["b"], "b": ["a"], "leaf": ["gpu01", "gpu02", "gpu03", "gpu04"]}, "form a loop"),
    ({"s1": ["leaf"], "s2": ["leaf"], "leaf": ["gpu01", "gpu02", "gpu03", "gpu04"]},
     "is under 2 switches"),
    ({"a": ["b"], "b": ["c"], "c": ["a"], "leaf": ["gpu01", "gpu02", "gpu03", "gpu04"]},
     "form a loop"),
    ({"leaf1": ["gpu01", "gpu02"], "leaf2": ["gpu02", "gpu03", "gpu04"]}, "on 2 leaf switches"),
    ({"leaf1": ["gpu01", "gpu02", "leaf2"], "leaf2": ["gpu03", "gpu04"]},
     "both nodes and switches"),
    ({"leaf1": ["gpu01", "gpu02", "gpu03", "gpu09"]}, "neither a host"),
    ({"leaf1": ["gpu01", "gpu02", "gpu03", "gpu04", "head01"]}, "not a Slurm compute node"),
    ({"leaf[1]": ["gpu01", "gpu02", "gpu03", "gpu04"]}, "not a switch name"),
    ({"leaf,1": ["gpu01", "gpu02", "gpu03", "gpu04"]}, "not a switch name"),
    ({"gpu01": ["gpu02"]}, "also a host"),
    ({"leaf1": []}, "non-empty list"),
    ({"leaf1": "gpu01,gpu02"}, "non-empty list"),
    ({"leaf1": ["gpu01", "gpu01", "gpu02", "gpu03", "gpu04"]}, "listed twice"),
    (["leaf1"], "non-empty dict"),
    ({}, "non-empty dict"),
])
def test_what_slurm_could_not_read_as_a_tree_is_refused(fabric: Any, words: str) -> None:
    found = refused(fabric)
    assert found, fabric
    assert any(words in e.problem for e in found), [e.problem for e in found]
    assert all(e.fix and e.allowed for e in found)


def test_a_fabric_without_slurm_is_refused() -> None:
    found = refused(TREE, schedulers=["kubernetes"])
    assert found and "only Slurm reads the fabric" in found[0].problem


def test_a_node_left_out_of_slurm_is_not_asked_for() -> None:
    """A worker whose node_schedulers leave Slurm out is not in slurm.conf: no leaf needed."""
    workers = {"gpu01": {}, "gpu02": {}, "k8s01": {"node_schedulers": ["kubernetes"]}}
    both = {"schedulers": ["slurm", "kubernetes"], "scheduler_sharing": "drain",
            "fabric_switches": {"leaf1": ["gpu01", "gpu02"]}}
    hosts_ = site(head={"node_schedulers": ["slurm", "kubernetes"]}, everywhere=both, **workers)
    assert not [e for e in problems(hosts_) if e.field.startswith("fabric_switches")]


def test_two_fabrics_not_joined_are_a_warning_not_an_error() -> None:
    spec = build_cluster(hosts({"leaf1": ["gpu01", "gpu02"], "leaf2": ["gpu03", "gpu04"]}))
    assert spec.fabric is not None and set(spec.fabric.roots) == {"leaf1", "leaf2"}
    said = [w for w in spec.warnings if w.field == "fabric_switches"]
    assert len(said) == 1 and "never gives one job nodes under two of them" in said[0].message


def test_slurm_conf_names_the_plugin_only_with_a_fabric() -> None:
    def conf(fabric: Any) -> Any:
        spec = build_cluster(hosts(fabric))
        workers = spec.workers_of("slurm")
        return slurm_conf(spec, {n.name: n.address for n in spec.nodes},
                          {n.name: None for n in workers}, {n.name: "h100" for n in workers})
    assert conf(TREE).topology_plugin == "topology/tree"
    assert conf(None).topology_plugin is None


def test_the_site_cannot_set_the_plugin_itself() -> None:
    with pytest.raises(Exception, match="fabric_switches"):
        extra_lines({"TopologyPlugin": "topology/tree"})


def test_turning_the_plugin_on_restarts_every_daemon() -> None:
    before = running_config("ClusterName=x\nNodeName=a CPUs=1\n", "")
    change = conf_change(before, "ClusterName=x\nTopologyPlugin=topology/tree\n"
                                 "NodeName=a CPUs=1\n", "")
    assert change.kind == "restart" and change.slurmd and "topologyplugin" in change.why


def test_the_head_judges_topology_conf_with_slurmctld_only_when_there_is_one() -> None:
    """slurmd -G does not read topology.conf: slurmctld judges the staged copy (the lab proof
    refuses a broken one: gpuinfra_lab/topology_placement.py)."""
    script = topology_check_command("/etc/slurm/.gpuinfra-staged")
    assert "slurmctld -D -i -f" in script and "topology.conf" in script
    for said in ("fatal: Switch configuration is not a tree",
                 'error: _find_node_record: lookup failure for node "nX"',
                 "error: WARNING: switches lack access to 1 nodes: n3",
                 "error: WARNING: Multiple leaf switches contain nodes: n2"):
        import re
        assert re.search(TOPOLOGY_REFUSED, said), said
    assert not re.search(TOPOLOGY_REFUSED, "topology/tree: init: topology tree plugin loaded")
    with_topology = _check_of(checked_config, {"/etc/slurm/slurm.conf": "x",
                                               "/etc/slurm/topology.conf": "y"})
    without = _check_of(checked_config, {"/etc/slurm/slurm.conf": "x"})
    assert "slurmctld -D" in with_topology and "slurmctld -D" not in without


def _check_of(op: Any, files: dict[str, str]) -> str:
    """The check command an operation would run (its wrapped generator's arguments)."""
    import gpuinfra_roles.slurm.operations as ops

    seen: dict[str, str] = {}

    def fake(files: Any, stage: str, check: str, **_: Any) -> None:
        seen["check"] = check
    real = ops.checked_files
    ops.checked_files = fake
    try:
        op(files=files, check_as="gpu01")
    finally:
        ops.checked_files = real
    return seen["check"]
