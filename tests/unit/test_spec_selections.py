"""ClusterSpec's node selections (cached per spec: every host's plan asks for them) answer
exactly what a scan of the nodes answers."""

from __future__ import annotations

from gpuinfra.spec import HostInput
from gpuinfra_deploy.run.knobs import build_spec

SITE = {"schedulers": ["slurm", "kubernetes"], "scheduler_sharing": "drain"}


def _spec():
    gpu = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
           "gpu_topology": "nvswitch-all-to-all"}
    return build_spec([
        HostInput("head", ("head",), {**SITE, "node_address": "10.0.0.1"}),
        HostInput("w1", ("workers",), {**SITE, "node_address": "10.0.0.2",
                                       "node_schedulers": ["slurm"], **gpu}),
        HostInput("w2", ("workers",), {**SITE, "node_address": "10.0.0.3",
                                       "node_schedulers": ["kubernetes"], **gpu}),
        HostInput("w3", ("workers",), {**SITE, "node_address": "10.0.0.4"}),
    ])


def test_selections_equal_a_scan_of_the_nodes():
    spec = _spec()
    nodes = spec.nodes
    assert spec.head == tuple(n for n in nodes if n.is_head)
    assert spec.workers == tuple(n for n in nodes if n.is_worker)
    assert spec.gpu_nodes == tuple(n for n in nodes if n.gpus is not None)
    for scheduler in ("slurm", "kubernetes", "none"):
        assert spec.members(scheduler) == tuple(n for n in nodes if scheduler in n.schedulers)
        assert spec.workers_of(scheduler) == tuple(
            n for n in nodes if n.is_worker and scheduler in n.schedulers)
    assert [n.name for n in spec.workers_of("slurm")] == ["w1", "w3"]
    assert [n.name for n in spec.members("kubernetes")] == ["head", "w2", "w3"]


def test_each_selection_is_computed_once_per_spec():
    spec = _spec()
    assert spec.head is spec.head and spec.workers is spec.workers
    assert spec.workers_of("slurm") is spec.workers_of("slurm")
