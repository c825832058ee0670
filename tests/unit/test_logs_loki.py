"""Unit tests of gpuinfra/logs/loki.py: Loki's YAML, Alloy's config (its structure, and that no
value can leave the string it is written in), the retention rule, Grafana's provisioning.

Neither binary can be installed here (Grafana's repository is out of reach), so Alloy's syntax
is checked by a small reader of the subset the renderer writes: blocks, attributes, string
literals with Alloy's escapes, lists and objects, component references.
"""

from __future__ import annotations

import re

import pytest
import yaml

from gpuinfra.errors import GpuinfraError
from gpuinfra.logs.loki import (
    alloy_config,
    alloy_string,
    loki_config,
    loki_gate,
    loki_judged_marker,
    node_logs_dashboard,
    retention_hours,
    retention_problem,
    unavailable_nodes_query,
)
from gpuinfra_deploy.templates import text as file_text

# ------------------------------------------------------------------------------ Loki


def test_loki_config_is_yaml_with_the_head_address_retention_and_compactor():
    text = yaml.safe_dump(loki_config("10.0.0.1", 3100, "30d"), sort_keys=False)
    config = yaml.safe_load(text)
    assert config["auth_enabled"] is False
    assert config["server"] == {"http_listen_address": "10.0.0.1", "http_listen_port": 3100,
                                "grpc_listen_address": "127.0.0.1", "grpc_listen_port": 9095,
                                "log_level": "info"}
    assert config["common"]["path_prefix"] == "/var/lib/loki"
    assert "/tmp" not in text
    period = config["schema_config"]["configs"][0]
    assert (period["store"], period["schema"], period["index"]["period"]) == \
        ("tsdb", "v13", "24h")  # retention needs the 24h index period
    assert config["limits_config"]["retention_period"] == "720h"
    assert config["compactor"]["retention_enabled"] is True
    assert config["compactor"]["delete_request_store"] == "filesystem"  # Loki 3 needs it


@pytest.mark.parametrize(("value", "hours"), [("24h", 24), ("1d", 24), ("30d", 720),
                                              ("8w", 1344)])
def test_retention_hours(value, hours):
    assert retention_hours(value) == hours
    assert retention_problem(value) is None


@pytest.mark.parametrize("value", ["1h", "23h", "12h"])
def test_retention_under_a_day_is_refused(value):
    assert "at least 24h" in retention_problem(value)
    with pytest.raises(GpuinfraError, match="logs_loki: Loki keeps logs at least 24h"):
        loki_config("10.0.0.1", 3100, value)


def test_an_ipv6_head_is_bracketed_in_urls():
    assert 'url = "http://[fd00::1]:3100/loki/api/v1/push"' in \
        file_text(alloy_config("gpu01", "fd00::1", 3100))


# ------------------------------------------------------------------------------ Alloy

_STRING = r'"(?:[^"\\\n]|\\.)*"'


def read_string(literal: str) -> str:
    """The value of an Alloy string literal (the escapes the renderer may write)."""
    assert re.fullmatch(_STRING, literal), literal
    return re.sub(r"\\(.)", r"\1", literal[1:-1])


def structure(text: str) -> list[tuple[int, str, str | None]]:
    """(depth, block name, label) of every block; asserts each line is a comment, a blank, a
    block opening, a closing brace or one ``name = value`` attribute, that braces balance and
    that every string literal on a line is whole."""
    blocks, depth = [], 0
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        outside = re.sub(_STRING, '""', stripped)
        assert '"' not in outside.replace('""', ""), f"a string left open: {line!r}"
        opening = re.fullmatch(rf"([a-z][a-z0-9_.]*)(?: ({_STRING}))? \{{", stripped)
        if opening:
            blocks.append((depth, opening[1],
                           read_string(opening[2]) if opening[2] else None))
            depth += 1
        elif stripped == "}":
            depth -= 1
            assert depth >= 0, line
        else:
            assert re.fullmatch(r"[a-z_]+ = .+", stripped), f"not an attribute: {line!r}"
            assert outside.count("{") == outside.count("}") and \
                outside.count("[") == outside.count("]"), line
    assert depth == 0
    return blocks


def test_alloy_config_blocks_and_references():
    text = file_text(alloy_config("gpu01", "10.0.0.1", 3100))
    assert text.startswith("// Managed by gpuinfra")
    assert structure(text) == [(0, "loki.relabel", "journal"), (1, "rule", None),
                               (0, "loki.source.journal", "journal"),
                               (0, "loki.write", "head"), (1, "endpoint", None)]
    # Each component reference names a block of the file (component.label.export).
    declared = {(name, label) for depth, name, label in structure(text) if depth == 0}
    for ref in re.findall(r"(loki\.[a-z.]+)\.([a-z]+)\.(receiver|rules)\b", text):
        assert (ref[0], ref[1]) in declared, ref
    assert 'source_labels = ["__journal__systemd_unit"]' in text
    assert 'target_label = "unit"' in text
    assert 'labels = {host = "gpu01"}' in text
    assert 'max_age = "12h"' in text


def test_alloy_strings_escape_quotes_and_backslashes():
    assert alloy_string('a"b') == '"a\\"b"'
    assert alloy_string("a\\b") == '"a\\\\b"'
    assert read_string(alloy_string('x" } evil { "')) == 'x" } evil { "'
    # A value that tries to close the string and open a block stays one string.
    text = file_text(alloy_config('gpu01" } loki.write "x', "10.0.0.1", 3100))
    assert structure(text)[2] == (0, "loki.source.journal", "journal")
    assert len(structure(text)) == 5
    assert 'labels = {host = "gpu01\\" } loki.write \\"x"}' in text


@pytest.mark.parametrize("value", ["gpu01\nloki.write", "a\rb", "tab\there", "nul\x00"])
def test_alloy_strings_refuse_control_characters(value):
    with pytest.raises(GpuinfraError, match="a value Alloy's config cannot hold"):
        alloy_string(value)
    with pytest.raises(GpuinfraError, match="control character"):
        alloy_config(value, "10.0.0.1", 3100)


def test_lokis_start_gate_waits_for_the_marker():
    assert file_text(loki_gate()) == (
        "# Managed by gpuinfra: local edits are overwritten on the next deploy.\n"
        "# Loki starts only on the configuration the logs role judged (loki -verify-config):\n"
        "# the package's own start after its install, on its default file, is skipped.\n"
        "[Unit]\nConditionPathExists=/etc/loki/.gpuinfra-judged\n")
    assert file_text(loki_judged_marker()) == (
        "# Managed by gpuinfra: local edits are overwritten on the next deploy.\n"
        "# /etc/loki/config.yml went live after loki -verify-config judged it (logs role); "
        "/etc/systemd/system/loki.service.d/gpuinfra-judged.conf starts Loki only while this "
        "file exists.\n")


# ------------------------------------------------------------------------------ Grafana

def test_the_dashboard_lists_down_and_drained_nodes_and_their_logs():
    assert unavailable_nodes_query(False) == 'up{job="node"} == 0'
    slurm = unavailable_nodes_query(True)
    assert slurm.startswith('up{job="node"} == 0 or label_replace(gpuinfra_slurm_node_state{')
    board = node_logs_dashboard("lab", "gpuinfra-prometheus", True)
    variable = board["templating"]["list"][0]
    assert variable["query"]["query"] == f"label_values({slurm}, instance)"
    assert variable["datasource"]["uid"] == "gpuinfra-prometheus"
    assert board["panels"][0]["targets"][0]["expr"] == '{host=~"${node:regex}", host!=""}'
