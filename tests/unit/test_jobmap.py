"""The GPU job mapping (gpuinfra.monitoring.jobmap): what the Prolog and Epilog write, what
dcgm-exporter and the collector read, and the Epilog's summary line; and the head's Slurm node
states (gpuinfra.monitoring.slurmnodes)."""

from __future__ import annotations

import pytest

from gpuinfra.health.collect import Output
from gpuinfra.monitoring.gpumetrics import QUERIES, metrics_text
from gpuinfra.monitoring.jobmap import (
    JobMapError,
    JobRecord,
    after_epilog,
    after_prolog,
    holdings,
    job_gpus,
    record_for,
    summary_line,
)
from gpuinfra.monitoring.slurmnodes import node_states_text
from gpuinfra.monitoring.units import collector_service, dcgm_exporter_dropin
from gpuinfra.slurm.conf import health_lines
from gpuinfra_deploy.templates import text as file_text


def apply(files: dict[str, str], changes: dict[str, str | None]) -> dict[str, str]:
    out = dict(files)
    for name, text in changes.items():
        if text is None:
            out.pop(name, None)
        else:
            out[name] = text
    return out


def test_slurm_job_gpus():
    assert job_gpus("0,2") == (0, 2)
    assert job_gpus("3") == (3,)
    assert job_gpus("") == () and job_gpus(None) == ()
    assert job_gpus("1,x,1") == (1,)


def test_record_refuses_what_would_become_a_file_name_or_label():
    with pytest.raises(JobMapError, match="SLURM_JOB_ID"):
        record_for("../7", "alice", [0], 0)
    with pytest.raises(JobMapError, match="SLURM_JOB_USER"):
        record_for("7", 'al"ice', [0], 0)


def test_prolog_then_epilog_leaves_the_folder_as_it_was():
    """dcgm-exporter's format: one file per GPU index, one job id per line; a shared GPU lists
    both jobs; the epilog removes the id and an emptied file."""
    files: dict[str, str] = {}
    first = record_for("7", "alice", [0, 1], 100.0)
    files = apply(files, after_prolog(files, first))
    assert files["0"] == "7\n" and files["1"] == "7\n"
    assert JobRecord.from_text("7", files["jobs/7"]) == first
    second = record_for("8", "bob", [1], 110.0)
    files = apply(files, after_prolog(files, second))
    assert files["1"] == "7\n8\n"
    assert after_prolog(files, second) == {"jobs/8": second.text()}  # again: ids not repeated
    files = apply(files, after_epilog(files, "7"))
    assert files == {"1": "8\n", "jobs/8": second.text()}
    files = apply(files, after_epilog(files, "8"))
    assert files == {}
    assert after_epilog(files, "8") == {}


def test_holdings_name_job_and_user_per_gpu_and_nothing_for_idle_gpus():
    files = {"0": "7\n", "1": "7\n9\n", "jobs/7": record_for("7", "alice", [0, 1], 0).text(),
             "lock": "", "3": ""}
    held = [(h.gpu, h.job, h.user) for h in holdings(files)]
    assert held == [(0, "7", "alice"), (1, "7", "alice"), (1, "9", "")]


GPUS = ("0, GPU-a, NVIDIA H100 80GB HBM3, 00000000:19:00.0\n"
        "1, GPU-b, NVIDIA H100 80GB HBM3, 00000000:3B:00.0\n")


def collector_text(jobs) -> str:
    outputs = {q.name: Output(False, 1, "", "n/a") for q in QUERIES}
    outputs["gpus"] = Output(True, 0, GPUS)
    outputs["telemetry"] = Output(True, 0, "0, 40, 100.5, 87, 1000, 81559\n"
                                           "1, 40, 100.5, 3, 1000, 81559\n")
    return metrics_text(outputs, None, None, 1000.0, jobs)


def test_collector_series_per_gpu_held():
    text = collector_text(holdings({"1": "7\n", "jobs/7": record_for("7", "alice", [1],
                                                                     0).text()}))
    lines = [x for x in text.splitlines() if x.startswith("gpuinfra_gpu_job_info")]
    assert lines == ['gpuinfra_gpu_job_info{gpu="1",uuid="GPU-b",job_id="7",user="alice"} 1']
    assert "gpuinfra_gpu_job_info" not in collector_text([])


def test_epilog_summary_line():
    record = record_for("7", "alice", [0, 1], 1000.0)
    line = summary_line(record, "7", (0, 1), 1090.0, collector_text([]))
    assert line == ("job=7 user=alice gpus=0,1 seconds=90 last_utilization=0:87%,1:3% "
                    "mean=45% 90s before the end")
    assert summary_line(None, "8", (2,), 5.0, None) == (
        "job=8 user=? gpus=2 seconds=? last_utilization=unknown (no collector sample of "
        "these GPUs)")


def test_slurm_node_states():
    text = node_states_text(Output(True, 0, "w1|drained|gpu:8|proof\nw2|idle|gpu:2|none\n"
                                            "w3|down*|gpu:2|Not responding\n"), 60.4)
    assert 'gpuinfra_slurm_node_state{node="w1",state="drained",reason="proof"} 1' in text
    assert 'gpuinfra_slurm_node_state{node="w2",state="idle",reason=""} 1' in text
    assert 'gpuinfra_slurm_node_state{node="w3",state="down",reason="Not responding"} 1' in text
    assert "gpuinfra_slurm_nodes_query_ok 1" in text
    failed = node_states_text(Output(False, 1, "", "slurmctld down"), 0)
    assert "gpuinfra_slurm_nodes_query_ok 0" in failed
    assert "gpuinfra_slurm_node_state{" not in failed


def test_hooks_in_slurm_conf():
    health = {"health_enabled": True, "health_check_interval": 60,
              "health_check_node_state": "ANY", "health_slurm_prolog": True,
              "health_slurm_epilog": True}
    both = health_lines(health, job_mapping=True)
    assert "Prolog=/usr/local/sbin/gpuinfra-*-prolog" in both
    assert "Epilog=/usr/local/sbin/gpuinfra-*-epilog" in both
    assert "Prolog=/usr/local/sbin/gpuinfra-health-prolog" in health_lines(health)
    alone = health_lines({"health_enabled": False}, job_mapping=True)
    assert alone == ["Prolog=/usr/local/sbin/gpuinfra-gpujobs-prolog",
                     "Epilog=/usr/local/sbin/gpuinfra-gpujobs-epilog"]
    assert health_lines({"health_enabled": False}) == []


def test_units_read_the_mapping_folder():
    assert "--hpc-job-mapping-dir /run/gpuinfra-gpu-jobs" in file_text(dcgm_exporter_dropin(
        "10.0.0.1:9400", "/run/gpuinfra-gpu-jobs"))
    assert "hpc-job" not in file_text(dcgm_exporter_dropin("10.0.0.1:9400"))
    assert "--jobs /run/gpuinfra-gpu-jobs" in file_text(collector_service(
        "/lib", "/out.prom", "/t", jobs_dir="/run/gpuinfra-gpu-jobs"))
