"""The head's Kubernetes GPUs (gpuinfra/monitoring/k8snodes.py, roles/monitoring/
kubernetes_nodes.py): the spec's expected resources, the verify suite's allocatable rule on
`kubectl get nodes -o json` (tests/fixtures/kubectl: gpu01's allocatable is gpu-operator#637's),
and the program as the role installs it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.health.collect import Output
from gpuinfra.kubernetes.deviceplugin import expected_resources
from gpuinfra.monitoring.k8snodes import expected, expected_json, gpus_text, parse_expected
from gpuinfra_deploy.run.inventory import load_hosts
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_node import reader
from tests.conftest import REPO

NODES = (REPO / "tests" / "fixtures" / "kubectl" / "nodes-gpu-node-not-ready-CONSTRUCTED.json")
# gpu01's allocatable in the capture (MIG mixed: two whole GPUs, 6 x 1g.10gb, 4 x 2g.20gb).
GPU01 = {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 6, "nvidia.com/mig-2g.20gb": 4}

sys.path.insert(0, str(REPO / "roles" / "monitoring"))
import kubernetes_nodes  # noqa: E402  (the head's program, as the role installs it)


def series(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def test_the_expected_resources_are_the_verify_suites_for_each_kubernetes_gpu_worker():
    hosts, duplicates = load_hosts(str(REPO / "inventory" / "k8s.py"))
    spec = build_spec(hosts, duplicates)
    wanted = expected(spec)
    workers = [n for n in spec.nodes if n.is_worker and n.gpus is not None]
    assert sorted(wanted) == sorted(n.short_name for n in workers) and wanted
    for node in workers:
        assert wanted[node.short_name] == expected_resources(node, spec.mig_strategy)
    assert parse_expected(expected_json(spec)) == wanted
    slurm = build_spec(*load_hosts(str(REPO / "inventory" / "lab.py")))
    assert expected(slurm) == {}


def test_each_node_is_judged_by_the_allocatable_rule():
    """gpu01 offers what it must (1); gpu02 offers no GPU (the device plugin's case, 0 with
    the rule's words); gpu03 is not in the cluster at all (0)."""
    wanted = {"gpu01": GPU01, "gpu02": {"nvidia.com/gpu": 2}, "gpu03": {"nvidia.com/gpu": 8}}
    text = gpus_text(Output(True, 0, NODES.read_text()), wanted, 1796640000.4)
    got = series(text)
    assert got['gpuinfra_kubernetes_node_gpus_ok{node="gpu01",problem=""}'] == 1
    assert got['gpuinfra_kubernetes_node_gpus_ok{node="gpu02",problem="no GPU is allocatable: '
               'nvidia.com/gpu: expected 2, allocatable 0"}'] == 0
    assert got['gpuinfra_kubernetes_node_gpus_ok{node="gpu03",problem="not in the cluster '
               '(kubectl get nodes does not list it)"}'] == 0
    assert got["gpuinfra_kubernetes_nodes_query_ok"] == 1
    assert got["gpuinfra_kubernetes_nodes_last_run_timestamp_seconds"] == 1796640000
    # A MIG layout the plugin did not apply: the rule names the MIG resources.
    wrong = gpus_text(Output(True, 0, NODES.read_text()),
                      {"gpu01": {"nvidia.com/mig-3g.40gb": 4}}, 0)
    assert "the MIG resources differ from the spec" in wrong and " 0\n" in wrong


@pytest.mark.parametrize("output", [None, Output(False, 1, "", "connection refused"),
                                    Output(True, 0, "{not json")])
def test_a_failed_or_unreadable_kubectl_gives_no_node_series(output):
    got = series(gpus_text(output, {"gpu01": GPU01}, 0))
    assert got["gpuinfra_kubernetes_nodes_query_ok"] == 0
    assert not [k for k in got if k.startswith("gpuinfra_kubernetes_node_gpus_ok")]


@pytest.mark.parametrize("text, said", [
    ("[1]", "not a JSON object"),
    ("{", "not JSON"),
    ('{"gpu01": {"cpu": 4}}', "node 'gpu01'"),
    ('{"gpu01": {"nvidia.com/gpu": -1}}', "node 'gpu01'"),
    ('{"gpu01": {"nvidia.com/gpu": true}}', "node 'gpu01'"),
])
def test_a_bad_expected_file_is_refused_naming_it(text, said):
    with pytest.raises(ParseError) as caught:
        parse_expected(text, "/etc/gpuinfra/kubernetes-gpus.json")
    assert str(caught.value).startswith("/etc/gpuinfra/kubernetes-gpus.json: ")
    assert said in str(caught.value)


def test_the_program_checks_the_staged_file_and_writes_the_series(tmp_path: Path, monkeypatch,
                                                                   capsys):
    """--check: exit 0 on the role's file, 2 naming a bad one (the role's gate before it goes
    live). A run: kubectl with the unit's --kubeconfig; without one, no kubectl and
    query_ok 0."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"gpu01": GPU01}))
    bad.write_text('{"gpu01": {"cpu": 4}}')
    assert kubernetes_nodes.main(["--check", "--expected", str(good)]) == 0
    assert kubernetes_nodes.main(["--check", "--expected", str(bad)]) == 2
    assert "bad.json: node 'gpu01'" in capsys.readouterr().err
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f'#!/bin/sh\necho "$@" > {calls}\ncat {NODES}\n')
    kubectl.chmod(0o755)
    monkeypatch.setattr(reader, "PATH", f"{bin_dir}:{reader.PATH}")
    out = tmp_path / "k8s.prom"
    assert kubernetes_nodes.main(["--out", str(out), "--expected", str(good)]) == 0
    assert "gpuinfra_kubernetes_nodes_query_ok 0" in out.read_text() and not calls.exists()
    assert "no --kubeconfig" in capsys.readouterr().err
    assert kubernetes_nodes.main(["--out", str(out), "--expected", str(good), "--kubeconfig",
                                  "/etc/kubernetes/admin.conf"]) == 0
    assert calls.read_text().split()[:2] == ["--kubeconfig", "/etc/kubernetes/admin.conf"]
    assert 'gpuinfra_kubernetes_node_gpus_ok{node="gpu01",problem=""} 1' in out.read_text()


def test_the_taint_controllers_trip_is_written_for_its_alert():
    """HealthBreakerTripped on a Kubernetes site: the head writes the trip annotation's node
    (gpuinfra.health.taint.TRIPPED) as gpuinfra_kubernetes_breaker_tripped{held}."""
    listed = json.loads(NODES.read_text())
    got = series(gpus_text(Output(True, 0, json.dumps(listed)), {}, 0))
    assert got['gpuinfra_kubernetes_breaker_tripped{held=""}'] == 0
    listed["items"][1]["metadata"]["annotations"] = {
        "gpuinfra.io/breaker-tripped": "1796640000: 1 GPU nodes tainted within 3600 s"}
    got = series(gpus_text(Output(True, 0, json.dumps(listed)), {}, 0))
    assert got['gpuinfra_kubernetes_breaker_tripped{held="gpu02"}'] == 1
    assert not [k for k in series(gpus_text(None, {}, 0)) if "breaker" in k]
