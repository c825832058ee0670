"""Where a role applies is decided once: each role's entry file (roles/<role>/deploy.py)
plans, on every host of a site, exactly the operations deploy.py plans for that role.

The site: a Slurm head, a GPU worker, a Kubernetes-only worker's stand-in is in the test below
(the slurm and munge entry files alone plan nothing there), a hypervisor and an RDMA GPU node
outside any scheduler, each on its recorded facts (tests/plan/facts/).
"""

from __future__ import annotations

import pytest

from gpuinfra_deploy.run.knobs import role_names
from tests.conftest import deploy_roles
from tests.plan.harness import DEPLOY, REPO, FakeHost, load_facts, plan_hosts, upload_text
from tests.plan.test_rdma_plan import GPU_NODE, NIC, firmware
from tests.plan.test_vfio_plan import HV_SPEC, pci

GPU = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}
SITE = {"cluster_name": "t", "nvidia_driver_kernel_headers": False}


def _hypervisor() -> FakeHost:
    facts = load_facts("base-fresh", "debian-12", "monitoring-fresh", "vfio-fresh",
                       "munge-fresh", "slurm-fresh")
    facts["gpuinfra_deploy.facts.pci.PciFunctions"] = pci("fresh")
    return FakeHost("kvm1", ("hypervisors",), facts,
                    {**HV_SPEC, "ssh_hostname": "10.0.0.3"})


def _rdma_node() -> FakeHost:
    facts = load_facts("base-fresh", "debian-12", "monitoring-fresh", "gpu-fresh",
                       "gpu-debian-12", "rdma-gpu-node-SYNTHESIZED", "munge-fresh", "slurm-fresh",
                       "slurm-lab-worker2")
    facts["gpuinfra_roles.rdma.facts.FirmwareAts"] = {"pci=0000:04:00.0": firmware(False)}
    return FakeHost("ib1", ("workers",), facts, {**GPU_NODE, "rdma_nics": [NIC],
                                       "gpu_sharing": {"mode": "mps", "clients": 4},
                                       "ssh_hostname": "10.0.0.4"})


HOSTS = [
    FakeHost("head", ("head",), load_facts("base-fresh", "debian-12", "monitoring-fresh",
                                           "munge-fresh", "slurm-fresh"),
             {"ssh_hostname": "10.0.0.1"}),
    FakeHost("gpu1", ("workers",), load_facts("base-fresh", "debian-12", "monitoring-fresh",
                                              "gpu-fresh", "gpu-debian-12", "munge-fresh",
                                              "slurm-fresh", "slurm-lab-worker1"),
             {**GPU, "ssh_hostname": "10.0.0.2"}),
    _hypervisor(),
    _rdma_node(),
]
TARGETS = [h.name for h in HOSTS]


@pytest.fixture(scope="module")
def whole():
    return plan_hosts(DEPLOY, HOSTS, TARGETS, SITE)


def _norm(op) -> tuple[str, tuple[str, ...]]:
    """An operation as name and commands, an upload shown by the text it sends."""
    return op.name, tuple(f"upload {upload_text(c.src)!r} to {c.dest}" if hasattr(c, "src")
                          else text for c, text in zip(op.raw, op.commands, strict=True))


def _of(plan, role: str) -> list[tuple[str, tuple[str, ...]]]:
    return [_norm(op) for op in plan.ops if op.name.startswith(f"{role} |")]


@pytest.mark.parametrize("role", role_names())
def test_the_entry_file_plans_what_deploy_py_plans_for_its_role(role, whole):
    alone = plan_hosts(REPO / "roles" / role / "deploy.py", HOSTS, TARGETS, SITE)
    for host in TARGETS:
        assert [_norm(op) for op in alone.plans[host].ops] == \
            _of(whole.plans[host], role), host


def test_deploy_py_runs_every_role_once():
    """A role folder that deploy.py's ROLES does not name is never deployed; a name twice
    would run the role twice."""
    named = deploy_roles()
    assert [f"roles/{r}: no line in deploy.py's ROLES" for r in role_names()
            if r not in named] == []
    assert sorted(named) == list(role_names()), "deploy.py's ROLES: each role folder once"


def test_every_role_applies_somewhere_on_this_site(whole):
    """The comparison above means something for every role: each plans on some host."""
    planned = {op.name.split(" |")[0] for plan in whole.plans.values() for op in plan.ops}
    nowhere = sorted(set(role_names()) - planned - {"kubernetes", "containerd"})
    assert nowhere == [], f"{nowhere} plan nothing on any host of HOSTS: add a host they apply to"


@pytest.mark.parametrize("role", ["munge", "slurm"])
def test_slurm_roles_alone_plan_nothing_on_a_kubernetes_only_worker(role):
    """Run alone, the Slurm roles stay off a worker whose node_schedulers leave Slurm out (the
    entry files once called the role on every host: slurmd on a Kubernetes-only worker)."""
    k8s = FakeHost("k8s1", ("workers",), {}, {"ssh_hostname": "10.0.0.5",
                                              "node_schedulers": ["kubernetes"]})
    site = {**SITE, "schedulers": ["slurm", "kubernetes"]}
    gpu1 = FakeHost("gpu1", HOSTS[1].groups, HOSTS[1].facts,
                    {**HOSTS[1].data, "node_schedulers": ["slurm"]})
    result = plan_hosts(REPO / "roles" / role / "deploy.py", [HOSTS[0], gpu1, k8s],
                        ["k8s1", "gpu1"], site)
    assert result.plans["k8s1"].ops == ()  # and no fact of it was asked for (it has none)
    assert result.plans["gpu1"].changing
