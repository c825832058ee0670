"""`gpuinfra smoke script|check|manifest`, as users call them (logs: tests/unit/test_smoke.py's
CONSTRUCTED ones)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.unit.test_cli_nccl import HGX8, repo_cwd, run, site  # noqa: F401 (fixture)
from tests.unit.test_smoke import CRASHED, GOOD, NEVER_JOINED, nccl_log


def test_lab_gloo_script(capsys, repo_cwd):  # noqa: F811
    # --nodes 2: the same script whether or not a lab with a fleet (bench/fleet.py) is up
    code, out, err = run(capsys, "smoke", "script", "--inventory", "inventory/lab.py",
                         "--backend", "gloo", "--container", "/var/lib/gpuinfra/bundles/torch",
                         "--nodes", "2")
    assert code == 0, err
    assert "#SBATCH --partition=gpu" in out and "#SBATCH --nodes=2" in out
    assert "--container=/var/lib/gpuinfra/bundles/torch" in out
    assert "2 node(s) x 1 rank(s), gloo, partition gpu" in err


def test_lab_nccl_refuses_its_mixed_partition(capsys, repo_cwd):  # noqa: F811
    code, out, err = run(capsys, "smoke", "script", "--inventory", "inventory/lab.py")
    assert code == 2 and out == "" and "mixes GPU setups" in err


def test_example_site_nccl_leaves_mig_out(capsys, repo_cwd):  # noqa: F811
    code, out, err = run(capsys, "smoke", "script", "--inventory", "inventory/example.py")
    assert code == 0
    assert "#SBATCH --exclude=hgx02" in out and "#SBATCH --gres=gpu:h100-sxm5-80gb:8" in out
    assert "hgx02 left out" in err


@pytest.mark.parametrize(("log", "code", "words"), [
    (GOOD, 0, "PASS"),
    (NEVER_JOINED, 1, "lab-worker2: never joined"),
    (CRASHED, 1, "rank 1 on lab-worker2: exit code 1; RuntimeError"),
])
def test_check_exit_codes_and_causes(tmp_path, capsys, log, code, words):
    path = tmp_path / "smoke.out"
    path.write_text(log)
    got, out, _ = run(capsys, "smoke", "check", str(path))
    assert got == code and words in out
    got, out, _ = run(capsys, "smoke", "check", str(path), "--json")
    body = json.loads(out)
    assert got == code and body["kind"] == "smoke"
    assert body["verdict"] == ("pass" if code == 0 else "fail")


def test_check_unusable_input_exits_2(tmp_path, capsys):
    path = tmp_path / "other.out"
    path.write_text("hello\n")
    code, out, err = run(capsys, "smoke", "check", str(path))
    assert code == 2 and "not the smoke job's log" in err
    code, _, err = run(capsys, "smoke", "check", str(tmp_path / "missing.out"))
    assert code == 2 and "missing.out: cannot be read" in err


def test_check_with_the_spec_wants_ib_and_names_the_floor(tmp_path, monkeypatch, capsys):
    inv = site(tmp_path, monkeypatch, f'[("hgx01", {HGX8}), ("hgx02", {HGX8})]')
    (tmp_path / "ib.out").write_text(nccl_log("IB", 400.0))
    (tmp_path / "socket.out").write_text(nccl_log("Socket", 400.0))
    code, out, _ = run(capsys, "smoke", "check", "ib.out", "--inventory", inv,
                       "--nic-gbps", "400", "--json")
    body = json.loads(out)
    assert code == 0, body["causes"]
    assert body["min_busbw_gbytes_per_s"] == 387
    code, out, _ = run(capsys, "smoke", "check", "socket.out", "--inventory", inv,
                       "--nic-gbps", "400")
    assert code == 1 and "NCCL used TCP sockets" in out


def test_manifest_is_the_indexed_job(capsys):
    code, out, _ = run(capsys, "smoke", "manifest", "--image", "registry.example/torch:1",
                       "--gpus", "8", "--nodes", "4")
    objects = list(yaml.safe_load_all(out))
    assert code == 0 and [o["kind"] for o in objects] == ["Service", "Job"]
    assert objects[1]["spec"]["completions"] == 4


@pytest.mark.parametrize("sudo", [False, True])
def test_run_connects_as_asked(capsys, repo_cwd, monkeypatch, sudo):  # noqa: F811
    """Issue 48 item 4: `smoke run --sudo` runs sbatch on the head through sudo (the SSH user
    is not root); without it as the SSH user, and so does the first node's /etc/os-release
    read that picks the launcher (issue 49 item 5). A refused sbatch is said, exit 3."""
    import gpuinfra_cli.roll as roll

    made: list[bool] = []

    class Head:
        def __init__(self, target, sudo=False):
            made.append(sudo)

        def run(self, command, timeout=120):
            if "/etc/os-release" in command:
                return 0, "debian-12\n", ""
            return 1, "", "sbatch: error: Batch job submission failed: Invalid account"

        def try_run(self, command, timeout=30):
            return self.run(command, timeout)

        def close(self):
            pass

    monkeypatch.setattr(roll, "Ssh", Head)
    argv = ["smoke", "run", "--inventory", "inventory/lab.py", "--backend", "gloo",
            "--nodes", "2"] + (["--sudo"] if sudo else [])
    code, _, err = run(capsys, *argv)
    assert made == [sudo, sudo]  # the first node, then the head
    assert code == 3 and "sbatch on the head failed (exit 1): sbatch: error" in err
