"""Issue 45 item 1, second half: NVLink-domain racks (GB200 NVL72) as Slurm's topology/block
(fabric_blocks): refused before any host is touched where slurmctld 24.11 would refuse or warn,
or where the target's Slurm predates the plugin (23.11); topology.conf's BlockName lines."""

from __future__ import annotations

from typing import Any

import pytest

from gpuinfra.slurm.conf import slurm_conf
from gpuinfra.slurm.topology import block_lines, topology_lines, topology_plugin
from gpuinfra.slurm.versions import block_problem
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_roles.slurm.operations import TOPOLOGY_REFUSED
from tests.unit.test_spec_cross import problems, site

GB200 = {"gpu_model": "GB200-186GB", "gpu_count": 4, "gpu_topology": "nvlink-domain"}
RACKS = {"rack1": ["gb01", "gb02", "gb03"], "rack2": ["gb04", "gb05"]}


def hosts(blocks: Any, **extra: Any) -> list:
    return site(everywhere={"fabric_blocks": blocks, "driver_branch": "580", **extra},
                **{f"gb0{i}": GB200 for i in range(1, 6)})


def refused(blocks: Any, **extra: Any) -> list:
    return [e for e in problems(hosts(blocks, **extra)) if e.field.startswith("fabric_blocks")]


def test_racks_become_block_lines_the_smallest_first() -> None:
    assert problems(hosts(RACKS)) == []
    spec = build_spec(hosts(RACKS))
    assert topology_plugin(spec) == "topology/block"
    # slurmctld takes the first block's size as the base and refuses a smaller one after it.
    assert block_lines(spec) == topology_lines(spec) == [
        "BlockName=rack2 Nodes=gb04,gb05", "BlockName=rack1 Nodes=gb01,gb02,gb03"]
    conf = slurm_conf(spec, {n.name: n.address for n in spec.nodes},
                      {n.name: None for n in spec.workers}, {n.name: "gb200" for n in spec.workers})
    assert conf.topology_plugin == "topology/block"


@pytest.mark.parametrize(("blocks", "words"), [
    ({"rack1": ["gb01", "gb02"], "rack2": ["gb03"]}, "in no block while others are"),
    ({"rack1": ["gb01", "gb02", "gb03"], "rack2": ["gb03", "gb04", "gb05"]}, "listed twice"),
    ({"rack1": ["gb01", "gb01", "gb02", "gb03", "gb04", "gb05"]}, "listed twice"),
    ({"rack1": ["gb01", "gb02", "gb03", "gb04", "gb05", "gb09"]}, "no host of the inventory"),
    ({"rack1": ["gb01", "gb02", "gb03", "gb04", "gb05", "head01"]}, "not a Slurm compute"),
    ({"rack[1]": ["gb01", "gb02", "gb03", "gb04", "gb05"]}, "not a block name"),
    ({"rack1": []}, "lacks children"),
    ({}, "non-empty dict"),
    (["rack1"], "non-empty dict"),
])
def test_what_slurmctld_would_refuse_is_refused(blocks: Any, words: str) -> None:
    found = refused(blocks)
    assert any(words in e.problem for e in found), [e.problem for e in found]
    assert all(e.fix and e.allowed for e in found)


def test_blocks_and_switches_together_are_refused() -> None:
    found = refused(RACKS, fabric_switches={"leaf1": ["gb01", "gb02", "gb03", "gb04", "gb05"]})
    assert any("one topology plugin per cluster" in e.problem for e in found), found


def test_a_slurm_before_23_11_is_refused_with_the_source() -> None:
    assert block_problem("head01", "ubuntu-24.04") is None
    for distro in ("debian-12", "ubuntu-22.04"):
        problem = block_problem("head01", distro)
        assert problem and "added in Slurm 23.11" in problem and "71c4762ed9" in problem
        assert "head01" in problem and "fabric_switches" in problem


def test_the_trial_slurmctld_refuses_what_topology_block_warns_of() -> None:
    """block_record.c (24.11.5) only warns of nodes in no block and unknown names: the trial
    controller's refusal lines include both."""
    import re

    for line in ("warning: blocks lack access to 2 nodes: gb[04-05]",
                 "warning: Invalid hostnames in block configuration: gb09",
                 "fatal: Block configuration (rack2) children count lower than bblock_node_cnt"):
        assert re.search(TOPOLOGY_REFUSED, line), line
