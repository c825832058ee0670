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


def test_the_hosts_meet_where_one_needs_another_and_nowhere_else():
    """Each host runs at its own pace (gpuinfra_deploy/pyinfra_patches/schedule.py) except at
    a meeting: every operation of the roles that need the head, and the copies of files made
    on the head. A role of one host alone (the driver, the base packages) has none."""
    data = {**SITE, "logs_enabled": True}
    cluster = plan_hosts(DEPLOY, [HEAD, WORKER], ["gpu1"], data)
    names = {op for _, op in cluster.order}
    for role in ("munge |", "slurm |"):
        ours = {op for op in names if op.startswith(role)}
        assert ours and ours <= cluster.meetings, role
    # Slurm's and MUNGE's packages go in with the other roles' before the driver, each host
    # at its own pace (gpuinfra_deploy/run/ahead.py)
    ahead = cluster.position("gpu1", "packages | Install the packages")
    assert ahead < cluster.position("gpu1", "Install the NVIDIA driver")
    for role in ("common |", "packages |", "nvidia_driver |", "health |"):
        assert not {op for op in names if op.startswith(role)} & cluster.meetings, role
    copies = {op for op in names if "from the head" in op}
    assert copies and copies <= cluster.meetings  # the logs' client key and certificates
    assert any(op.startswith("logs |") and "public (0644)" in op for op in cluster.meetings)


def _longest_repeat(workers: int) -> int:
    """The most times one line of the deploy planned an operation on one host, when each
    repeat is told apart by pyinfra's suffix ("<hash>-0-1-..."), with ``workers`` workers."""
    from pyinfra.api.connect import connect_all

    from gpuinfra_deploy.plan import (
        answering,
        deploy_as_cli,
        fake_state,
        merge_facts,
        per_host_answerer,
    )
    from gpuinfra_deploy.pyinfra_patches import engine
    from tests.plan.harness import _addressed, entry

    monitored = load_facts("monitoring-fresh")  # monitoring's facts too: the whole deploy
    head = FakeHost(HEAD.name, HEAD.groups, merge_facts(HEAD.facts, monitored), HEAD.data)
    hosts = [_addressed(h, i) for i, h in enumerate(
        [head, *(FakeHost(f"gpu{i}", WORKER.groups, merge_facts(WORKER.facts, monitored),
                          {**WORKER.data, "ssh_hostname": f"10.0.1.{i}"})
                 for i in range(1, workers + 1))])]
    state, inventory = fake_state(hosts, SITE, connect=connect_all)
    engine.install()  # as a run plans (and pyinfra's inspect.stack() is slow under pytest)
    try:
        with answering(per_host_answerer({h.name: h.facts for h in hosts}, []), inventory):
            deploy_as_cli(state, entry(DEPLOY), list(inventory))
    finally:
        engine.uninstall()
    return max(op_hash.count("-") for ops in state.ops.values() for op_hash in ops)


def test_no_operation_is_repeated_once_per_node_on_one_host():
    """A role looping over the cluster's nodes on one host (the head makes each node's logs
    client pair) uses host.loop: pyinfra tells the Nth repeat of an operation's line apart
    by a suffix per earlier repeat, each looked up in the host's list of operations (cubic in
    the nodes: 10,000 workers did not plan in hours; bench/plan_scale.py)."""
    assert _longest_repeat(2) == _longest_repeat(5)
