"""The JSON envelope (gpuinfra/envelope.py): its fields, verdicts and grouping by cause."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gpuinfra.envelope import SCHEMA, VERSION, envelope, group_by_cause, verdict
from gpuinfra.verdicts import Finding

REPO = Path(__file__).resolve().parents[2]


def _f(subject: str, severity: str, cause: str = "", fix: str = "") -> Finding:
    return Finding("nvlink", subject, "NV18", "NV0", severity, cause, fix)


def test_version_is_the_packages() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert VERSION == project["version"]


def test_one_cause_over_many_subjects() -> None:
    fabric = ("NVSwitch fabric not up", "start nvidia-fabricmanager")
    findings = [_f(f"GPU0-GPU{i}", "fail", *fabric) for i in range(1, 8)]
    findings += [_f("GPU0", "ok"), _f("GPU1", "warn", "slow", "look")]
    groups = group_by_cause(findings)
    assert [(g.cause, g.severity, len(g.subjects)) for g in groups] == [
        ("NVSwitch fabric not up", "fail", 7), ("slow", "warn", 1)]


def test_envelope_fields_and_verdicts() -> None:
    body = envelope("check", [_f("GPU0-GPU1", "fail", "c", "f"), _f("GPU0", "ok")],
                    host="hgx01", inputs=["topo.txt"], profile="hgx-8", model="H100-SXM")
    assert body["schema"] == SCHEMA and body["host"] == "hgx01"
    assert body["summary"] == {"ok": 1, "warn": 0, "fail": 1, "skipped": 0}
    assert body["verdict"] == "fail" and len(body["causes"]) == 1
    assert envelope("check", [_f("GPU0", "ok")])["verdict"] == "pass"
    assert envelope("check", [], skipped=3)["verdict"] == "not-checked"
    assert verdict({"ok": 0, "warn": 0, "fail": 0, "skipped": 5}) == "not-checked"


def test_extra_may_not_replace_a_common_field() -> None:
    with pytest.raises(ValueError, match="verdict"):
        envelope("check", [], extra={"verdict": "pass"})
