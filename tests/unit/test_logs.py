"""Central logs as text (gpuinfra.logs.journal): sizes, the disk check, the query, the daemons'
files;
and the judging logic of the lab proof (gpuinfra_lab/central_logs.py)."""

from __future__ import annotations

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.logs.journal import (
    ACTIVE_FILE_BYTES,
    age_script,
    disk_problem,
    query,
    size_bytes,
    tunnel_conf,
    upload_dropin,
    vacuum_time,
)
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_lab.central_logs import arrival_problem, mode_problems

GIB = 1024 ** 3


def test_sizes_are_journalds_base_1024():
    assert size_bytes("4G") == 4 * GIB
    assert size_bytes("512M") == 512 * 1024 ** 2
    for bad in ("4GB", "4", "0G", "-1G", "4g", "4G\n", 4):
        with pytest.raises(GpuinfraError):
            size_bytes(bad)  # type: ignore[arg-type]


def test_retention_is_spelt_out_for_journalctl():
    assert vacuum_time("30d") == "30days"
    assert vacuum_time("12h") == "12h"
    assert vacuum_time("8w") == "8weeks"
    with pytest.raises(GpuinfraError):
        vacuum_time("30")


def test_the_cap_must_leave_15_percent_of_the_heads_disk_free():
    nodes = 10
    need = 4 * GIB + nodes * ACTIVE_FILE_BYTES
    fits = need * 100 // 85 + 100  # just over what the cap needs
    assert disk_problem(fits, "4G", nodes) is None
    problem = disk_problem(fits - 200, "4G", nodes)
    assert problem is not None and "logs_max_use = '4G' does not fit the head's disk" in problem
    assert "(10 x 128 MiB)" in problem and "15% must stay free" in problem


def test_the_one_line_query():
    assert query("gpu01", "2026-11-27 03:02", "2026-11-27 03:12") == (
        "journalctl --directory /var/log/journal/remote _HOSTNAME=gpu01 "
        "--since '2026-11-27 03:02' --until '2026-11-27 03:12'")


def test_stunnel_requires_a_client_certificate_of_the_logs_ca():
    text = file_text(tunnel_conf("10.0.0.1", 19532))
    assert "accept = 10.0.0.1:19532\nconnect = 127.0.0.1:19532\n" in text
    assert "CAfile = /etc/gpuinfra/logs/ca.crt\nverifyChain = yes\nrequireCert = yes\n" in text
    assert "foreground = quiet\nsetuid = stunnel4\n" in text
    with pytest.raises(GpuinfraError):
        tunnel_conf("10.0.0.1\nverifyChain = no", 19532)


def test_the_age_script_quotes_its_paths_and_lists_the_checked_names():
    assert file_text(age_script(["gpu01", "gpu-02"], "/var/lib/x y")) == (
        "#!/bin/sh\n"
        "# Managed by gpuinfra: local edits are overwritten on the next deploy.\n"
        "# Each node's newest journal entry on the head (gpuinfra_roles/logs).\n"
        "set -u\n"
        "tmp=$(mktemp '/var/lib/x y/.gpuinfra-logs.XXXXXX') || exit 1\n"
        "{\n"
        "  echo '# HELP gpuinfra_logs_last_entry_timestamp_seconds Newest journal entry of the "
        "node on the head (0: none).'\n"
        "  echo '# TYPE gpuinfra_logs_last_entry_timestamp_seconds gauge'\n"
        "  for node in gpu01 gpu-02; do\n"
        "    us=$(journalctl --directory=/var/log/journal/remote \"_HOSTNAME=$node\" -n 1 -o "
        "export 2>/dev/null | sed -n 's/^__REALTIME_TIMESTAMP=//p')\n"
        "    echo \"gpuinfra_logs_last_entry_timestamp_seconds{node=\\\"$node\\\"} "
        "$(( ${us:-0} / 1000000 ))\"\n"
        "  done\n"
        "} > \"$tmp\" && chmod 0644 \"$tmp\" && mv -f \"$tmp\" "
        "'/var/lib/x y/gpuinfra-logs.prom'\n")
    with pytest.raises(GpuinfraError, match="not a host name: 'a;b'"):
        age_script(["a;b"], "/x")


def test_the_uploader_never_gives_up():
    text = file_text(upload_dropin())
    assert "StartLimitIntervalSec=0" in text and "Restart=always" in text


def test_the_proof_judges_modes_and_arrivals():
    want = {"/k": "root:root 600"}
    assert mode_problems({"/k": "root:root 600"}, want) == []
    assert mode_problems({"/k": "root:root 644"}, want) == ["/k is root:root 644, not "
                                                             "root:root 600"]
    assert mode_problems({}, want) == ["/k is missing, not root:root 600"]
    assert arrival_problem("w1", "x", 1, 0.4) is None
    assert arrival_problem("w1", "x", 0, None) == "w1: its line x did not reach the head in 30 s"
    assert arrival_problem("w1", "x", 2, 0.4) == "w1: its line x is on the head 2 times, not once"


def test_the_report_gives_each_failed_node_its_query():
    from gpuinfra.spec import HostInput, build_cluster
    from gpuinfra_deploy.run.knobs import knobs_of
    from gpuinfra_verify import report

    junit = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="2">
 <testcase classname="gpuinfra_verify.test_logs" name="test_tls_files[gpu1]" time="0.1">
  <failure message="Failed: gpu1: key 0644">...</failure></testcase>
 <testcase classname="gpuinfra_verify.test_logs" name="test_tls_files[gpu2]" time="0.1"/>
</testsuite></testsuites>
"""
    hosts = [HostInput(name, (group,), {"node_address": f"10.0.0.{i}"})
             for i, (name, group) in enumerate((("head1", "head"), ("gpu1", "workers"),
                                                ("gpu2", "workers")), 1)]
    text, code = report.render(build_cluster(hosts, (), knobs_of(None)),
                               report.read_junit(junit), "x")
    lines = text.splitlines()
    at = lines.index("logs of the failed nodes, their last hour (run on the head):")
    assert lines[at + 1] == ("  journalctl --directory /var/log/journal/remote _HOSTNAME=gpu1 "
                             "--since -1h")
    assert lines[at + 2].startswith("verdict: FAILED")
    off = build_cluster([HostInput(h.name, h.groups, {**h.data, "logs_enabled": False})
                         for h in hosts], (), knobs_of(None))
    assert "_HOSTNAME" not in report.render(off, report.read_junit(junit), "x")[0]


def test_the_proof_reads_the_heads_metric():
    from gpuinfra_lab.central_logs import metric_problems

    text = ('# HELP x\ngpuinfra_logs_last_entry_timestamp_seconds{node="w1"} 1000\n'
            'gpuinfra_logs_last_entry_timestamp_seconds{node="w2"} 0\n1100\n')
    assert metric_problems(text, ["w1"]) == []
    assert metric_problems(text, ["w1", "w2", "w3"]) == [
        "w2: its newest entry on the head is 1100 s old", "w3: not in gpuinfra-logs.prom"]
    assert metric_problems("", ["w1"]) == ["no gpuinfra-logs.prom on the head"]
