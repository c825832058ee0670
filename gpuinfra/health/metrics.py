"""The health check's verdict as node_exporter textfile metrics (``gpuinfra-health.prom``).

    gpuinfra_health_ok 1|0                       the last check passed
    gpuinfra_health_failure{check,subject,cause} 1 per failed finding (at most 20)
    gpuinfra_health_drained{reason}              1 while gpuinfra has the node drained
    gpuinfra_health_check_seconds                how long the reading and verdict took
    gpuinfra_health_last_run_timestamp_seconds   when it ran

The alert rules (gpuinfra.monitoring.alerts) read them: a node gpuinfra drained, with its
reason as a label, and a check that stopped running.
"""

from __future__ import annotations

from gpuinfra.health.judge import Verdict, headline

MAX_FAILURES = 20  # a label per failed finding: bounded, so a broken node cannot flood Prometheus


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", " ").replace('"', '\\"')


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def metrics_text(verdict: Verdict, drained: str | None, seconds: float, now: float) -> str:
    lines = [
        "# HELP gpuinfra_health_ok 1 when the node's last health check passed",
        "# TYPE gpuinfra_health_ok gauge",
        f"gpuinfra_health_ok {1 if verdict.healthy else 0}",
        "# HELP gpuinfra_health_failure one series per failed finding of the last check",
        "# TYPE gpuinfra_health_failure gauge",
    ]
    for finding in verdict.failed[:MAX_FAILURES]:
        lines.append("gpuinfra_health_failure" + _labels(
            check=finding.check, subject=finding.subject, cause=headline(finding)[:200]) + " 1")
    lines += ["# HELP gpuinfra_health_drained 1 while the health check has the node drained in "
              "Slurm (reason: the drain reason)", "# TYPE gpuinfra_health_drained gauge"]
    if drained is not None:
        lines.append("gpuinfra_health_drained" + _labels(reason=drained[:200]) + " 1")
    lines += ["# HELP gpuinfra_health_check_seconds how long the last check took",
              "# TYPE gpuinfra_health_check_seconds gauge",
              f"gpuinfra_health_check_seconds {seconds:.3f}",
              "# HELP gpuinfra_health_last_run_timestamp_seconds when the check last ran",
              "# TYPE gpuinfra_health_last_run_timestamp_seconds gauge",
              f"gpuinfra_health_last_run_timestamp_seconds {round(now)}"]
    return "\n".join(lines) + "\n"
