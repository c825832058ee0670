"""The whole deploy.py planned on a head and a GPU worker: what a failed head stops."""

from __future__ import annotations

from tests.plan.harness import DEPLOY, FakeHost, load_facts, plan_hosts

HEAD = FakeHost("head", ("head",), load_facts("base-fresh", "debian-12", "munge-fresh",
                                               "slurm-fresh"), {"ssh_hostname": "10.0.0.1"})
WORKER = FakeHost("gpu1", ("workers",),
                  load_facts("base-fresh", "debian-12", "gpu-fresh", "gpu-debian-12",
                             "munge-fresh", "slurm-fresh", "slurm-lab-worker1"),
                  {"ssh_hostname": "10.0.0.2", "gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
                   "gpu_topology": "nvswitch-all-to-all"})
SITE = {"cluster_name": "t", "nvidia_driver_kernel_headers": False,
        "fabric_manager_enabled": False, "container_toolkit_enabled": False}


def _changing(plan, prefix: str) -> list[str]:
    return [op.name for op in plan.changing if op.name.startswith(prefix)]


def test_with_the_head_up_the_worker_plans_munge_and_slurm():
    plan = plan_hosts(DEPLOY, [HEAD, WORKER], ["gpu1"], SITE).plans["gpu1"]
    assert _changing(plan, "munge |") and _changing(plan, "slurm |")


def test_a_failed_head_stops_the_scheduler_roles_everywhere_and_nothing_else():
    plan = plan_hosts(DEPLOY, [HEAD, WORKER], ["gpu1"], SITE, failed=["head"]).plans["gpu1"]
    assert _changing(plan, "munge |") == [] and _changing(plan, "slurm |") == []
    assert _changing(plan, "nvidia_driver |") and _changing(plan, "common |")
