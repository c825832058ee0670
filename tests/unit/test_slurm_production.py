"""Slurm for production (issue 28, item 1): partition settings in Slurm's formats, per-GPU
memory and CPU defaults from each node's facts, PrologFlags and MPI.

Partition keys are refused at the spec gate with host, field, value, allowed and fix
(gpuinfra/spec/partitions.py); the library writes them on the PartitionName= line
(gpuinfra.slurm.nodes.partition_lines) with DefMemPerGPU/DefCpuPerGPU (per_gpu_defaults).
"""

from __future__ import annotations

import copy

import pytest

from gpuinfra.slurm.conf import slurm_conf
from gpuinfra.slurm.extra import CONF_EXTRA, extra_lines, extra_problem, prolog_flags
from gpuinfra.slurm.nodes import node_gpu_count, node_hardware
from gpuinfra.spec.partitions import time_minutes
from gpuinfra_deploy.run.knobs import spec_problems
from gpuinfra_deploy.templates import role_file
from gpuinfra_lab.slurm_defaults import config_value, expected_mem_per_gpu, field, tres_mem_mb
from tests.unit.test_bad_input_spec import hosts, partitions, valid_site
from tests.unit.test_slurmconf import (
    ADDRESSES,
    HGX,
    HGX_TYPE,
    PAIR_TYPE,
    PCIE_PAIR,
    SETTINGS,
    hgx_layout,
    lab_layout,
    settings_lines,
    spec_of,
)

BOTH = ["lab-worker1", "lab-worker2"]
# 2 sockets x 48 cores x 2 threads, 515703 MiB less 2 %: slurmd -C of an HGX
HGX_HW = node_hardware(hgx_layout(), 515703, 2)
LAB_HW = node_hardware(lab_layout(), 24105, 2)


def conf_of(parts=None, hardware=None, workers=None, **kwargs):
    workers = workers or {"lab-worker1": HGX, "lab-worker2": PCIE_PAIR}
    cluster = {"slurm_partitions": parts} if parts is not None else {}
    spec = spec_of(workers, **cluster)
    hardware = hardware or {name: HGX_HW for name in workers}
    types = {"lab-worker1": HGX_TYPE, "lab-worker2": PAIR_TYPE}
    return slurm_conf(spec, ADDRESSES, hardware, {n: types.get(n, "x") for n in workers},
                      **kwargs)


# ----------------------------------------------------------------------------- rendering

def test_every_partition_key_is_written_in_slurms_words():
    conf = conf_of([
        {"name": "gpu", "nodes": BOTH, "default": True, "max_time": "2-00:00:00",
         "default_time": "4:00:00", "allow_accounts": ["ml", "vision"],
         "allow_groups": ["gpu-users"], "qos": "normal", "priority_tier": 10,
         "oversubscribe": "force:2", "state": "up"},
        {"name": "debug", "nodes": ["lab-worker2"], "max_time": 30, "state": "DRAIN"}])
    assert conf.partitions == [
        "PartitionName=gpu Nodes=lab-worker1,lab-worker2 MaxTime=2-00:00:00 "
        "DefaultTime=4:00:00 State=UP Default=YES AllowAccounts=ml,vision "
        "AllowGroups=gpu-users QOS=normal PriorityTier=10 OverSubscribe=FORCE:2 "
        "DefMemPerGPU=63173 DefCpuPerGPU=24",
        "PartitionName=debug Nodes=lab-worker2 MaxTime=30 State=DRAIN "
        "DefMemPerGPU=252694 DefCpuPerGPU=96"]


def test_without_settings_a_partition_is_written_as_before_plus_its_gpu_defaults():
    # an old site's partition: MaxTime=INFINITE State=UP as before; gpu: True still accepted
    conf = conf_of([{"name": "gpu", "nodes": BOTH, "default": True, "gpu": True}])
    assert conf.partitions == ["PartitionName=gpu Nodes=lab-worker1,lab-worker2 "
                               "MaxTime=INFINITE State=UP Default=YES DefMemPerGPU=63173 "
                               "DefCpuPerGPU=24"]


def test_per_gpu_defaults_are_the_smallest_share_over_the_partitions_gpu_nodes():
    # lab-worker1: 8 GPUs on the HGX (505388 MiB, 192 CPUs): 63173 MiB and 24 CPUs per GPU;
    # lab-worker2: 2 GPUs on the same hardware: 252694 and 96. The partition of both takes the
    # smaller, so that every GPU of lab-worker1 can still be given out with its default.
    conf = conf_of()
    assert conf.partitions[0].endswith(" DefMemPerGPU=63173 DefCpuPerGPU=24")
    assert HGX_HW.real_memory_mb // 8 == 63173 and HGX_HW.cpus // 8 == 24
    assert conf.notes == []


def test_a_partition_without_gpu_nodes_gets_no_per_gpu_defaults():
    conf = conf_of([{"name": "gpu", "nodes": ["lab-worker1"], "default": True},
                    {"name": "cpu", "nodes": ["lab-worker3"]}],
                   workers={"lab-worker1": HGX, "lab-worker3": {}})
    assert "DefMemPerGPU" in conf.partitions[0]
    assert conf.partitions[1] == "PartitionName=cpu Nodes=lab-worker3 MaxTime=INFINITE State=UP"


def test_the_sites_values_win_over_the_computed_and_the_partitions_over_the_sites():
    parts = [{"name": "a", "nodes": BOTH, "default": True},
             {"name": "b", "nodes": BOTH, "def_mem_per_gpu": 8192, "def_cpu_per_gpu": 4},
             {"name": "c", "nodes": BOTH, "def_mem_per_gpu": 0, "def_cpu_per_gpu": 0}]
    conf = conf_of(parts, def_mem_per_gpu=16384, def_cpu_per_gpu=6)
    assert conf.partitions[0].endswith(" Default=YES DefMemPerGPU=16384 DefCpuPerGPU=6")
    assert conf.partitions[1].endswith(" DefMemPerGPU=8192 DefCpuPerGPU=4")
    assert conf.partitions[2].endswith(" State=UP")  # 0: left out
    site_off = conf_of(parts[:1], def_mem_per_gpu=0, def_cpu_per_gpu=0)
    assert "PerGPU" not in site_off.partitions[0]


def test_fewer_cpus_than_gpus_leaves_def_cpu_per_gpu_out_and_says_why():
    # the lab VM: 2 CPUs for 8 GPUs; DefCpuPerGPU=1 would make an 8-GPU job unplaceable
    conf = conf_of(hardware={"lab-worker1": LAB_HW, "lab-worker2": LAB_HW})
    assert conf.partitions[0].endswith(" DefMemPerGPU=2952")
    assert conf.notes == ["partition gpu: DefCpuPerGPU left out: lab-worker1 has fewer CPUs "
                          "than GPUs (a job on all its GPUs could not get one per GPU); set it "
                          "per partition if you want one"]


def test_a_mig_node_shares_its_memory_among_its_instances():
    mig = {**HGX, "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 2}}}
    conf = conf_of(workers={"lab-worker1": mig})
    line = conf.nodes[0].text
    assert node_gpu_count(line) == 16  # 2 instances on each of 8 GPUs
    assert conf.partitions[0].endswith(f" DefMemPerGPU={HGX_HW.real_memory_mb // 16} "
                                       f"DefCpuPerGPU={HGX_HW.cpus // 16}")


def test_an_unknown_node_leaves_the_defaults_out_rather_than_guessing():
    conf = conf_of(hardware={"lab-worker1": None, "lab-worker2": HGX_HW})
    assert "PerGPU" not in conf.partitions[0]
    assert any("DefMemPerGPU left out: the hardware of lab-worker1 is unknown" in n
               for n in conf.notes)


def test_a_sites_def_mem_per_cpu_keeps_def_mem_per_gpu_out():
    # slurm.conf(5): DefMemPerCPU, DefMemPerGPU and DefMemPerNode are mutually exclusive
    conf = conf_of(extra={"DefMemPerCPU": 2048})
    assert "DefMemPerGPU" not in conf.partitions[0]
    assert "DefCpuPerGPU=24" in conf.partitions[0]
    assert any("slurm_conf_extra sets DefMemPerCPU" in n for n in conf.notes)


def test_node_gpu_count_reads_the_gres_of_a_node_line():
    assert node_gpu_count("NodeName=a CPUs=2 Gres=gpu:h100:8,mps:800 State=UNKNOWN") == 8
    assert node_gpu_count("NodeName=a Gres=gpu:1g.10gb:14,gpu:3g.40gb:2") == 16
    assert node_gpu_count("NodeName=a CPUs=2 State=UNKNOWN") == 0


# ----------------------------------------------------------------------------- slurm.conf keys

def test_rendered_slurm_conf_has_pmix_contain_and_cgroup_tracking():
    text = role_file("slurm", "/etc/slurm/slurm.conf", conf=conf_of(), settings=SETTINGS)
    lines = settings_lines(text)
    for want in ("MpiDefault=pmix", "PrologFlags=Contain", "ProctrackType=proctrack/cgroup",
                 "TaskPlugin=task/cgroup,task/affinity"):
        assert want in lines
    assert "# MPI launch: PMIx" in text.splitlines()
    assert not any(line.startswith("MpiDefault=none") for line in lines)


def test_health_prolog_no_longer_writes_its_own_prolog_flags():
    health = {"health_enabled": True, "health_check_interval": 300,
              "health_check_node_state": "ANY", "health_slurm_prolog": True}
    text = role_file("slurm", "/etc/slurm/slurm.conf", conf=conf_of(health=health),
                            settings=SETTINGS)
    flags = [line for line in settings_lines(text) if line.startswith("PrologFlags=")]
    assert flags == ["PrologFlags=Contain"]  # Contain implies Alloc (slurm.conf(5))
    assert "Prolog=/usr/local/sbin/gpuinfra-health-prolog" in settings_lines(text)


def test_the_sites_prolog_flags_are_merged_after_contain():
    assert prolog_flags({"PrologFlags": "Alloc,Serial,contain"}) == ["Contain", "Alloc",
                                                                     "Serial"]
    assert extra_lines({"PrologFlags": "Serial", "MaxJobCount": 5}) == ["MaxJobCount=5"]


@pytest.mark.parametrize(("key", "value", "words"), [
    ("PrologFlags", "X11", "X11 forwarding stays off"),
    ("PrologFlags", "Alloc,NoHold", "NoHold cannot be combined with Contain"),
    ("DefMemPerGPU", 4096, "set slurm_def_mem_per_gpu"),
    ("DefCpuPerGPU", 4, "set slurm_def_cpu_per_gpu"),
    ("MpiDefault", "pmi2", "written by the slurm role"),
])
def test_extra_settings_the_role_writes_are_refused_with_where_to_set_them(key, value, words):
    assert words in extra_problem(key, value)
    assert CONF_EXTRA.problem({key: value}) is not None


# ----------------------------------------------------------------------------- the gate

def problems_of(*parts, **everywhere):
    site = copy.deepcopy(valid_site())
    partitions(*parts)(site)
    for _groups, data in site.values():
        data.update(everywhere)
    return spec_problems(hosts(site))


GOOD = {"name": "gpu", "nodes": ["gpu01", "gpu02"], "default": True}


def test_every_partition_key_in_its_format_passes_the_gate():
    assert problems_of({**GOOD, "max_time": "7-00:00:00", "default_time": 60,
                        "allow_accounts": ["ml"], "allow_groups": ["gpu_users"],
                        "qos": "high", "priority_tier": 65533, "oversubscribe": "YES:4",
                        "state": "INACTIVE", "def_mem_per_gpu": 0,
                        "def_cpu_per_gpu": 16},
                       # QOS and accounts live in the accounting database (issue 44)
                       slurm_accounting=True, slurm_accounts=["ml"]) == []


@pytest.mark.parametrize(("key", "value", "words", "allowed"), [
    ("max_time", "2 days", "not a Slurm time (MaxTime)", "days-hours"),
    ("max_time", "1:75:00", "not a Slurm time", "hours:minutes:seconds"),
    ("max_time", -5, "not a Slurm time", "UNLIMITED"),
    ("max_time", True, "not a Slurm time", "minutes"),
    ("default_time", "2-25", "not a Slurm time (DefaultTime)", "days-hours"),
    ("allow_accounts", "ml,vision", "must be a non-empty list of accounts", "names"),
    ("allow_groups", ["gpu users"], "not a Slurm group name", "no spaces"),
    ("qos", "high,low", "not a QOS name", "a name"),
    ("priority_tier", 70000, "PriorityTier", "0 to 65533"),
    ("priority_tier", "10", "PriorityTier", "0 to 65533"),
    ("oversubscribe", "SOMETIMES", "not an OverSubscribe value", "FORCE:<count>"),
    ("oversubscribe", "FORCE:0", "not an OverSubscribe value", "count 1..32767"),
    ("state", "OPEN", "not a partition State", "'DRAIN'"),
    ("def_mem_per_gpu", "16G", "not a count of megabytes per GPU", "0 (left out)"),
    ("def_cpu_per_gpu", -1, "not a count of CPUs per GPU", "0 (left out)"),
])
def test_a_bad_partition_value_is_refused_naming_field_value_allowed_and_fix(key, value, words,
                                                                             allowed):
    found = [p for p in problems_of({**GOOD, key: value})
             if p.field == f"slurm_partitions[0][{key!r}]"]
    assert len(found) == 1, [str(p) for p in problems_of({**GOOD, key: value})]
    problem = found[0]
    assert problem.host == "cluster" and problem.value == value
    assert words in problem.problem and "partition 'gpu'" in problem.problem
    assert allowed in problem.allowed
    assert "group_data/<site>.py" in problem.fix


def test_a_default_time_longer_than_the_max_time_is_refused():
    found = problems_of({**GOOD, "max_time": "1:00:00", "default_time": "2:00:00"})
    assert [(p.field, p.value) for p in found] == [("slurm_partitions[0]['default_time']",
                                                    "2:00:00")]
    assert "longer than its max_time" in found[0].problem


@pytest.mark.parametrize(("typed", "slurm_key"), [("MaxTime", "max_time"),
                                                  ("DefMemPerGPU", "def_mem_per_gpu"),
                                                  ("OverSubscribe", "oversubscribe"),
                                                  ("AllowAccounts", "allow_accounts")])
def test_a_key_written_as_slurm_spells_it_points_to_the_spec_key(typed, slurm_key):
    found = problems_of({**GOOD, typed: "x"})
    assert [p.fix for p in found] == [f"rename {typed!r} to {slurm_key!r}"]


@pytest.mark.parametrize(("value", "minutes"), [
    (90, 90), ("90", 90), ("5:30", 5.5), ("1:30:00", 90), ("2-12", 3600), ("1-01:30", 1530),
    ("1-00:00:30", 1440.5), ("UNLIMITED", float("inf")), ("infinite", float("inf")),
])
def test_slurm_time_formats(value, minutes):
    assert time_minutes(value) == minutes


@pytest.mark.parametrize("value", ["", "1-", "-1", "1:2:3:4", "1-2-3", "5:60", "1.5", "1d",
                                   None, 1.5, "1-24"])
def test_not_slurm_times(value):
    assert time_minutes(value) is None


# ----------------------------------------------------------------------------- the lab proof

def test_the_lab_proof_reads_the_per_gpu_share_and_job_memory_as_slurm_prints_them():
    conf = role_file("slurm", "/etc/slurm/slurm.conf", conf=conf_of(
        hardware={"lab-worker1": LAB_HW, "lab-worker2": LAB_HW}), settings=SETTINGS)
    assert expected_mem_per_gpu(conf, BOTH) == 2952
    assert expected_mem_per_gpu(conf, ["lab-worker2"]) == 11811
    assert tres_mem_mb("cpu=1,mem=2952M,node=1,billing=1,gres/gpu=1") == 2952
    assert tres_mem_mb("cpu=2,mem=23G,node=1") == 23552
    assert tres_mem_mb("cpu=1,node=1") is None


def test_the_lab_proof_reads_scontrol_show_config_and_show_job_as_slurm_prints_them():
    # scontrol show config of Slurm 22.05.8 in the lab: "key = value" padded
    config = ("MinJobAge               = 300 sec\nMpiDefault              = pmix\n"
              "MpiParams               = (null)\nPrologFlags             = Alloc,Contain\n")
    assert config_value(config, "MpiDefault") == "pmix"
    assert config_value(config, "PrologFlags") == "Alloc,Contain"
    assert config_value(config, "Mpi") == ""
    job = "JobId=2 JobName=wrap\n   JobState=RUNNING Reason=None\n   TRES=cpu=1,mem=2952M,node=1"
    assert field(job, "JobState") == "RUNNING" and field(job, "TRES") == "cpu=1,mem=2952M,node=1"
