"""Issue 27 (CLI half): `check`, `nccl check` and `perftest check` give output a person can
paste into a ticket and JSON a program can read (the envelope); every capture option reads
standard input; a capture of the wrong command is refused naming the command it looks like."""

from __future__ import annotations

import io
import json

import pytest

from gpuinfra_cli.main import main
from tests.conftest import REPO

FIX = REPO / "tests" / "fixtures"
REAL = FIX / "real"
TOPO_H100 = REAL / "nvidia-smi-topo-m/8x-h100-sxm-nv18-no-nics-spaces.txt"
P2P_H100 = REAL / "nvidia-smi-topo-p2p/8x-h100-80gb-hbm3-p2p-r-all-OK.txt"
SMIQ_H100 = REAL / "nvidia-smi-q/8x-h100-80gb-hbm3-bare-metal-drv535.161.08-full-q.txt"
ALL_SYS = REAL / "nvidia-smi-topo-m/8x-pcie-gpu-all-sys-2-numa-no-nics.txt"
IBSTAT = REAL / "ibstat/kaust-ibex-login-connectx6-hdr100-rate100.txt"
HGX = ["check", "--profile", "nvswitch-all-to-all", "--gpus", "8", "--model", "H100-SXM5-80GB"]


def _stdin(monkeypatch, path) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(path.read_text()))


# ---------------------------------------------------------------------------- wrong kind, stdin

def test_an_ibstat_file_given_to_topo_is_named(capsys):
    assert main([*HGX, "--topo", str(IBSTAT)]) == 2
    err = capsys.readouterr().err
    assert err == (f"gpuinfra: {IBSTAT}: this looks like `ibstat` output, not "
                   "`nvidia-smi topo -m`\n")


@pytest.mark.parametrize("argv", [
    ["nccl", "check", str(IBSTAT), "--profile", "pcie-only", "--model", "L40S"],
    ["perftest", "check", str(IBSTAT), "--nic-gbps", "100"],
    ["check", "gpu-pods", str(IBSTAT)],
    ["check", "--ibv-devinfo", str(IBSTAT), "--nic", "mlx5_0"],
])
def test_every_command_names_the_wrong_capture(argv, capsys):
    assert main(argv) == 2
    assert "this looks like `ibstat` output" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--topo", "--p2p", "--smi-q"])
def test_check_reads_any_capture_option_from_stdin(option, monkeypatch, capsys):
    files = {"--topo": TOPO_H100, "--p2p": P2P_H100, "--smi-q": SMIQ_H100}
    argv = [*HGX]
    for name, path in files.items():
        given = "-" if name == option else str(path)
        argv += [name, f"r:{given}" if name == "--p2p" else given]
    _stdin(monkeypatch, files[option])
    assert main(argv) == 0, capsys.readouterr()


def test_two_options_from_stdin_is_a_clear_error(monkeypatch, capsys):
    _stdin(monkeypatch, TOPO_H100)
    assert main([*HGX, "--topo", "-", "--smi-q", "-"]) == 2
    assert "only one capture can come from standard input ('-'): --topo and --smi-q" in \
        capsys.readouterr().err


# ---------------------------------------------------------------------------- ticket text

def _widest(text: str) -> int:
    return max(map(len, text.splitlines()))


def test_a_healthy_hgx_is_one_line_per_check(capsys):
    assert main([*HGX, "--topo", str(TOPO_H100), "--p2p", f"r:{P2P_H100}",
                 "--smi-q", str(SMIQ_H100), "--host", "hgx01"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "hgx01 (8x H100-SXM5-80GB, nvswitch-all-to-all): PASS, 67 checks"
    assert "ok    nvlink-topology  28 pairs: NV18 (expected NV>=18)" in out
    assert len(out.splitlines()) == 7 and _widest(out) <= 100  # was 69 lines, 122 columns


def test_a_whole_fabric_failure_is_one_cause_over_all_pairs_no_bridge(capsys):
    assert main(["check", "--profile", "nvswitch-all-to-all", "--gpus", "8",
                 "--topo", str(ALL_SYS)]) == 1
    out = capsys.readouterr().out
    assert out.count("\nFAIL  ") == 2  # the pairs' row and the one cause (was 28 blocks)
    assert "FAIL  nvlink-topology  all 28 pairs: SYS" in out
    assert "\nFAIL  NVSwitch fabric not up" in out and "on:  nvlink-topology: all 28 pairs" in out
    assert "bridge" not in out and _widest(out) <= 100


def test_the_matrix_shows_what_each_pair_saw(capsys):
    boards = FIX / "boards"
    assert main(["check", "--profile", "fixed-mesh", "--gpus", "8", "--model", "V100-SXM2-32GB",
                 "--topo", str(boards / "dgx1-8x-v100-sxm2-32gb-gpu3-nvlinks-down-SYNTHESIZED-"
                                         "topo-m.txt"), "--matrix"]) == 1
    out = capsys.readouterr().out
    assert "  GPU3 NODE NODE  PIX    X    -    -    -  SYS" in out
    assert "  GPU0    X    .    . NODE    .    -    -    -" in out


@pytest.mark.parametrize("argv", [
    ["nccl", "check", str(FIX / "nccl/2node-16x-h100-80gb-hbm3-gcp-a3mega-tcpxo-8G.txt"),
     "--profile", "nvswitch-all-to-all", "--model", "H100-SXM5-80GB", "--nics", "8",
     "--nic-gbps", "200"],
    ["perftest", "check", *map(str, sorted((FIX / "perftest").glob("*.txt"))),
     "--nic-gbps", "200"],
])
def test_nccl_and_perftest_tables_fit_100_columns_with_the_source_apart(argv, capsys):
    main(argv)
    out = capsys.readouterr().out
    assert _widest(out) <= 100  # were 274 and 317
    assert "\n" in out and any(line.lstrip().startswith("source: ") for line in out.splitlines())


# ---------------------------------------------------------------------------- JSON envelope

ENVELOPE = {"schema", "tool", "kind", "host", "inputs", "profile", "model", "summary", "verdict",
            "causes", "findings"}


@pytest.mark.parametrize(("argv", "kind", "verdict"), [
    ([*HGX, "--topo", str(TOPO_H100), "--host", "hgx01"], "check", "pass"),
    (["check", "--profile", "nvswitch-all-to-all", "--gpus", "8", "--topo", str(ALL_SYS)],
     "check", "fail"),
    (["check", "--ibstat", str(IBSTAT), "--nic", "mlx5_0:rate=100"], "check", "pass"),
    (["check", "gpu-pods", str(FIX / "kubectl/pods-device-plugin-running-k8s-device-plugin-"
                                     "1400.txt")], "check", "pass"),
    (["check", "plugin-log", str(FIX / "kubectl/device-plugin-log-incompatible-strategy-k8s-"
                                       "device-plugin-1220.txt")], "check", None),
    (["nccl", "check", str(FIX / "nccl/1node-8x-a100-sxm4-80gb-nvswitch-g8-4G-UNRESOLVED-"
                                 "SOURCE.txt"), "--profile", "nvswitch-all-to-all", "--model",
      "A100-SXM4-80GB"], "nccl", "pass"),
    (["perftest", "check", str(sorted((FIX / "perftest").glob("*.txt"))[0]), "--nic-gbps",
      "200"], "perftest", "fail"),
])
def test_every_json_is_the_envelope(argv, kind, verdict, capsys):
    code = main([*argv, "--json"])
    env = json.loads(capsys.readouterr().out)
    assert set(env) >= ENVELOPE and env["kind"] == kind and env["schema"] == "gpuinfra/v1"
    assert env["inputs"] and all(isinstance(i, str) for i in env["inputs"])
    assert env["verdict"] == (verdict or env["verdict"])
    assert {0: "pass", 1: "fail", 3: "not-checked"}[code] == env["verdict"]  # one answer


def test_a_cut_capture_is_not_checked_never_pass(capsys, tmp_path):
    cut = tmp_path / "ibstat.txt"
    cut.write_text(IBSTAT.read_text() + "CA 'mlx5_1'\n\tCA type: MT4123\n")  # cut mid-block
    cmdline = FIX / "vfio/proc-cmdline-lab-hv-converged.txt"  # passes: judged whole
    # mlx5_1 is expected and its block is the cut one (a cut elsewhere would not matter)
    code = main(["check", "--ibstat", str(cut), "--nic", "mlx5_0:rate=100", "--nic",
                 "mlx5_1:rate=100", "--json",
                 "--cmdline", str(cmdline), "--hypervisor", "--cpu-vendor", "GenuineIntel",
                 "--host", "n1"])
    env = json.loads(capsys.readouterr().out)
    assert (code, env["verdict"], env["host"]) == (3, "not-checked", "n1")
    assert env["summary"] == {"ok": 1, "warn": 0, "fail": 0, "skipped": 1}
    assert env["captures"][0]["verdict"].startswith("incomplete")
    assert env["captures"][1]["verdict"] == "pass"


def test_the_envelope_names_host_profile_model_and_groups_causes(capsys):
    assert main(["check", "--profile", "nvswitch-all-to-all", "--gpus", "8", "--model",
                 "H100-SXM5-80GB", "--topo", str(ALL_SYS), "--host", "hgx01", "--json"]) == 1
    env = json.loads(capsys.readouterr().out)
    assert (env["host"], env["profile"], env["model"]) == ("hgx01", "nvswitch-all-to-all",
                                                           "H100-SXM5-80GB")
    assert env["inputs"] == [str(ALL_SYS)] and env["gpus"] == 8
    [cause] = env["causes"]
    assert cause["cause"].startswith("NVSwitch fabric not up") and len(cause["subjects"]) == 28


def test_nvlink_speeds_say_gigabytes(capsys):
    nvl = REAL / "nvidia-smi-nvlink/h100-sxm-gpu0-nvlink-status-i0-18-links-26.562.txt"
    assert main(["parse", "nvlink", str(nvl)]) == 0
    link = json.loads(capsys.readouterr().out)["GPU0"]["links"]["0"]
    assert link == {"active": True, "gbytes_per_s": 26.562}


# ---------------------------------------------------------------------------- the spec's rates

def _site(tmp_path, monkeypatch, nics: str) -> str:
    from tests.unit.test_cli_nccl import site

    node = ('{"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, '
            '"gpu_topology": "nvswitch-all-to-all", "rdma_nics": [' + nics + ']}')
    return site(tmp_path, monkeypatch, f'[("hgx01", {node}), ("hgx02", {node})]')


def test_nccl_check_takes_shape_nics_and_rate_from_the_spec(tmp_path, monkeypatch, capsys):
    log = FIX / "nccl/2node-16x-h100-80gb-hbm3-gcp-a3mega-tcpxo-8G.txt"
    nics = ", ".join(f'{{"name": "mlx5_{i}", "link_layer": "ethernet", "rate_gbps": 200, '
                     f'"gid_index": 3, "ats": False}}' for i in range(8))
    inv = _site(tmp_path, monkeypatch, nics)
    code = main(["nccl", "check", str(log), "--inventory", inv, "--host", "hgx01", "--json"])
    env = json.loads(capsys.readouterr().out)
    assert (env["profile"], env["model"], env["nics"], env["nic_gbits_per_s"]) == (
        "nvswitch-all-to-all", "H100-SXM5-80GB", 8, 200)
    by_hand = main(["nccl", "check", str(log), "--profile", "nvswitch-all-to-all", "--model",
                    "H100-SXM5-80GB", "--gpus", "8", "--nics", "8", "--nic-gbps", "200",
                    "--json"])
    assert json.loads(capsys.readouterr().out)["findings"] == env["findings"]
    assert code == by_hand


def test_perftest_check_takes_each_nics_rate_from_the_spec(tmp_path, monkeypatch, capsys):
    logs = [str(p) for p in sorted((FIX / "perftest").glob("*.txt"))]
    nics = ('{"name": "rocep1s0f0", "link_layer": "ethernet", "rate_gbps": 100, "ats": False}, '
            '{"name": "roceP2p1s0f0", "link_layer": "ethernet", "rate_gbps": 200, "ats": False}')
    inv = _site(tmp_path, monkeypatch, nics)
    code = main(["perftest", "check", *logs, "--inventory", inv, "--host", "hgx01", "--json"])
    env = json.loads(capsys.readouterr().out)
    assert env["nic_gbits_per_s"] == {"rocep1s0f0": 100, "roceP2p1s0f0": 200}
    assert code == 1 and [f["severity"] for f in env["findings"]] == ["ok", "fail"]
    assert main(["perftest", "check", *logs]) == 2
    assert "give --nic-gbps, or --inventory and --host" in capsys.readouterr().err
