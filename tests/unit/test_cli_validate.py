"""`gpuinfra validate` and the pyinfra spec gate, run as a user runs them (subprocesses)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

BIN = Path(sys.executable).parent
GOOD_WORKER = ('{"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, '
               '"gpu_topology": "nvswitch-all-to-all"}')


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def site(tmp_path: Path, body: str, name: str = "site") -> Path:
    """A throw-away project: inventory/<name>.py, plus the repo's config.py and deploy.py."""
    (tmp_path / "inventory").mkdir(exist_ok=True)
    (tmp_path / "group_data").mkdir(exist_ok=True)
    for f in ("config.py", "deploy.py"):
        (tmp_path / f).write_text((REPO / f).read_text())
    inv = tmp_path / "inventory" / f"{name}.py"
    inv.write_text(body)
    return inv


def test_example_and_lab_inventories_are_valid():
    for inv in ("inventory/example.py", "inventory/lab.py"):
        if not (REPO / inv).exists():
            continue
        out = run(str(BIN / "gpuinfra"), "validate", inv)
        assert out.returncode == 0, out.stderr
        assert "valid" in out.stdout


def test_invalid_site_exits_1_listing_every_problem(tmp_path):
    inv = site(tmp_path, 'head = ["h1", "h2"]\n'
               f'workers = [("w1", {{**{GOOD_WORKER}, "gpu_count": 3}})]\n')
    (tmp_path / "group_data" / "site.py").write_text('driver_branch = "999"\n')
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert out.returncode == 1
    for words in ("2 Slurm controllers", "[w1] gpu_count/gpu_topology", "driver_branch",
                  "fix:"):
        assert words in out.stderr
    assert "Traceback" not in out.stderr


def test_duplicate_host_in_inventory_file(tmp_path):
    inv = site(tmp_path, f'head = ["h1"]\nworkers = [("w1", {GOOD_WORKER}), ("w1", {{}})]\n')
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert out.returncode == 1 and "listed more than once" in out.stderr


@pytest.mark.parametrize(("body", "words"), [
    ("head = [\n", "syntax error"),
    ("import nonexistent_module_xyz\n", "ModuleNotFoundError"),
    ("raise RuntimeError('boom')\n", "boom"),
])
def test_broken_inventory_file_is_a_message_not_a_traceback(tmp_path, body, words):
    inv = site(tmp_path, body)
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert out.returncode == 2
    assert words in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("args", [
    ["validate", "inventory/does-not-exist.py"],
    ["validate", "README.md"],
    ["validate"],
    ["frobnicate"],
    ["check", "--profile", "pcie-only"],
    ["check", "--profile", "pcie-only", "--gpus", "two"],
])
def test_bad_cli_arguments_exit_2_without_traceback(args):
    out = run(str(BIN / "gpuinfra"), *args)
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr and out.stderr.strip()


def test_pyinfra_run_stops_before_connecting(tmp_path):
    """The gate in config.py: an invalid site stops pyinfra before it loads or connects.

    The hosts point at a closed loopback port, so even a gate that failed would contact
    nothing outside this machine; the output proves no connection was attempted.
    """
    inv = site(tmp_path, 'head = [("h1", {"ssh_hostname": "127.0.0.1", "ssh_port": 9}), '
               '("h2", {"ssh_hostname": "127.0.0.1", "ssh_port": 9})]\n')
    out = run(str(BIN / "pyinfra"), "-y", str(inv), "deploy.py", cwd=tmp_path)
    assert out.returncode == 1
    assert "2 Slurm controllers" in out.stderr and "no host was touched" in out.stderr
    assert "Connecting to hosts" not in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


LIMIT_SITE = ('head = [("h1", {"ssh_hostname": "127.0.0.1", "ssh_port": 9, '
              '"node_address": "10.0.0.1"})]\n'
              f'workers = [("w1", {{**{GOOD_WORKER}, "ssh_hostname": "127.0.0.1", '
              '"ssh_port": 9, "node_address": "10.0.0.2"})]\n')


@pytest.mark.parametrize(("args", "expected"), [
    (["--limit", "w1,w2"], "--limit 'w1,w2' matches no host and no group"),
    (["--limit", "w1", "--limit", "gpu*"], "--limit 'gpu*' matches no host"),
    (["--exclude", "w9"], "--exclude 'w9' matches no host"),
])
def test_a_limit_that_matches_nothing_stops_the_run(tmp_path, args, expected):
    """pyinfra only warns of a --limit or --exclude that matches nothing, and runs on no host
    (exit 0) or on every host: the gate stops before connecting, naming the pattern."""
    inv = site(tmp_path, LIMIT_SITE)
    out = run(str(BIN / "pyinfra"), "-y", str(inv), "deploy.py", *args, cwd=tmp_path)
    assert out.returncode == 1, out
    assert expected in out.stderr and "no host was touched" in out.stderr
    assert "Connecting to hosts" not in out.stdout + out.stderr
    if "," in args[1]:
        assert "--limit w1 --limit w2" in out.stderr


def test_a_limit_naming_a_host_or_group_is_let_through(tmp_path):
    inv = site(tmp_path, LIMIT_SITE)
    out = run(str(BIN / "pyinfra"), "-y", str(inv), "deploy.py", "--limit", "workers",
              "--limit", "h*", cwd=tmp_path)
    assert "matches no host" not in out.stderr
    assert "Connecting to hosts" in out.stdout + out.stderr


def test_pyinfra_data_override_is_validated(tmp_path):
    inv = site(tmp_path, f'head = ["h1"]\nworkers = [("w1", {GOOD_WORKER})]\n')
    out = run(str(BIN / "pyinfra"), "-y", str(inv), "deploy.py", "--data", "gpu_count=5",
              cwd=tmp_path)
    assert out.returncode == 1 and "hold 8 GPUs, not 5" in out.stderr


# ----------------------------------------------------------------------------- a site elsewhere

SITE_BODY = f'head = [("head01", {{"ssh_hostname": "10.0.0.1"}})]\n' \
            f'workers = [("gpu01", {{**{GOOD_WORKER}, "ssh_hostname": "10.0.0.2"}})]\n'


def test_a_site_in_its_own_repository_is_read_with_its_group_data_from_anywhere(tmp_path):
    """Started from another folder, validate still reads the site's group_data (the folder
    above inventory/): its bad value is found, not silently replaced by the default."""
    (tmp_path / "their-site").mkdir()
    inv = site(tmp_path / "their-site", SITE_BODY)
    (tmp_path / "their-site" / "group_data" / "all.py").write_text('driver_branch = "999"\n')
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "driver_branch = '999'" in out.stderr
    (tmp_path / "their-site" / "group_data" / "all.py").write_text('driver_branch = "535"\n')
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_a_group_data_that_cannot_be_found_is_an_error_never_silence(tmp_path):
    inv = tmp_path / "inventory" / "site.py"
    inv.parent.mkdir()
    inv.write_text(SITE_BODY)
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path / "inventory")
    assert out.returncode == 2
    assert "no group_data/ folder found" in out.stderr and "--group-data DIR" in out.stderr
    missing = run(str(BIN / "gpuinfra"), "validate", str(inv), "--group-data",
                  str(tmp_path / "nowhere"), cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere: no such group_data folder" in missing.stderr
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), "--no-group-data", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = tmp_path / "elsewhere" / "group_data"
    data.mkdir(parents=True)
    (data / "all.py").write_text('driver_branch = "999"\n')
    given = run(str(BIN / "gpuinfra"), "validate", str(inv), "--group-data", str(data),
                cwd=tmp_path)
    assert given.returncode == 1 and "driver_branch = '999'" in given.stderr


def test_validate_says_what_each_distribution_needs_for_the_schedulers(tmp_path):
    """The spec names no OS: validate says which distribution needs what (Ubuntu 22.04's
    Slurm 21.08: cgroup v1 and one reboot) for a Slurm site, and nothing for a site without
    Slurm."""
    inv = site(tmp_path, 'head = [("h1", {"node_address": "10.0.0.1"})]\n'
               f'workers = [("w1", {{**{GOOD_WORKER}, "node_address": "10.0.0.2"}})]\n')
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert ("note: Slurm on ubuntu-22.04: Slurm 21.08.5 has only the cgroup/v1 plugin"
            in out.stdout and "systemd.unified_cgroup_hierarchy=0" in out.stdout)
    (tmp_path / "group_data" / "site.py").write_text('schedulers = ["kubernetes"]\n')
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "note:" not in out.stdout and "valid" in out.stdout


def test_a_group_of_no_role_and_no_data_is_refused_before_any_host(tmp_path):
    """Issue 45 item 5: 'storage' (a role gpuinfra does not have) and 'worker' (a typo) would
    deploy nothing there; refused by `gpuinfra validate` and by pyinfra's gate, each named
    with its hosts and the fix; a group with a group_data file (even empty) is the site's."""
    body = (f'head = ["h1"]\nworkers = [("w1", {GOOD_WORKER})]\n'
            'storage = [("s1", {"ssh_hostname": "127.0.0.1", "ssh_port": 9})]\n'
            'worker = [("w2", {"ssh_hostname": "127.0.0.1", "ssh_port": 9})]\n')
    inv = site(tmp_path, body)
    for argv in ([str(BIN / "gpuinfra"), "validate", str(inv)],
                 [str(BIN / "pyinfra"), "-y", str(inv), "deploy.py"]):
        out = run(*argv, cwd=tmp_path)
        assert out.returncode in (1, 2), out
        assert "group 'storage' (s1) is none of gpuinfra's groups" in out.stderr, out.stderr
        assert "add group_data/storage.py (it may be empty)" in out.stderr
        assert "group 'worker' (w2)" in out.stderr and "rename it to 'workers'" in out.stderr
        assert "Traceback" not in out.stderr and "Connecting" not in out.stdout
    inv.write_text(f'head = ["h1"]\nworkers = [("w1", {GOOD_WORKER})]\nrack7 = ["w1"]\n')
    refused = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert "group 'rack7' (w1)" in refused.stderr
    (tmp_path / "group_data" / "rack7.py").write_text("")
    out = run(str(BIN / "gpuinfra"), "validate", str(inv), cwd=tmp_path)
    assert "rack7" not in out.stderr and "problem(s)" in out.stderr  # the spec is judged now
