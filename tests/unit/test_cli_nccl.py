"""`gpuinfra nccl script` and `gpuinfra nccl check`, as users call them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuinfra_cli.main import main
from tests.conftest import REPO

NCCL = REPO / "tests" / "fixtures" / "nccl"
A3MEGA = NCCL / "2node-16x-h100-80gb-hbm3-gcp-a3mega-tcpxo-8G.txt"
A100 = NCCL / "1node-8x-a100-sxm4-80gb-nvswitch-g8-4G-UNRESOLVED-SOURCE.txt"
OCI_8G = NCCL / "2node-16x-a100-sxm4-40gb-oci-oke-rdma-8G.txt"
OCI = ("--profile", "nvswitch-all-to-all", "--model", "A100-SXM4-40GB")

HGX = ('{"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all", '
       '"rdma_nics": [{"name": "mlx5_0"}, {"name": "mlx5_1"}]}')
HGX8 = ('{"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all", '
        '"rdma_nics": [' + ", ".join(f'{{"name": "mlx5_{i}"}}' for i in range(8)) + ']}')
PLAIN_HGX = ('{"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, '
             '"gpu_topology": "nvswitch-all-to-all"}')


@pytest.fixture
def repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)  # pyinfra reads group_data/ from the current directory


def site(tmp_path: Path, monkeypatch, workers: str, group_data: str = "") -> str:
    """A throw-away site: inventory/<name>.py with one head and ``workers``, and its group_data.

    Each site gets its own file name: pyinfra caches loaded files by path."""
    name = "site_" + "".join(ch for ch in tmp_path.name if ch.isalnum())
    (tmp_path / "inventory").mkdir()
    (tmp_path / "group_data").mkdir()
    (tmp_path / "inventory" / f"{name}.py").write_text(
        f'head = ["head01"]\nworkers = {workers}\n')
    # Monitoring off: these sites name hosts only (no addresses), which the gate refuses with
    # monitoring on; the NCCL job does not depend on it.
    (tmp_path / "group_data" / f"{name}.py").write_text("monitoring_enabled = False\n"
                                                        + group_data)
    monkeypatch.chdir(tmp_path)
    return f"inventory/{name}.py"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------- script

def test_example_site_default_partition(capsys, repo_cwd):
    code, out, err = run(capsys, "nccl", "script", "--inventory", "inventory/example.py")
    assert code == 0, err
    for line in ("#SBATCH --partition=hgx", "#SBATCH --nodes=1", "#SBATCH --exclude=hgx02",
                 "#SBATCH --gres=gpu:h100-sxm5-80gb:8", "MIN_BUSBW=460"):
        assert line in out.splitlines(), line
    assert "hgx02 left out" in err and "MIG" in err
    assert "pass at busbw >= 460 GB/s" in err


def test_example_site_pcie_partition(capsys, repo_cwd):
    code, out, _ = run(capsys, "nccl", "script", "--inventory", "inventory/example.py",
                       "--partition", "pcie")
    assert code == 0
    assert "#SBATCH --gres=gpu:h100-pcie-80gb:4" in out and "MIN_BUSBW=49.8" in out
    assert "--exclude" not in out


@pytest.mark.parametrize(("args", "words"), [
    (["--partition", "nope"], "partitions: hgx, pcie"),
    (["--nodes", "2"], "has 1 eligible GPU node(s) (hgx01)"),
    (["--mpi", "pmix;id"], "--mpi"),
    (["--time", "tomorrow"], "--time"),
])
def test_example_site_refusals_exit_2(capsys, repo_cwd, args, words):
    code, out, err = run(capsys, "nccl", "script", "--inventory", "inventory/example.py", *args)
    assert code == 2 and out == ""
    assert words in err and "Traceback" not in err


def test_multi_node_needs_the_nic_rate(tmp_path, monkeypatch, capsys):
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {HGX}), ("hgx02", {HGX})]')
    code, _, err = run(capsys, "nccl", "script", "--inventory", inv)
    assert code == 2 and "--nic-gbps is required" in err and "2 RDMA NIC(s)" in err
    # 2 NICs of 400 Gb/s per 8x H100 node: no public measurement of that fabric, so the floor
    # is derived from the NICs (2 x 400 / 8 x 0.70), and the script and its note say so.
    code, out, err = run(capsys, "nccl", "script", "--inventory", inv, "--nic-gbps", "400")
    assert code == 0 and "MIN_BUSBW=70" in out and "# Floor (network): DERIVED, not measured" in out
    assert "note: no public measurement of this fabric" in err and "--min-busbw" not in out
    code, out, _ = run(capsys, "nccl", "script", "--inventory", inv, "--min-busbw", "350")
    assert code == 0
    assert "#SBATCH --partition=gpu" in out and "#SBATCH --nodes=2" in out
    assert "export NCCL_IB_HCA='=mlx5_0,mlx5_1'" in out and "MIN_BUSBW=350" in out


def test_measured_fabric_gets_its_floor_and_names_the_nvls_condition(tmp_path, monkeypatch,
                                                                     capsys):
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {HGX8}), ("hgx02", {HGX8})]')
    code, out, err = run(capsys, "nccl", "script", "--inventory", inv, "--nic-gbps", "400")
    assert code == 0, err
    assert "MIN_BUSBW=387" in out  # 10 % below nccl#1221's 430 GB/s on 8 x 400 Gb/s
    assert "# The floor assumes NVLink SHARP (NVLS) in use." in out
    assert "With NVLS off the floor is 297 GB/s" in out


def test_multi_node_without_rdma_needs_an_explicit_floor(tmp_path, monkeypatch, capsys):
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {PLAIN_HGX}), ("hgx02", {PLAIN_HGX})]')
    code, _, err = run(capsys, "nccl", "script", "--inventory", inv)
    assert code == 2 and "TCP sockets" in err and "--min-busbw" in err
    code, out, _ = run(capsys, "nccl", "script", "--inventory", inv, "--min-busbw", "20")
    assert code == 0 and "MIN_BUSBW=20" in out and "NCCL_IB_HCA" not in out


def test_mixed_partition_is_refused(tmp_path, monkeypatch, capsys):
    pcie = ('{"gpu_model": "H100-PCIE-80GB", "gpu_count": 4, '
            '"gpu_topology": "bridged-pairs"}')
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {HGX}), ("pcie01", {pcie})]')
    code, _, err = run(capsys, "nccl", "script", "--inventory", inv, "--nic-gbps", "400")
    assert code == 2 and "mixes GPU setups" in err
    assert "hgx01: 8x H100-SXM5-80GB" in err and "pcie01: 4x H100-PCIE-80GB" in err


def test_site_gres_type_override_is_used(tmp_path, monkeypatch, capsys):
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {PLAIN_HGX})]', 'slurm_gpu_type = "h100"\n')
    code, out, err = run(capsys, "nccl", "script", "--inventory", inv)
    assert code == 0 and "#SBATCH --gres=gpu:h100:8" in out, err


def test_invalid_spec_exits_1_with_every_problem(tmp_path, monkeypatch, capsys):
    bad = '{"gpu_model": "H100-SXM5-80GB", "gpu_count": 3, "gpu_topology": "nvswitch-all-to-all"}'
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {bad})]')
    code, out, err = run(capsys, "nccl", "script", "--inventory", inv)
    assert code == 1 and out == ""
    assert "problem(s)" in err and "[hgx01]" in err and "fix:" in err


def test_output_file(tmp_path, capsys, repo_cwd):
    target = tmp_path / "nccl.sbatch"
    code, out, err = run(capsys, "nccl", "script", "--inventory", "inventory/example.py",
                         "--output", str(target))
    assert code == 0 and out == ""
    assert target.read_text().startswith("#!/bin/bash\n#SBATCH --job-name=nccl-all-reduce\n")
    assert f"sbatch {target}" in err


# ---------------------------------------------------------------------------- check

def test_check_passes_a_healthy_log(capsys):
    code, out, _ = run(capsys, "nccl", "check", str(A100), "--profile", "nvswitch-all-to-all",
                       "--model", "A100-SXM4-80GB")
    assert code == 0
    assert "\nok    busbw" in out and ": PASS, 4 checks" in out


def test_check_fails_a_slow_log_with_cause_and_fix(capsys):
    code, out, _ = run(capsys, "nccl", "check", str(A3MEGA), "--profile", "nvswitch-all-to-all",
                       "--model", "H100-SXM5-80GB", "--nics", "8", "--nic-gbps", "400", "--json")
    assert code == 1
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    assert findings["busbw"]["severity"] == "fail" and "NET/Socket" in findings["busbw"]["cause"]
    assert findings["ranks"]["observed"] == "16 ranks on 2 node(s), 8 per node"


def test_multi_node_log_of_an_unmeasured_fabric_is_judged_never_refused(capsys):
    code, out, err = run(capsys, "nccl", "check", str(OCI_8G), *OCI, "--nics", "16",
                         "--nic-gbps", "100")
    assert code == 0, err
    assert "\nwarn  floor" in out and "none: derived from the NICs, 140 GB/s" in out
    assert "\nwarn  no public measurement of this fabric" in out and "Measured on similar" in out
    assert "\nok    busbw" in out and "(expected >= 140" in out
    assert "source: network: DERIVED, not measured" in out
    assert "237.73 GB/s at 8 GiB" in out


def test_a_log_of_another_shape_fails_naming_both_before_any_floor(capsys):
    """16 ranks on 2 nodes checked as 4 nodes: the shape fails first, naming the log's shape and
    the one asked, and busbw is not held to a floor meant for another run (no NIC options are
    needed to say so)."""
    code, out, err = run(capsys, "nccl", "check", str(OCI_8G), *OCI, "--nodes", "4", "--json")
    assert code == 1, err
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    ranks = findings["ranks"]
    assert (ranks["severity"], ranks["expected"], ranks["observed"]) == (
        "fail", "4 node(s)", "16 ranks on 2 node(s), 8 per node")
    assert findings["busbw"]["severity"] == "warn" and findings["busbw"]["expected"] == (
        "not judged")
    code, out, _ = run(capsys, "nccl", "check", str(OCI_8G), *OCI, "--nodes", "2", "--gpus", "4",
                       "--json")
    ranks = {f["check"]: f for f in json.loads(out)["findings"]}["ranks"]
    assert code == 1 and ranks["expected"] == "8 ranks on 2 node(s), 4 per node"


def test_a_node_with_fewer_ranks_is_named(capsys, monkeypatch):
    import io

    # DERIVED: the OCI log without its last rank line (a node that lost a GPU).
    lines = OCI_8G.read_text().splitlines(keepends=True)
    cut = "".join(line for line in lines if "Rank 15 " not in line)
    monkeypatch.setattr("sys.stdin", io.StringIO(cut))
    code, out, _ = run(capsys, "nccl", "check", "-", *OCI, "--json")
    ranks = {f["check"]: f for f in json.loads(out)["findings"]}["ranks"]
    assert code == 1 and ranks["observed"] == (
        "15 ranks on 2 node(s), nccl-allreduce-job0-mpiworker-0 8, "
        "nccl-allreduce-job0-mpiworker-1 7")
    assert "hides a GPU" in ranks["cause"]


def test_check_text_output_shows_cause_and_fix(capsys):
    code, out, _ = run(capsys, "nccl", "check", str(A100), "--profile", "nvswitch-all-to-all",
                       "--model", "A100-SXM4-80GB", "--max-size", "8G")
    assert code == 1
    assert "\nFAIL  sizes" in out and "\nFAIL  the sweep stopped" in out and "fix: run" in out


def test_check_reads_standard_input(capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(A100.read_text()))
    code, _, _ = run(capsys, "nccl", "check", "-", "--profile", "nvswitch-all-to-all",
                     "--model", "A100-SXM4-80GB")
    assert code == 0


@pytest.mark.parametrize(("args", "words"), [
    ([str(A100), "--profile", "mesh", "--model", "A100-SXM4-80GB"], "unknown topology profile"),
    ([str(A100), "--profile", "pcie-only", "--model", "A100X"], "unknown GPU model"),
    (["/nonexistent.log", "--profile", "pcie-only", "--model", "L40S"], "cannot be read"),
    (["log", "--profile", "pcie-only"], "give --profile and --model, or --inventory and --host"),
    ([str(REPO / "README.md"), "--profile", "pcie-only", "--model", "L40S"], "no result rows"),
    ([str(A3MEGA), "--profile", "nvswitch-all-to-all", "--model", "H100-SXM5-80GB"],
     "TCP sockets"),
    ([str(A3MEGA), "--profile", "nvswitch-all-to-all", "--model", "H100-SXM5-80GB", "--nics",
      "8"], "--nic-gbps is required"),
])
def test_check_unusable_input_exits_2(capsys, args, words):
    code, out, err = run(capsys, "nccl", "check", *args)
    assert code == 2 and out == ""
    assert words in err and "Traceback" not in err


@pytest.mark.parametrize("args", [
    ["nccl"],
    ["nccl", "check"],
    ["nccl", "check", "log", "--profile", "pcie-only", "--model", "L40S", "--nic-gbps", "1",
     "--min-busbw", "2"],
    ["nccl", "check", "log", "--profile", "pcie-only", "--model", "L40S", "--max-size", "lots"],
    ["nccl", "script"],
])
def test_bad_arguments_exit_2_with_a_hint(capsys, args):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert "--help" in capsys.readouterr().err


# ---------------------------------------------------------------------------- end to end

@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_generated_job_runs_and_its_diagnosis_command_agrees(tmp_path, monkeypatch, capsys):
    """Inventory -> script -> bash with a stub srun -> the log -> the check the job names."""
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {HGX8}), ("hgx02", {HGX8})]')
    code, _, err = run(capsys, "nccl", "script", "--inventory", inv, "--nic-gbps", "200",
                       "--output", "nccl.sbatch")
    assert code == 0, err
    (tmp_path / "bin").mkdir()
    srun = tmp_path / "bin" / "srun"
    srun.write_text(f"#!/bin/sh\ncat {shlex.quote(str(A3MEGA))}\n")
    srun.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "SLURM_JOB_ID": "42"}
    job = subprocess.run(["bash", "nccl.sbatch"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    # 2 nodes x 8 NICs x 200 Gb/s: the floor measured on that fabric (the fixture itself,
    # x 0.9); the fixture has 16 ranks where the spec says 2 x 8 = 16, so the job passes.
    assert job.returncode == 0, job.stdout
    assert "NCCL all_reduce PASS" in job.stdout
    hint = next(line for line in job.stdout.splitlines() if line.startswith("diagnosis: "))
    argv = shlex.split(hint.removeprefix("diagnosis: "))
    assert argv[:4] == ["gpuinfra", "nccl", "check", "nccl-all-reduce-42.log"]
    assert main(argv[1:]) == 0


def test_roce_nics_give_the_gid_index_and_their_rate_from_the_spec(tmp_path, monkeypatch,
                                                                    capsys):
    nics = ", ".join(f'{{"name": "mlx5_{i}", "link_layer": "ethernet", "rate_gbps": 400, '
                     f'"gid_index": 3, "ats": False}}' for i in range(8))
    node = ('{"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, '
            '"gpu_topology": "nvswitch-all-to-all", "rdma_nics": [' + nics + ']}')
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {node}), ("hgx02", {node})]')
    code, out, err = run(capsys, "nccl", "script", "--inventory", inv)  # no --nic-gbps
    assert code == 0, err
    assert "MIN_BUSBW=387" in out  # the spec's 400 Gb/s, as with --nic-gbps 400
    assert "export NCCL_IB_GID_INDEX=3" in out.splitlines()


def test_a_sweep_stopped_at_the_operators_max_size_is_not_a_short_sweep(capsys):
    """Issue 47: --max-size was ignored below 1 GiB (the V100 sweep, stopped at 128 MiB as
    asked, failed as "stopped before plateau"); now it reaches what was asked, and its busbw
    below the plateau is said, not judged against the plateau floor."""
    log = NCCL / "1node-4x-v100-pcie-32gb-old-format-error-column-128M.txt"
    argv = ["nccl", "check", str(log), "--profile", "pcie-only", "--model",
            "V100-PCIE-32GB", "--json"]
    code, out, _ = run(capsys, *argv)
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    assert findings["sizes"]["severity"] == "fail"  # no --max-size: the plateau minimum
    code, out, _ = run(capsys, *argv, "--max-size", "128M")
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    assert findings["sizes"]["severity"] == "ok"
    assert findings["busbw"]["severity"] == "warn" and "not judged" in findings["busbw"][
        "observed"]
    code, out, _ = run(capsys, *argv, "--max-size", "1G")  # asked more than it reached
    assert {f["check"]: f for f in json.loads(out)["findings"]}["sizes"]["severity"] == "fail"
