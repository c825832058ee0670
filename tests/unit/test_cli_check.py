"""`gpuinfra parse` and `gpuinfra check` on the real captures, as users call them."""

from __future__ import annotations

import json

import pytest

from gpuinfra.parsers import PARSERS
from gpuinfra_cli.main import main
from tests.conftest import REAL
from tests.unit.test_parsers_hostile import ELSEWHERE

TOPO, P2P, NVL = (REAL / "nvidia-smi-topo-m", REAL / "nvidia-smi-topo-p2p",
                  REAL / "nvidia-smi-nvlink")

# kind -> fixture folders holding outputs of that command (status-only for nvlink)
PARSE_FOLDERS = {
    "topo": ["nvidia-smi-topo-m"], "p2p": ["nvidia-smi-topo-p2p"], "gpus": ["nvidia-smi-L",
    "nvidia-smi-query-gpu"], "mig": ["nvidia-smi-mig-lgip"], "lspci": ["lspci"],
    "mlxconfig": ["mlxconfig"], "ibstat": ["ibstat"], "ibv": ["ibv_devinfo"],
    "fabric": ["nvidia-smi-q"],
}
NOT_STATUS = ("capabilities", "-R-remote")


def _cases():
    for kind, folders in PARSE_FOLDERS.items():
        for folder in folders:
            for path in sorted((REAL / folder).iterdir()):
                yield pytest.param(kind, path, id=f"{kind}:{path.name}")
    for path in sorted(NVL.iterdir()):
        if not any(word in path.name for word in NOT_STATUS):
            yield pytest.param("nvlink", path, id=f"nvlink:{path.name}")


@pytest.mark.parametrize(("kind", "path"), list(_cases()))
def test_parse_prints_json_for_every_capture(kind, path, capsys):
    assert main(["parse", kind, str(path)]) == 0
    json.loads(capsys.readouterr().out)


def test_every_kind_is_covered():
    """Here the kinds of tests/fixtures/real; the others in test_cli_parse.py, on the real
    captures elsewhere in tests/fixtures (test_parsers_hostile.ELSEWHERE)."""
    assert set(PARSE_FOLDERS) | {"nvlink"} | set(ELSEWHERE) == set(PARSERS)


def test_topo_json_shape(capsys):
    main(["parse", "topo", str(TOPO / "8x-a100-sxm4-80gb-nv12-4nic-sys-distserve-issue3.txt")])
    out = json.loads(capsys.readouterr().out)
    assert out["nics"] == ["NIC0", "NIC1", "NIC2", "NIC3"]
    assert out["nic_devices"]["NIC2"] == "mlx5_2"
    assert out["links"]["GPU0"]["GPU7"] == "NV12" and out["links"]["GPU0"]["NIC0"] == "SYS"
    assert out["cpu_affinity"]["GPU4"] == "64-127,192-254" and out["numa_affinity"]["GPU4"] == "1"


def test_p2p_json_keeps_mode(capsys):
    main(["parse", "p2p", "--mode", "r", str(P2P / "8x-h100-80gb-hbm3-p2p-r-all-OK.txt")])
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "r" and out["status"]["GPU3"]["GPU5"] == "OK"


GOOD = [
    (["--profile", "nvswitch-all-to-all", "--gpus", "8", "--model", "H100-SXM5-80GB",
      "--topo", TOPO / "8x-h100-sxm-nv18-no-nics-spaces.txt",
      "--p2p", f"r:{P2P / '8x-h100-80gb-hbm3-p2p-r-all-OK.txt'}",
      "--nvlink", NVL / "h100-sxm-gpu0-nvlink-status-i0-18-links-26.562.txt"]),
    (["--profile", "nvswitch-all-to-all", "--gpus", "8", "--model", "A100-SXM4-80GB",
      "--topo", TOPO / "8x-a100-sxm4-80gb-nv12-4nic-sys-distserve-issue3.txt",
      "--nvlink", NVL / "azure-nd-a100-v4-8x-a100-sxm4-80gb-nvlink-status-12-links-25GBs.txt"]),
    (["--profile", "bridged-pairs", "--gpus", "2", "--model", "H100-PCIE-80GB",
      "--topo", TOPO / "hpe-dl380a-gen11-2x-h100-pcie-nvlink-bridge-nv12.txt",
      "--nvlink", NVL / "hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt"]),
    (["--profile", "bridged-pairs", "--gpus", "4", "--model", "A100-PCIE-80GB", "--topo",
      TOPO / "4x-a100-80gb-pcie-2-nvlink-bridged-pairs-nv12-4numa-UNRESOLVED-SOURCE.txt"]),
    (["--profile", "direct-all-to-all", "--gpus", "4", "--model", "A100-SXM4-40GB",
      "--topo", TOPO / "alcf-polaris-4x-a100-sxm4-nv4-2x-mlx5-header-damaged.txt"]),
    (["--profile", "pcie-only", "--gpus", "8",
      "--topo", TOPO / "8x-rtx4090-pcie-only-phb-node-sys-xeon8352v-drv570.txt"]),
]

BAD = [
    ("all-SYS", ["--profile", "bridged-pairs", "--gpus", "8",
                 "--topo", TOPO / "8x-pcie-gpu-all-sys-2-numa-no-nics.txt"],
     "nvlink-topology", "bridge not detected or not seated"),
    ("pcie-only-4090", ["--profile", "nvswitch-all-to-all", "--gpus", "8", "--topo",
                        TOPO / "8x-rtx4090-pcie-only-phb-node-sys-xeon8352v-drv570.txt"],
     "nvlink-topology", "NVSwitch fabric not up"),
    ("inactive-links", ["--profile", "bridged-pairs", "--gpus", "2", "--model", "A100-PCIE-40GB",
                        "--nvlink", NVL / "hpe-dl380-gen11-2x-a100-pcie-no-bridge-nvlink-s-all"
                        "-inactive.txt"],
     "nvlink-links", "inactive"),
    ("NS-p2p", ["--profile", "bridged-pairs", "--gpus", "2", "--p2p",
                f"p:{P2P / 'autodl-2x-rtx2080ti-p2p-p-NS.txt'}"], "p2p-p", "NS"),
    ("NS-p2p-read", ["--profile", "bridged-pairs", "--gpus", "2", "--p2p", "r:" + str(
        P2P / "rtx3060-plus-p100-pcie-phb-p2p-r-NS-legend-omitted-UNRESOLVED-SOURCE.txt")],
     "p2p-r", "driver mismatch"),
    ("missing-gpus", ["--profile", "nvswitch-all-to-all", "--gpus", "8",
                      "--topo", TOPO / "alcf-polaris-4x-a100-sxm4-nv4-2x-mlx5-header-damaged.txt"],
     "gpu-count", "passthrough"),
]


def _argv(args):
    return ["check", *map(str, args), "--json"]


@pytest.mark.parametrize("args", GOOD, ids=lambda a: a[1] + ":" + a[3])
def test_good_systems_pass(args, capsys):
    code = main(_argv(args))
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert code == 0, [f for f in findings if f["severity"] == "fail"]
    assert findings and all(f["severity"] != "fail" for f in findings)


@pytest.mark.parametrize(("args", "check", "words"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_broken_systems_fail_with_cause(args, check, words, capsys):
    assert main(_argv(args)) == 1
    failed = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["severity"] == "fail"]
    assert any(f["check"] == check and words in f["cause"] + f["observed"] for f in failed), failed
    assert all(f["fix"] for f in failed)


def test_cns_capture_fails_naming_the_chipset(tmp_path, capsys):
    # No public capture shows CNS; this matrix is the real format with the code swapped in.
    cns = tmp_path / "p2p-cns.txt"
    cns.write_text("        GPU0    GPU1\n GPU0   X       CNS\n GPU1   CNS     X\n")
    assert main(_argv(["--profile", "bridged-pairs", "--gpus", "2", "--p2p", f"r:{cns}"])) == 1
    failed = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["severity"] == "fail"]
    assert any("chipset" in f["cause"].lower() for f in failed)


@pytest.mark.parametrize("argv", [
    ["check", "--profile", "nope", "--gpus", "2", "--topo", str(TOPO / "8x-pcie-gpu-all-sys-2-"
                                                                   "numa-no-nics.txt")],
    ["check", "--profile", "pcie-only", "--gpus", "2"],
    ["check", "--profile", "pcie-only", "--gpus", "2", "--model", "H900", "--topo", "x"],
    ["check", "--profile", "pcie-only", "--gpus", "2", "--topo", "/nonexistent/topo.txt"],
    ["check", "--profile", "pcie-only", "--gpus", "2",
     "--topo", str(NVL / "hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt")],
    ["parse", "nvlink", str(NVL / "h100-sxm-gpu0-nvlink-capabilities-c-i0-18-links.txt")],
    ["parse", "topo", str(REAL / "INDEX.md")],
])
def test_unusable_input_exits_2_with_message(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuinfra: ") and "Traceback" not in err


H100_TOPO = REAL / "nvidia-smi-topo-m" / "8x-h100-sxm-nv18-no-nics-spaces.txt"
A100_TOPO = REAL / "nvidia-smi-topo-m" / "8x-a100-sxm4-80gb-nv12-4nic-sys-distserve-issue3.txt"
SITE = ["--inventory", "inventory/example.py", "--group-data", "group_data"]


def test_nvidia_smi_captures_take_the_hosts_spec(capsys, monkeypatch):
    """Issue 44: with --inventory and --host, a topo capture is judged against the host's own
    spec (8x H100-SXM5, nvswitch-all-to-all for hgx01), and the output says whose spec."""
    from tests.conftest import REPO

    monkeypatch.chdir(REPO)
    rc = main(["check", "--topo", str(H100_TOPO), *SITE, "--host", "hgx01", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and (out["profile"], out["gpus"]) == ("nvswitch-all-to-all", 8)
    assert out["expectation_from"] == "the spec of hgx01 in inventory/example.py"
    # pcie01's spec (4x H100-PCIE, bridged pairs) does not fit an 8-GPU SXM capture
    rc = main(["check", "--topo", str(H100_TOPO), *SITE, "--host", "pcie01"])
    assert rc == 1 and "from the spec of pcie01" in capsys.readouterr().out
    # an option against the spec is refused, naming both
    rc = main(["check", "--topo", str(A100_TOPO), *SITE, "--host", "hgx01", "--gpus", "4"])
    err = capsys.readouterr().err
    assert rc == 2 and "--gpus 4: the spec of hgx01" in err and "says 8" in err
    rc = main(["check", "--topo", str(H100_TOPO), *SITE, "--host", "kvm01"])
    assert rc == 2 and "no GPUs in the spec" in capsys.readouterr().err


@pytest.mark.parametrize(("prompt", "argv", "path"), [
    ("$ nvidia-smi topo -m", ["check", "--profile", "nvswitch-all-to-all", "--gpus", "8",
                              "--topo"], H100_TOPO),
    ("[user@node ~]$ sudo nvidia-smi topo -m", ["parse", "topo"], H100_TOPO),
    ("root@gpu01:~# ibstat", ["check", "--nic", "mlx5_0:link_layer=ethernet", "--ibstat"],
     REAL / "ibstat" / "h100-node-8x-cx7-roce-1-port-polling-1-port-disabled.txt"),
    ("[user@node ~]$ nvidia-smi nvlink --status", ["parse", "nvlink"],
     REAL / "nvidia-smi-nvlink" / ("azure-nd-a100-v4-8x-a100-sxm4-80gb-nvlink-status-12-links-"
                                   "25GBs.txt")),
])
def test_a_paste_headed_by_its_echoed_command_is_read(prompt, argv, path, tmp_path, capsys):
    """Issue 47: the poster's prompt and command on the first line (and a bare prompt on the
    last) are not output: left out, the rest judged as the capture alone is."""
    alone = main([*argv, str(path)])
    capsys.readouterr()
    pasted = tmp_path / "pasted.txt"
    body = path.read_text()
    body += "" if body.endswith("\n") else "\n"
    pasted.write_text(f"{prompt}\n{body}root@gpu01:~# \n")
    assert main([*argv, str(pasted)]) == alone == 0
    capsys.readouterr()
    if "nvlink" in argv:  # (topo and ibstat read past a line before the output)
        other = tmp_path / "other.txt"  # another program's echo is not taken for the command
        other.write_text(f"$ ls -l\n{path.read_text()}")
        assert main([*argv, str(other)]) != 0


SMI_Q = REAL / "nvidia-smi-q" / "8x-h100-80gb-hbm3-bare-metal-drv535.161.08-full-q.txt"


def test_an_smi_q_fabric_excerpt_is_judged(tmp_path, capsys):
    """Issue 47: `nvidia-smi -q | grep -C3 Fabric` (no NVSMI LOG header) was refused (exit 2):
    its Fabric sections are judged, a failure shown fails, and no failure is not a pass
    (exit 3: the GPUs outside the excerpt are not judged)."""
    lines = SMI_Q.read_text().splitlines()
    keep = set()
    for i, line in enumerate(lines):
        if line.strip() == "Fabric":
            keep.update(range(i - 3, i + 4))
    excerpt = tmp_path / "grep.txt"
    excerpt.write_text("\n".join(lines[i] for i in sorted(keep)) + "\n")
    argv = ["check", "--smi-q", str(excerpt), "--profile", "nvswitch-all-to-all", "--gpus", "8"]
    assert main([*argv, "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "not-checked" and "excerpt" in out["cuts"][0]
    assert out["summary"]["fail"] == 0 and out["summary"]["ok"] == 9  # 8 fabric sections
    broken = tmp_path / "broken.txt"
    broken.write_text(excerpt.read_text().replace("Status                            : Success",
                                                  "Status                            : "
                                                  "Insufficient Resources", 1))
    assert main(["check", "--smi-q", str(broken), "--profile", "nvswitch-all-to-all",
                 "--gpus", "8"]) == 1
    assert "Status Insufficient Resources" in capsys.readouterr().out


def test_a_topo_paste_with_elided_rows_is_judged(tmp_path, capsys):
    """Issue 47: a `...` where the poster left rows out exited 2; the rows shown are judged,
    the missing rows read from the others' columns: no failure is exit 3, a failure shown
    (one NV12 turned SYS in a row shown) fails."""
    rows = A100_TOPO.read_text().splitlines()
    pasted = tmp_path / "elided.txt"
    pasted.write_text("\n".join(rows[:5] + ["..."] + rows[8:]) + "\n")
    argv = ["check", "--profile", "nvswitch-all-to-all", "--gpus", "8", "--topo"]
    assert main([*argv, str(pasted), "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "not-checked" and out["summary"]["fail"] == 0
    assert any("no row for GPU4, GPU5, GPU6" in c for c in out["cuts"])
    broken = tmp_path / "broken.txt"
    broken.write_text(pasted.read_text().replace("NV12", "SYS", 1))  # GPU0-GPU1 in row 0
    assert main([*argv, str(broken)]) == 1
    # GPU rows whole, NIC rows cut: no check reads NIC-to-NIC links, so nothing missing could
    # change the verdict: judged whole (it was refused, exit 2)
    nics_cut = tmp_path / "no-nic-rows.txt"
    nics_cut.write_text("\n".join(rows[:9]) + "\n")
    assert main([*argv, str(nics_cut)]) == 0
