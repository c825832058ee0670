"""`gpuinfra check` on pasted RDMA and kernel captures (issue 24, sections 2 and 3): real
captures (provenance in each fixture folder's INDEX.md) pass when healthy and fail when broken,
with cause and fix; cut, elided and header-less variants are made here by cutting a real
capture, and can fail but never pass."""

from __future__ import annotations

import json

import pytest

from gpuinfra_cli.main import main
from tests.conftest import REPO

FIX = REPO / "tests" / "fixtures"
IBSTAT_OK = FIX / "real/ibstat/h100-node-8x-cx7-400g-roce-plus-4x-cx6dx-100g-all-active.txt"
IBSTAT_DOWN = FIX / "real/ibstat/h100-node-8x-cx7-roce-1-port-polling-1-port-disabled.txt"
IBV_OK = FIX / "real/ibv_devinfo/kaust-ibex-login-connectx6-hdr100-1port.txt"
GIDS_OK = FIX / "show_gids/connectx6-mlx5_0-ens1f0-6-gids-spectrumscale-pr4.txt"
GIDS_NONE = FIX / "show_gids/connectx4lx-pod-calico-no-gids-k8s-rdma-sriov-dev-plugin-30.txt"
MLX_ATS_OFF = FIX / "real/mlxconfig/connectx5-mcx555a-edr-ib-mlxconfig-q-full-bluebanquise.txt"
MLX_GREP = FIX / "real/mlxconfig/connectx7-mcx715105as-weat-mlxconfig-q-egrep-sriov-8vfs-eth.txt"
MLX_LOOP = FIX / ("real/mlxconfig/8x-connectx8-p6612-ats-enabled-true-nvidia-bw-ultra-hgx-doc-"
                  "TRUNCATED-8th.txt")
MLX_GREP_ATS = FIX / ("real/mlxconfig/connectx7-mt4129-q-grep-ats-enabled-false-nvidia-vm-"
                      "inference-doc.txt")
LSPCI_ATS = FIX / "lspci-vvv/h200-vm-connectx7-grep-ats-enable-plus-nccl-tests-256.txt"
LSPCI_ACS_ON = FIX / "lspci-vvv/plx-pex8725-switch-acs-on-excerpt-rockchip-pcie-devices-6.txt"
LSPCI_ACS_OFF = FIX / "lspci-vvv/openvmm-root-port-acs-all-off-elided-openvmm-3461.txt"
LSMOD_OK = FIX / "lsmod/h100-peermem-loaded-grep-gpud-pr39.txt"
LSMOD_NO = FIX / "lsmod/3-node-8-gpu-grep-mlx5-no-peermem-gpu-operator-2511.txt"
DMESG_PEERMEM = FIX / "dmesg/gb300-nvidia-peermem-unknown-symbol-gpu-operator-2868.txt"
DMESG_XID79 = FIX / "kernel-log/nvsentinel-155-xid79-line.txt"
DMESG_AMD_VI = FIX / "dmesg/amd-x570-amd-vi-interrupt-remapping-iommu-nested-pve-3.txt"
DMESG_DMAR = FIX / "dmesg/intel-dmar-iommu-enabled-gtx1660s-kubevirt-gpu-device-plugin-45.txt"
IBV_DOWN = FIX / "ibv_devinfo/cx7-ndr-mlx5_0-port-down-lid-65535-cut-deepep-60.txt"

# The 400G RoCE ports of the healthy and the broken H100 node (mlx5_11 and mlx5_5 are down in
# the broken capture).
ROCE400 = [f"--nic=mlx5_{i}:link_layer=ethernet,rate=400" for i in (0, 3, 4, 5, 6, 9, 10, 11)]


def check(capsys, *argv: str) -> tuple[int, list[dict]]:
    code = main(["check", *argv, "--json", "--host", "node7"])
    env = json.loads(capsys.readouterr().out)
    verdicts = {c["verdict"] for c in env["captures"]}
    assert env["verdict"] == ("fail" if "fail" in verdicts else
                              "pass" if verdicts == {"pass"} else "not-checked")
    return code, env["captures"]


def cut(tmp_path, text: str, name: str = "cut.txt") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def whats(verdict: dict) -> str:
    return " | ".join(f["what"] for f in verdict["findings"])


# ---------------------------------------------------------------------------- section 2

def test_help_lists_every_kind(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    out = capsys.readouterr().out
    for option in ("--topo", "--nvlink", "--ibstat", "--ibv-devinfo", "--show-gids",
                   "--mlxconfig", "--lspci-vvv", "--lsmod", "--dmesg", "--cmdline"):
        assert option in out


def test_ibstat_healthy_passes(capsys):
    code, [verdict] = check(capsys, "--ibstat", str(IBSTAT_OK), *ROCE400)
    assert (code, verdict["verdict"], verdict["findings"]) == (0, "pass", [])
    assert verdict["host"] == "node7" and verdict["kind"] == "ibstat"
    assert len(verdict["expectation"]["nics"]) == 8 and verdict["blocks_judged"] == 12


def test_ibstat_down_port_fails_with_cause_and_fix(capsys):
    code, [verdict] = check(capsys, "--ibstat", str(IBSTAT_DOWN), *ROCE400)
    assert code == 1 and verdict["verdict"] == "fail"
    down = [f for f in verdict["findings"] if "not ACTIVE/LinkUp" in f["what"]]
    assert {f["what"].split(":")[0] for f in down} == {"mlx5_11", "mlx5_5"}
    assert "Polling: no link partner" in down[0]["cause"] and "ibstat" in down[0]["fix"]


def test_text_output_names_host_cause_and_fix(capsys):
    assert main(["check", "--ibstat", str(IBSTAT_DOWN), "--host", "node7", *ROCE400]) == 1
    out = capsys.readouterr().out
    assert out.startswith("node7: ibstat: FAIL (ibstat 4 failure(s) in 12 complete block(s))")
    assert "\nFAIL  Polling" in out and "fix: check the cable" in out
    assert "on:  ibstat: mlx5_5, mlx5_11\n" in out  # one block per cause, its NICs named


def test_ibv_devinfo_healthy_passes_and_wrong_layer_fails(capsys):
    code, [verdict] = check(capsys, "--ibv-devinfo", str(IBV_OK), "--nic", "mlx5_0")
    assert (code, verdict["verdict"]) == (0, "pass")
    code, [verdict] = check(capsys, "--ibv-devinfo", str(IBV_OK),
                            "--nic", "mlx5_0:link_layer=ethernet")
    assert code == 1 and "link layer infiniband, the spec says ethernet" in whats(verdict)
    assert "LINK_TYPE_P1=ETH" in verdict["findings"][0]["fix"]


def test_ibv_devinfo_port_down_fails_and_the_cut_block_is_named(capsys):
    # DeepEP#60: mlx5_0 (ConnectX-7, InfiniBand) PORT_DOWN with no LID; the stored post ends
    # inside mlx5_1's block, which is reported as cut, never judged.
    code, [verdict] = check(capsys, "--ibv-devinfo", str(IBV_DOWN), "--nic", "mlx5_0")
    assert code == 1 and verdict["verdict"] == "fail"
    assert whats(verdict) == "mlx5_0: port DOWN/(not shown), not ACTIVE/LinkUp"
    assert "no link partner" in verdict["findings"][0]["cause"]
    assert "ibstat" in verdict["findings"][0]["fix"]
    assert verdict["blocks_judged"] == 1
    assert any("mlx5_1" in c and "incomplete" in c for c in verdict["cuts"])


def test_ibv_devinfo_port_down_of_a_nic_not_expected_is_not_judged(capsys):
    # Only mlx5_1 expected: its block is the cut one, so the capture cannot pass.
    code, [verdict] = check(capsys, "--ibv-devinfo", str(IBV_DOWN), "--nic", "mlx5_1")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")


def test_show_gids_healthy_passes(capsys):
    code, [verdict] = check(capsys, "--show-gids", str(GIDS_OK),
                            "--nic", "mlx5_0:link_layer=ethernet,gid_index=5,netdev=ens1f0")
    assert (code, verdict["verdict"], verdict["blocks_judged"]) == (0, "pass", 6)


def test_show_gids_v1_index_and_empty_table_fail(capsys):
    code, [verdict] = check(capsys, "--show-gids", str(GIDS_OK),
                            "--nic", "mlx5_0:link_layer=ethernet,gid_index=4")
    assert code == 1 and "is RoCE v1, not v2" in whats(verdict)
    code, [verdict] = check(capsys, "--show-gids", str(GIDS_NONE),
                            "--nic", "mlx5_0:link_layer=ethernet,gid_index=3")
    assert code == 1 and "GID index 3 not in the GID table" in whats(verdict)
    assert "no IP address" in verdict["findings"][0]["cause"]


def test_mlxconfig_ats_off_fails_and_not_wanted_passes(capsys):
    code, [verdict] = check(capsys, "--mlxconfig", str(MLX_ATS_OFF), "--nic", "mlx5_0:ats=yes")
    assert code == 1 and "ATS_ENABLED Next-Boot False, the spec says True" in whats(verdict)
    assert "mstconfig -y -d <pci> set ATS_ENABLED=1" in verdict["findings"][0]["fix"]
    code, [verdict] = check(capsys, "--mlxconfig", str(MLX_ATS_OFF), "--nic", "mlx5_0:ats=no")
    assert (code, verdict["verdict"]) == (0, "pass")


def test_lspci_ats_rows_without_device_lines_pass_and_enable_minus_fails(capsys, tmp_path):
    code, [verdict] = check(capsys, "--lspci-vvv", str(LSPCI_ATS), "--nic", "mlx5_0")
    assert (code, verdict["verdict"]) == (0, "pass")
    off = LSPCI_ATS.read_text().replace("Enable+", "Enable-")  # every row off: still agreed
    code, [verdict] = check(capsys, "--lspci-vvv", cut(tmp_path, off), "--nic", "mlx5_0")
    assert code == 1 and "ATSCtl: Enable-" in whats(verdict)


def test_lspci_acs_on_fails_even_from_rows_without_their_device(capsys):
    code, [verdict] = check(capsys, "--lspci-vvv", str(LSPCI_ACS_ON), "--acs-off")
    assert code == 1 and "ACS still on between GPU and NIC" in whats(verdict)
    assert "(ACSCtl 0x001d)" in whats(verdict)
    assert "gpuinfra-acs-off" in verdict["findings"][0]["fix"]


def test_lsmod_peermem_loaded_passes_and_missing_fails(capsys):
    code, [verdict] = check(capsys, "--lsmod", str(LSMOD_OK), "--gpudirect", "peermem")
    assert (code, verdict["verdict"]) == (0, "pass")
    code, [verdict] = check(capsys, "--lsmod", str(LSMOD_NO), "--gpudirect", "peermem")
    assert code == 1 and "nvidia_peermem is not loaded" in whats(verdict)
    assert "ib_core's users: ib_umad, ib_uverbs, mlx5_ib" in whats(verdict)
    assert "modprobe nvidia-peermem" in verdict["findings"][0]["fix"]


def test_dmesg_peermem_and_fatal_xid_fail(capsys):
    code, [verdict] = check(capsys, "--dmesg", str(DMESG_PEERMEM))
    assert code == 1 and "unresolved ib_register_peer_memory_client" in whats(verdict)
    assert "reinstall" in verdict["findings"][0]["fix"]
    code, [verdict] = check(capsys, "--dmesg", str(DMESG_XID79))
    assert code == 1 and "Xid 79 (fatal)" in whats(verdict)


def test_dmesg_iommu_on_amd_vi_and_dmar_pass(capsys):
    # Two greps as posted: an X570 host's AMD-Vi lines ("Interrupt remapping enabled") and an
    # Intel host's "DMAR: IOMMU enabled" next to amd_iommu_v2's harmless "not available" line.
    code, [verdict] = check(capsys, "--dmesg", str(DMESG_AMD_VI), "--iommu", "on")
    assert (code, verdict["verdict"], verdict["findings"]) == (0, "pass", [])
    code, [verdict] = check(capsys, "--dmesg", str(DMESG_DMAR), "--iommu", "on")
    assert (code, verdict["verdict"], verdict["findings"]) == (0, "pass", [])


def test_dmesg_iommu_grep_says_nothing_of_passthrough(capsys):
    # The same AMD-Vi grep has no "Default domain type" line: iommu=pt is not shown either way.
    code, [verdict] = check(capsys, "--dmesg", str(DMESG_AMD_VI), "--iommu", "passthrough")
    assert (code, verdict["verdict"]) == (3, "no verdict")


def test_dmesg_without_what_is_asked_is_no_verdict(capsys, tmp_path):
    # A kernel log of other lines says nothing of the IOMMU.
    other = tmp_path / "dmesg.txt"
    other.write_text("[    0.000000] Linux version 6.1.0-50-amd64\n"
                     "[    1.204117] usb 1-1: new high-speed USB device number 2\n")
    code, [verdict] = check(capsys, "--dmesg", str(other), "--iommu", "passthrough")
    assert (code, verdict["verdict"]) == (3, "no verdict")


def test_another_commands_capture_is_refused_naming_it(capsys):
    # An lsmod paste given as --dmesg: refused, saying what it looks like (was: "no verdict").
    assert main(["check", "--dmesg", str(LSMOD_OK), "--iommu", "passthrough"]) == 2
    err = capsys.readouterr().err
    assert "this looks like `lsmod (whole or grepped), or cat /proc/modules` output, not " \
        "`dmesg or journalctl -k" in err


def test_cmdline_missing_iommu_pt_fails(capsys, tmp_path):
    # The one real /proc/cmdline at hand (tests/fixtures/device: the lent H100 VM, captured by
    # this project) has no iommu=pt: an RDMA node's role would have put it there.
    cmdline = (FIX / "device/h100-80gb-hbm3-vm-drv580.159.04/proc-cmdline.txt")
    code, [verdict] = check(capsys, "--cmdline", str(cmdline), "--rdma")
    assert code == 1 and "iommu=pt missing" in whats(verdict)


def test_cmdline_of_a_converged_vfio_host_passes(capsys):
    # The lab's QEMU hypervisor guest after the vfio role and its reboot (Debian's own kernel;
    # tests/fixtures/vfio/INDEX.md): intel_iommu=on iommu=pt, as the role writes them.
    cmdline = FIX / "vfio/proc-cmdline-lab-hv-converged.txt"
    code, [verdict] = check(capsys, "--cmdline", str(cmdline), "--hypervisor",
                            "--cpu-vendor", "GenuineIntel")
    assert (code, verdict["verdict"]) == (0, "pass"), verdict
    before = FIX / "vfio/proc-cmdline-lab-hv-before-reboot.txt"
    code, [verdict] = check(capsys, "--cmdline", str(before), "--hypervisor",
                            "--cpu-vendor", "GenuineIntel")
    assert code == 1 and "intel_iommu=on" in whats(verdict), verdict


# ---------------------------------------------------------------------------- section 3

def test_ibstat_last_block_cut_midway_judges_the_complete_ones(capsys, tmp_path):
    text = IBSTAT_DOWN.read_text()
    partial = text[:text.index("CA 'mlx5_6'") + 120]  # cut inside mlx5_6's block
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, partial), *ROCE400)
    assert code == 1, "mlx5_11 and mlx5_5 are plainly down in complete blocks"
    assert {w.split(":")[0] for w in whats(verdict).split(" | ")} == {"mlx5_11", "mlx5_5"}
    assert any("incomplete" in c for c in verdict["cuts"])
    assert any(c.startswith("mlx5_9:") for c in verdict["cuts"]), "not called missing"


def test_ibstat_healthy_but_cut_is_incomplete_never_pass(capsys, tmp_path):
    text = IBSTAT_OK.read_text()
    partial = text[:text.index("CA 'mlx5_6'") + 120]
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, partial), *ROCE400)
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")
    assert verdict["summary"].startswith("incomplete: 8 complete block(s) judged, no failure")


def test_ibstat_poster_elision_is_a_cut(capsys, tmp_path):
    lines = IBSTAT_OK.read_text().split("\n")
    start = lines.index("CA 'mlx5_3'")
    elided = lines[:start] + ["..."] + lines[start + 17:]
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, "\n".join(elided)), *ROCE400)
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")
    assert any("left out by the poster" in c for c in verdict["cuts"])


def test_ibstat_port_rows_without_header_read_for_the_one_nic(capsys, tmp_path):
    lines = IBSTAT_DOWN.read_text().split("\n")
    start = lines.index("CA 'mlx5_11'")
    rows = "\n".join(lines[start + 8:start + 17])  # State .. Link layer, no CA/Port lines
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, rows),
                            "--nic", "mlx5_11:link_layer=ethernet,rate=400")
    assert code == 1 and "mlx5_11: port DOWN/Polling" in whats(verdict)
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, rows), *ROCE400[:2])
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete"), \
        "two NICs: whose rows is a guess"


def test_ibv_devinfo_block_cut_is_incomplete(capsys, tmp_path):
    text = IBV_OK.read_text()
    partial = text[:text.index("link_layer")]
    code, [verdict] = check(capsys, "--ibv-devinfo", cut(tmp_path, partial), "--nic", "mlx5_0")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")


def test_mlxconfig_last_line_cut_and_grep_without_ats_never_pass(capsys, tmp_path):
    text = MLX_ATS_OFF.read_text()
    partial = text[:text.index("ATS_ENABLED") + 5]
    code, [verdict] = check(capsys, "--mlxconfig", cut(tmp_path, partial), "--nic", "x:ats=no")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")
    assert any("cut mid-way" in c for c in verdict["cuts"])
    code, [verdict] = check(capsys, "--mlxconfig", str(MLX_GREP), "--nic", "x:ats=yes")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")
    assert any("filtered" in c for c in verdict["cuts"])


def test_mlxconfig_grep_of_the_ats_line_is_judged(capsys):
    """NVIDIA's VM-inference guide: `mlxconfig ... q | grep ATS_ENABLED` on a ConnectX-7 at
    its default: the one line the expectation needs is shown, so the grep is no cut."""
    code, [verdict] = check(capsys, "--mlxconfig", str(MLX_GREP_ATS), "--nic", "mlx5_0:ats=yes")
    assert code == 1 and "ATS_ENABLED Next-Boot False, the spec says True" in whats(verdict)
    code, [verdict] = check(capsys, "--mlxconfig", str(MLX_GREP_ATS), "--nic", "mlx5_0:ats=no")
    assert (code, verdict["verdict"], verdict["cuts"]) == (0, "pass", [])


def test_mlxconfig_loop_over_eight_nics_judged_per_device(capsys, tmp_path):
    """NVIDIA's HGX B300 guide's loop: seven whole devices with ATS on (Next-Boot only: warn),
    the eighth cut before its parameters: it could be off, so never a pass."""
    code, [verdict] = check(capsys, "--mlxconfig", str(MLX_LOOP), "--nic", "mlx5_0:ats=yes")
    assert (code, verdict["verdict"].split(":")[0], verdict["blocks_judged"]) == (
        3, "incomplete", 7)
    assert verdict["cuts"] == ["ed:00.0: the capture ends before its parameters: not judged"]
    assert {f["severity"] for f in verdict["findings"]} == {"warn"}
    # one device of the loop with ATS off fails, named by its address
    text = MLX_LOOP.read_text()
    at = text.index("----- 97:00.0")
    broken = text[:at] + text[at:].replace("True(1)", "False(0)", 1)
    code, [verdict] = check(capsys, "--mlxconfig", cut(tmp_path, broken), "--nic",
                            "mlx5_0:ats=yes")
    assert code == 1 and "97:00.0: ATS_ENABLED Next-Boot False" in whats(verdict)
    assert "70:00.0" not in " ".join(f["what"] for f in verdict["findings"]
                                     if f["severity"] == "fail")
    # with each NIC's pci, each device is judged as that NIC; the 8th's NIC is named as cut
    nics = [f"--nic=mlx5_{i}:ats=yes,pci=0000:{bus}:00.0"
            for i, bus in enumerate(("17", "39", "5f", "70", "97", "b9", "dc", "ed"))]
    code, [verdict] = check(capsys, "--mlxconfig", cut(tmp_path, broken), *nics)
    assert code == 1 and "mlx5_4 (97:00.0): ATS_ENABLED Next-Boot False" in whats(verdict)
    code, [verdict] = check(capsys, "--mlxconfig", str(MLX_LOOP), *nics[:7])
    assert (code, verdict["verdict"], verdict["blocks_judged"]) == (0, "pass", 7)


def test_mlxconfig_loop_with_differing_expectations_needs_pci(capsys):
    code = main(["check", "--mlxconfig", str(MLX_LOOP), "--nic", "a:ats=yes", "--nic",
                 "b:ats=no"])
    assert code == 2 and "give each NIC its pci=" in capsys.readouterr().err


def test_lspci_acs_off_with_poster_elision_never_passes(capsys):
    code, [verdict] = check(capsys, "--lspci-vvv", str(LSPCI_ACS_OFF), "--acs-off")
    assert (code, verdict["verdict"].split(":")[0], verdict["findings"]) == (3, "incomplete", [])
    assert any("[...]" in c for c in verdict["cuts"])


def test_show_gids_rows_missing_is_incomplete(capsys, tmp_path):
    lines = GIDS_OK.read_text().split("\n")
    partial = "\n".join(lines[:4] + lines[6:])  # rows 2 and 3 gone, n_gids_found=6 kept
    code, [verdict] = check(capsys, "--show-gids", cut(tmp_path, partial),
                            "--nic", "mlx5_0:link_layer=ethernet,gid_index=5")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")
    # a failure the complete rows prove fails, cut or not (index 1: link-local)
    code, [verdict] = check(capsys, "--show-gids", cut(tmp_path, partial),
                            "--nic", "mlx5_0:link_layer=ethernet,gid_index=1")
    assert (code, verdict["verdict"]) == (1, "fail")


def test_lsmod_grep_without_peermem_or_ib_core_is_not_a_pass(capsys, tmp_path):
    rows = "\n".join(LSMOD_NO.read_text().split("\n")[1:])  # without ib_core's row
    code, [verdict] = check(capsys, "--lsmod", cut(tmp_path, rows), "--gpudirect", "peermem")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")


def test_cmdline_elided_is_not_failed_for_what_was_left_out(capsys, tmp_path):
    code, [verdict] = check(capsys, "--cmdline", cut(tmp_path, "BOOT_IMAGE=... quiet\n"),
                            "--rdma")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")


def test_proc_modules_as_the_lent_h100_printed_it_is_read(capsys):
    # `cat /proc/modules` on the real H100 VM (tests/fixtures/device/INDEX.md, second lease):
    # refused as "not a module row" before; now read, and, with no lsmod header to prove the
    # listing whole, peermem's absence is a cut, never a pass or a failure.
    modules = FIX / "device/h100-80gb-hbm3-vm-drv580.159.04-second-lease/proc-modules.txt"
    code, [verdict] = check(capsys, "--lsmod", str(modules), "--gpudirect", "peermem")
    assert code == 3 and verdict["verdict"].startswith("incomplete"), verdict
    assert any("nvidia_peermem" in c for c in verdict["cuts"])


XID_DIR = FIX / "kernel-log"


def test_dmesg_xid_154_asking_for_a_reset_fails(capsys):
    """Issue 47: the Xid 62 -> 154 (GPU Reset Required) -> 45 log passed before; now it fails
    with the driver's action, the same rule as the health check (judge_xids)."""
    code, [verdict] = check(capsys, "--dmesg", str(XID_DIR / "nvidia-forum-364958-xid62-then-"
                                                    "154.txt"))
    assert code == 1
    [failure] = [f for f in verdict["findings"] if f["severity"] == "fail"]
    assert "Xid 62, 154, 45: the driver asks for GPU Reset Required (Xid 154)" in failure["what"]
    assert failure["cause"].startswith("the driver's recovery action after Xid 62")
    assert "nvidia-smi -r" in failure["fix"]


def test_dmesg_xid_45_names_what_caused_it(capsys):
    """Issue 47: Xid 45 "caused by previous Xid 149/145" (open-gpu-kernel-modules#1150) is
    said with its cause, not as a plain application fault."""
    code, [verdict] = check(capsys, "--dmesg", str(
        XID_DIR / "open-gpu-kernel-modules-1150-xid45-caused-by-149-145.txt"))
    whats = [f["what"] for f in verdict["findings"] if f["severity"] == "warn"]
    assert "GPU 0000:dc:00: Xid 45 (caused by Xid 149)" in whats
    assert "GPU 0000:97:00: Xid 45 (caused by Xid 145)" in whats
    assert all("application fault" not in f["cause"] for f in verdict["findings"])


def test_show_gids_link_local_v2_index_fails_naming_the_routable_one(capsys):
    """Issue 47: index 1 and 3 of the ConnectX-6 table are RoCE v2 but IPv6 link-local
    (fe80::): NCCL between nodes needs the IPv4-mapped GID, index 5 (172.19.0.60)."""
    for index in (1, 3):
        code, [verdict] = check(capsys, "--show-gids", str(GIDS_OK), "--nic",
                                f"mlx5_0:link_layer=ethernet,gid_index={index}")
        assert code == 1 and "IPv6 link-local address" in whats(verdict)
        assert "set gid_index to 5 (the v2 row of 172.19.0.60)" in verdict["findings"][0]["fix"]
    code, [verdict] = check(capsys, "--show-gids", str(GIDS_OK), "--nic",
                            "mlx5_0:link_layer=ethernet,gid_index=5")
    assert (code, verdict["verdict"]) == (0, "pass")


IBSTAT_DOWN = FIX / "real/ibstat/h100-node-8x-cx7-roce-1-port-polling-1-port-disabled.txt"


def test_ibstat_cut_right_after_state_down_fails(capsys, tmp_path):
    """Issue 47: a paste that stops right after mlx5_11's `State: Down` proves the port down:
    fail, not "cut"; cut after an Active state it stays not judged."""
    lines = IBSTAT_DOWN.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line == "CA 'mlx5_11'")
    down = "\n".join(lines[:at + 9]) + "\n"  # through its "State: Down"
    assert down.rstrip().endswith("State: Down")
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, down), "--nic",
                            "mlx5_11:link_layer=ethernet,rate=400")
    assert code == 1 and "mlx5_11: port DOWN" in whats(verdict)
    assert not any(c.startswith("mlx5_11: not in") for c in verdict["cuts"])
    active = down.replace("State: Down", "State: Active")
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, active, "active.txt"), "--nic",
                            "mlx5_11:link_layer=ethernet,rate=400")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")


def test_ibstat_cut_after_every_expected_nic_passes(capsys, tmp_path):
    """Issue 47: the capture is cut in a later block, but the expected NICs' blocks are whole
    and Active at rate: nothing cut could change the verdict, so it passes (it was "cut");
    an expected NIC in the cut part keeps it incomplete."""
    lines = IBSTAT_DOWN.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line == "CA 'mlx5_11'")
    text = "\n".join(lines[:at + 9]).replace("State: Down", "State: Act") + "\n"
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, text), "--nic",
                            "mlx5_0:link_layer=ethernet,rate=400")
    assert (code, verdict["verdict"], verdict["cuts"]) == (0, "pass", [])
    code, [verdict] = check(capsys, "--ibstat", cut(tmp_path, text), "--nic",
                            "mlx5_0:link_layer=ethernet,rate=400", "--nic",
                            "mlx5_11:link_layer=ethernet,rate=400")
    assert (code, verdict["verdict"].split(":")[0]) == (3, "incomplete")


def test_dmesg_gsp_heartbeat_and_memsys_error_without_an_xid_fail(capsys):
    """Issue 47: open-gpu-kernel-modules#1230's GPU6 loses its GSP heartbeat, then a memory
    subsystem error, and the driver logs no Xid line: it gave no verdict; now it fails naming
    the driver's GPU number and both failures."""
    code, [verdict] = check(capsys, "--dmesg", str(
        XID_DIR / "open-gpu-kernel-modules-1230-gsp-heartbeat-memsys-error-no-xid.txt"))
    assert code == 1 and whats(verdict) == ("driver's GPU6: GSP heartbeat timed out, memory "
                                            "subsystem error (no Xid line)")
    assert "unusable until it is reset" in verdict["findings"][0]["cause"]


def test_dmesg_nv_err_reset_required_without_an_xid_fails(capsys):
    """Issue 47: a real NV_ERR_RESET_REQUIRED (open-gpu-kernel-modules#1045, an RTX 5080 whose
    GSP stopped answering; journalctl cut the long line with '>'): no Xid line, and it fails
    naming the driver's GPU number."""
    code, [verdict] = check(capsys, "--dmesg", str(
        XID_DIR / "open-gpu-kernel-modules-1045-nv-err-reset-required-no-xid.txt"))
    assert code == 1 and whats(verdict) == ("driver's GPU0: the driver says a reset is "
                                            "required (NV_ERR_RESET_REQUIRED) (no Xid line)")


def test_dmesg_a_contained_ecc_error_warns_by_the_catalogs_policy(capsys, tmp_path):
    """Issue 48 item 2: Xid 94 (NVIDIA's catalog: RESTART_APP) is said, not failed, unless the
    site's health_xid_policy drains on it (the same policy as the node check and the alert).
    The line is the driver's own format (open-gpu-kernel-modules 595.45.04,
    kern_gpu_error_cont_ga100.c)."""
    log = tmp_path / "dmesg.txt"
    log.write_text("NVRM: Xid (PCI:0000:01:00): 94, pid=7062, Contained: CE User Channel "
                   "(0x9). RST: No, D-RST: No\n")
    code, [verdict] = check(capsys, "--dmesg", str(log))
    assert code == 0 and [f["severity"] for f in verdict["findings"]] == ["warn"]
    assert 94 not in verdict["expectation"]["fatal_xids"]


def test_dmesg_xids_before_the_gpus_reset_mark_pass_and_are_said(capsys, tmp_path):
    """Issue 48: a pasted log with the reset mark `gpuinfra-health reset-gpu` writes (as
    `dmesg` prints it, timestamped) passes the GPU its Xid 154 failed, saying what it cleared;
    the same log without the mark fails."""
    log = (XID_DIR / "nvidia-forum-364958-xid62-then-154.txt").read_text()
    code, [verdict] = check(capsys, "--dmesg", cut(tmp_path, log))
    assert code == 1
    bus = verdict["findings"][0]["what"].split()[1].rstrip(":")
    reset = f"[ 9921.004711] gpuinfra-health GPU reset PCI:{bus}.0 (nvidia-smi -r)\n"
    code, [verdict] = check(capsys, "--dmesg", cut(tmp_path, log + reset))
    assert code == 0, whats(verdict)
    assert f"GPU {bus}: Xid 62, 154, 45 logged before the GPU's reset" in whats(verdict)
