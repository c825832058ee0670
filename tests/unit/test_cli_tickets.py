"""Issue 27 (CLI half): `check`, `nccl check` and `perftest check` give output a person can
paste into a ticket and JSON a program can read (the envelope); every capture option reads
standard input; a capture of the wrong command is refused naming the command it looks like."""

from __future__ import annotations

import io

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
