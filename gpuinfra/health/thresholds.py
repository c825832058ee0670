"""The GPU thresholds of the site's health policy, judged by the node health check (and so by the
verify suite, which judges the check's reading) with the same number the alert uses:

- temperature: ``temperature.gpu`` above ``monitoring_gpu_temperature_max`` (GpuTemperatureHigh's
  threshold, 85 C by default);
- ECC: uncorrectable ECC errors since the driver loaded (``ecc.errors.uncorrected.volatile
  .total``) above ``health_gpu_ecc_max`` (GpuUncorrectableEcc's threshold, 0 by default).

What each does is the site's (``health_gpu_temperature``, ``health_gpu_ecc``): "warn" (said in
the check's verdict, its metrics and the journal; the node keeps taking jobs), "drain" (the
check fails: drained with the cause, within the circuit breaker) or "off" (not read). Both warn
by default: a hot GPU throttles before it fails (a drain would empty a node over a passing
load peak), and a contained uncorrectable error (Xid 94) only ends the application that hit
it; the memory faults that need the GPU out (a row remap pending or failed, Xid 48/95) fail the
check already (gpuinfra.health.judge._remapped, the XID policy). The queries are the GPU metrics
collector's own (gpuinfra.monitoring.gpumetrics.QUERIES), so the alert and the check read the
same field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuinfra.health.collect import Output
from gpuinfra.monitoring.gpumetrics import QUERIES, parse_query
from gpuinfra.verdicts import Finding

ACTIONS = ("warn", "drain", "off")
TEMPERATURE_MAX = 85  # monitoring_gpu_temperature_max's default (roles/monitoring/defaults.py)
ECC_MAX = 0  # health_gpu_ecc_max's default: GpuUncorrectableEcc fires on any
_QUERY = {q.name: q for q in QUERIES}
TEMPERATURE = ("telemetry", "temperature.gpu")
ECC = ("ecc", "ecc.errors.uncorrected.volatile.total")


def commands(expect: Any) -> dict[str, tuple[str, ...]]:
    """The collector's queries the thresholds of ``expect`` (a gpuinfra.health.expectation
    .Expectation) read; none for an action "off"."""
    out = {}
    for (query, _), action in ((TEMPERATURE, expect.temperature_action),
                               (ECC, expect.ecc_action)):
        if action != "off":
            out[query] = tuple(_QUERY[query].command())
    return out


def _values(output: Output | None, query: str, field: str) -> dict[int, float]:
    """GPU index -> the field's number; nothing for a failed query or a field the GPU does not
    have (``[N/A]``, ``[Not Supported]``: no ECC on the board, nothing to judge)."""
    out = {}
    for row in parse_query(_QUERY[query], output) or []:
        value = row.fields.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[row.index] = float(value)
    return out


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


def findings(expect: Any, reading: Mapping[str, Output]) -> list[Finding]:
    """A finding per GPU past a threshold ("fail" when its action drains, else "warn"), and one
    "ok" per threshold read within it."""
    found: list[Finding] = []
    table = (
        ("temperature", TEMPERATURE, expect.temperature_action, expect.temperature_max,
         lambda v: f"{_number(v)} C", f"at most {expect.temperature_max} C",
         "the GPU runs hotter than the site's limit (monitoring_gpu_temperature_max): "
         "cooling (fans, airflow, inlet temperature, a blocked heat sink); hot GPUs throttle and "
         "fail sooner",
         "`nvidia-smi -q -d TEMPERATURE,PERFORMANCE` on the node (slowdown reasons); fix the "
         "cooling; GpuTemperatureHigh says the same"),
        ("ecc", ECC, expect.ecc_action, expect.ecc_max,
         lambda v: f"{_number(v)} uncorrectable ECC errors since the driver loaded",
         f"at most {expect.ecc_max} uncorrectable ECC errors",
         "the GPU's memory had uncorrectable errors (contained ones end only the application; "
         "the driver remaps the row at the next GPU reset)",
         "`nvidia-smi -q -d ECC,ROW_REMAPPER` on the node; drain and reset the idle GPU "
         "(`gpuinfra-health reset-gpu <gpu>`) or reboot; errors that come back: RMA the GPU"),
    )
    for check, (query, field), action, most, said, expected, cause, fix in table:
        if action == "off":
            continue
        values = _values(reading.get(query), query, field)
        over = {i: v for i, v in sorted(values.items()) if v > most}
        for index, value in over.items():
            found.append(Finding(check, f"GPU{index}", expected, said(value),
                                 "fail" if action == "drain" else "warn", cause, fix))
        if values and not over:
            found.append(Finding(check, "node", expected, expected, "ok"))
    return found
