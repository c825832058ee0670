"""The monitoring checks' judgements (gpuinfra_verify/monitoring_expect.py), each shown failing."""

from __future__ import annotations

from gpuinfra.monitoring.alerts import alerts
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.spec import HostInput
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_roles.monitoring.defaults import DEFAULTS
from gpuinfra_verify.monitoring_expect import (
    counts_by_instance,
    expected_targets,
    gpu_series_problems,
    rule_problems,
    target_problems,
)

SPEC = build_spec([
    HostInput("head1", ("head",), {"ssh_hostname": "10.0.0.1", "schedulers": ["slurm"]}),
    HostInput("gpu01", ("workers",), {"ssh_hostname": "10.0.0.2", "schedulers": ["slurm"],
                                      "gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
                                      "gpu_topology": "bridged-pairs"}),
])
MON = Monitoring.from_settings({**DEFAULTS, "monitoring_dcgm": True})


def active(health: dict[tuple[str, str], str]) -> list[dict]:
    return [{"labels": {"job": job, "instance": instance}, "health": state,
             "lastError": "" if state == "up" else "connection refused"}
            for (job, instance), state in health.items()]


def test_all_targets_up_passes_and_each_down_or_missing_one_is_named():
    expected = expected_targets(SPEC, MON)
    assert expected[("node", "gpu01")] == "10.0.0.2:9100"
    assert expected[("dcgm", "gpu01")] == "10.0.0.2:9400"
    assert ("dcgm", "head1") not in expected
    healthy = {key: "up" for key in expected}
    assert target_problems(expected, active(healthy)) == []
    broken = {**healthy, ("node", "gpu01"): "down"}
    del broken[("dcgm", "gpu01")]
    problems = target_problems(expected, active(broken))
    assert len(problems) == 2
    assert "DCGM" not in problems[0] and "Prometheus does not scrape dcgm" in problems[0]
    assert "node target 10.0.0.2:9100 is down: connection refused" in problems[1]
    assert "firewall" in problems[1]


def test_gpu_series_count_against_the_spec():
    assert gpu_series_problems(SPEC, {"gpu01": 2}, "gpuinfra_gpu_info", "collector") == []
    one = gpu_series_problems(SPEC, {"gpu01": 1}, "gpuinfra_gpu_info", "collector")
    assert "1 gpuinfra_gpu_info series, the spec has 2 GPUs" in one[0]
    assert "fell off the bus" in one[0]
    none = gpu_series_problems(SPEC, {}, "gpuinfra_gpu_info", "collector")
    assert "gpuinfra-gpu-metrics" in none[0]
    dcgm = gpu_series_problems(SPEC, {}, "DCGM_FI_DEV_GPU_TEMP", "dcgm")
    assert "DCGM is not running" in dcgm[0]


def test_rules_loaded_or_named():
    names = [a.name for a in alerts(SPEC, MON)]
    assert rule_problems(names, names) == []
    assert "GpuMissing" in rule_problems(names, [n for n in names if n != "GpuMissing"])[0]


def test_counts_by_instance_reads_a_query_result():
    result = [{"metric": {"instance": "gpu01"}, "value": [1700000000.0, "2"]}]
    assert counts_by_instance(result) == {"gpu01": 2}
