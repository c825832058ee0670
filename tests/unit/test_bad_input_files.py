"""Broken inventory and group_data files, as `gpuinfra validate` and the pyinfra gate meet them.

The contract: a non-zero exit with a message naming the file (and line) and what was expected;
never a traceback, never a silent pass. The inventory is executed once per command.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

BIN = Path(sys.executable).parent
WORKER = '{"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"}'
# Hosts on a closed loopback port: a run that got past the gate would contact nothing else.
CLOSED = '"ssh_hostname": "127.0.0.1", "ssh_port": 9'
# (each with its cluster address: the loopback SSH address is not one)
GOOD = (f'head = [("h1", {{{CLOSED}, "node_address": "192.0.2.1"}})]\n'
        f'workers = [("w1", {{**{WORKER}, {CLOSED}, "node_address": "192.0.2.2"}})]\n')


def project(tmp_path: Path, inventory: str, group_data: dict[str, bytes | str] = ()) -> Path:
    """A throw-away project: inventory/site.py, group_data/*, the repo's config.py, deploy.py."""
    (tmp_path / "inventory").mkdir()
    (tmp_path / "group_data").mkdir()
    for f in ("config.py", "deploy.py"):
        (tmp_path / f).write_text((REPO / f).read_text())
    for name, body in dict(group_data).items():
        path = tmp_path / "group_data" / name
        path.write_bytes(body) if isinstance(body, bytes) else path.write_text(body)
    inv = tmp_path / "inventory" / "site.py"
    inv.write_text(inventory)
    return inv


def validate(inv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "gpuinfra"), "validate", "inventory/site.py"],
                          cwd=inv.parent.parent, capture_output=True, text=True, timeout=120)


def deploy(inv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "pyinfra"), "-y", "inventory/site.py", "deploy.py"],
                          cwd=inv.parent.parent, capture_output=True, text=True, timeout=120)


def refused(out: subprocess.CompletedProcess[str], *words: str) -> None:
    text = out.stdout + out.stderr
    assert out.returncode != 0, f"exit 0:\n{text}"
    assert "Traceback" not in text, text
    for word in words:
        assert word in text, f"{word!r} not in:\n{text}"
    assert "Connecting to hosts" not in text


BROKEN = {
    # (inventory, group_data, words every message must hold)
    "group-data-raises": (GOOD, {"site.py": "x = 1\nraise KeyError('no such rack')\n"},
                          ("group_data/site.py", "line 2", "KeyError", "no such rack")),
    "group-data-syntax": (GOOD, {"all.py": "schedulers = [\n"},
                          ("group_data/all.py", "line 1", "syntax")),
    "group-data-not-utf8": (GOOD, {"workers.py": b"cluster_name = '\xff\xfe'\n"},
                            ("group_data/workers.py", "UTF-8")),
    "json-style-hosts": (f'head = ["h1"]\nworkers = [["w1", {WORKER}]]\n', {},
                         ("inventory/site.py", "workers", "tuple")),
    "inventory-sys-exit": ("import sys\nsys.exit()\n", {},
                           ("inventory/site.py", "sys.exit")),
    "group-data-sys-exit": (GOOD, {"site.py": "import sys\nsys.exit(0)\n"},
                            ("group_data/site.py", "sys.exit")),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_validate_names_the_broken_file(tmp_path, case):
    inventory, group_data, words = BROKEN[case]
    refused(validate(project(tmp_path, inventory, group_data)), *words)


@pytest.mark.parametrize("case", ["group-data-raises", "json-style-hosts", "inventory-sys-exit",
                                  "group-data-not-utf8"])
def test_the_pyinfra_gate_names_the_broken_file(tmp_path, case):
    inventory, group_data, words = BROKEN[case]
    refused(deploy(project(tmp_path, inventory, group_data)), *words)


def test_nested_partition_list_is_a_spec_error_not_a_crash(tmp_path):
    inv = project(tmp_path, GOOD, {"all.py": "slurm_partitions = [{'name': 'gpu', "
                                             "'nodes': [['w1']]}]\n"})
    out = validate(inv)
    assert out.returncode == 1 and "unhashable" not in out.stderr
    refused(out, "slurm_partitions[0]['nodes']", "nested list")


COUNTER = ('import pathlib\n'
           'with pathlib.Path(__file__).with_name("runs").open("a") as _f:\n'
           '    _f.write("run\\n")\n')


def test_the_inventory_is_executed_once_per_command(tmp_path):
    inv = project(tmp_path, COUNTER + GOOD)
    runs = inv.with_name("runs")
    assert validate(inv).returncode == 0
    assert runs.read_text().count("run") == 1, "gpuinfra validate"
    runs.unlink()
    out = deploy(inv)  # passes the gate, then fails to connect to the closed port
    assert "Connecting to hosts" in out.stdout + out.stderr
    assert runs.read_text().count("run") == 1, "pyinfra deploy (gate + pyinfra's own load)"
