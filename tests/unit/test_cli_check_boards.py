"""`gpuinfra check` as users call it on DGX-1 captures (fixed-mesh) and with `nvidia-smi -q`.

tests/fixtures/boards/INDEX.md says where each capture comes from; the SYNTHESIZED ones are the
real drv580 capture with GPU3's NVLinks down.
"""

from __future__ import annotations

import json

from gpuinfra_cli.main import main
from tests.conftest import REAL, REPO

BOARDS = REPO / "tests" / "fixtures" / "boards"
DGX1 = ["--profile", "fixed-mesh", "--gpus", "8", "--model", "V100-SXM2-32GB"]


def check(capsys, *args) -> tuple[int, list[dict]]:
    code = main(["check", *map(str, args), "--json"])
    return code, json.loads(capsys.readouterr().out)["findings"]


def test_dgx1_with_all_links_active_passes(capsys):
    code, findings = check(capsys, *DGX1,
                           "--topo", BOARDS / "dgx1-8x-v100-sxm2-32gb-topo-m-drv580.txt",
                           "--nvlink", BOARDS / "dgx1-8x-v100-sxm2-32gb-nvlink-s-drv580.txt")
    assert code == 0
    assert len(findings) == 3 + 16 + 8 and all(f["severity"] == "ok" for f in findings)


def test_dgx1_with_gpu3_links_inactive_fails_naming_its_pairs(capsys):
    code, findings = check(
        capsys, *DGX1,
        "--topo", BOARDS / "dgx1-8x-v100-sxm2-32gb-gpu3-nvlinks-down-SYNTHESIZED-topo-m.txt",
        "--nvlink", BOARDS / "dgx1-8x-v100-sxm2-32gb-gpu3-nvlinks-down-SYNTHESIZED-nvlink-s.txt")
    assert code == 1
    failed = [f["subject"] for f in findings if f["severity"] == "fail"]
    assert failed == ["GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3", "GPU3-GPU7", "GPU3"]


def test_human_output_names_the_pair(capsys):
    code = main(["check", *DGX1, "--topo", str(
        BOARDS / "dgx1-8x-v100-sxm2-32gb-gpu3-nvlinks-down-SYNTHESIZED-topo-m.txt")])
    out = capsys.readouterr().out
    assert code == 1 and "GPU0-GPU3" in out and "FAIL, 4 of 18 checks failed" in out


def test_smi_q_fabric_is_judged(capsys):
    code, findings = check(capsys, "--profile", "nvswitch-all-to-all", "--gpus", "8",
                           "--model", "H100-SXM5-80GB", "--smi-q",
                           REAL / "nvidia-smi-q" /
                           "8x-h100-80gb-hbm3-bare-metal-drv535.161.08-full-q.txt")
    assert code == 0
    assert [f["check"] for f in findings].count("fabric") == 8


def test_smi_q_alone_is_enough_input(capsys):
    code = main(["check", "--profile", "pcie-only", "--gpus", "1", "--smi-q",
                 str(REAL / "nvidia-smi-q" / "a10-passthrough-vm-drv535.129.03-full-q.txt")])
    assert code == 0 and "nvidia-smi -q: 1" in capsys.readouterr().out
